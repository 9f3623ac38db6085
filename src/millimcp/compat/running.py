"""Serving a compat server: ``run(transport, ...)``, the apps and the settings they read.

Settings come from the constructor (mcp 1.x), from ``run()``/``*_app()`` keywords (mcp 2.x,
fastmcp) or from ``server.settings.x = ...`` before ``run()``. ``stdio`` and
``streamable-http``/``http`` are millimcp's own transports; the deprecated HTTP+SSE
transport (``sse``) is not served: ``run("sse")`` exits with one line that says so, and
``sse_app()``'s endpoints answer 501 with that line.
``transport_security`` maps onto millimcp's Host and Origin checks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from millimcp.transports.http import HttpConfig

if TYPE_CHECKING:
    from millimcp.server import Server

__all__ = ["SSE_UNSUPPORTED", "Runner", "Settings", "TransportSecuritySettings"]

SSE_UNSUPPORTED: Final = (
    "millimcp.compat: the deprecated HTTP+SSE transport ('sse') is not served by millimcp; "
    "run with transport='streamable-http' (clients: the Streamable HTTP URL ends in /mcp)"
)
_LOOPBACK: Final = ("127.0.0.1", "localhost", "::1", "[::1]")


@dataclass
class TransportSecuritySettings:
    """DNS-rebinding protection as the SDK configures it (``host:*`` patterns accepted)."""

    enable_dns_rebinding_protection: bool = True
    allowed_hosts: list[str] = field(default_factory=list)
    allowed_origins: list[str] = field(default_factory=list)


@dataclass
class Settings:
    """The SDK's ``server.settings``: mutable, read when the server starts serving."""

    host: str = "127.0.0.1"
    port: int = 8000
    mount_path: str = "/"
    sse_path: str = "/sse"
    message_path: str = "/messages/"
    streamable_http_path: str = "/mcp"
    json_response: bool = False
    stateless_http: bool = False
    debug: bool = False
    log_level: str = "INFO"
    transport_security: Any = None
    warn_on_duplicate_tools: bool = True
    warn_on_duplicate_resources: bool = True
    warn_on_duplicate_prompts: bool = True
    dependencies: list[str] = field(default_factory=list)
    lifespan: Any = None
    auth: Any = None

    def update(self, **values: Any) -> None:
        """Set the given fields (``None`` leaves a field as it is); unknown names raise
        ``TypeError``."""
        known = {f.name for f in dataclasses.fields(self)}
        for key, value in values.items():
            if key not in known:
                raise TypeError(f"unexpected settings keyword {key!r}")
            if value is not None:
                setattr(self, key, value)


def _host(pattern: str) -> str:
    pattern = pattern.strip().lower()
    if pattern.startswith("["):
        return pattern[: pattern.find("]") + 1]
    return pattern.rsplit(":", 1)[0] if pattern.count(":") == 1 else pattern


def http_config(settings: Settings, path: str | None) -> HttpConfig:
    """millimcp's HTTP settings for ``settings`` (paths, Host and Origin rules)."""
    security = settings.transport_security
    hosts: tuple[str, ...] | None
    origins: tuple[str, ...] | None = None
    if security is not None and not getattr(security, "enable_dns_rebinding_protection", True):
        hosts, origins = None, ("*",)
    elif security is not None:
        hosts = tuple({_host(p) for p in getattr(security, "allowed_hosts", []) or []}) or None
        origins = tuple(getattr(security, "allowed_origins", []) or []) or None
    elif settings.host in _LOOPBACK:
        hosts = HttpConfig().allowed_hosts
    else:  # bound beyond loopback without transport_security: the SDK checks no Host either
        hosts = None
    return HttpConfig(path=path, allowed_hosts=hosts, allowed_origins=origins)


class Runner:
    """``run()``, ``run_*_async()``, ``streamable_http_app()``, ``custom_route``."""

    server: Server
    settings: Settings
    _routes: list[Any]

    def custom_route(
        self,
        path: str,
        methods: list[str],
        name: str | None = None,
        include_in_schema: bool = True,
    ) -> Callable[[Any], Any]:
        """A plain Starlette route beside the MCP endpoint (needs Starlette)."""

        def register(fn: Any) -> Any:
            from starlette.routing import Route

            self._routes.append(
                Route(
                    path,
                    endpoint=fn,
                    methods=methods,
                    name=name,
                    include_in_schema=include_in_schema,
                )
            )
            return fn

        return register

    def run(self, transport: str = "stdio", mount_path: str | None = None, **options: Any) -> None:
        """Serve until interrupted: ``stdio``, ``streamable-http`` or ``http``."""
        if transport == "sse":
            print(SSE_UNSUPPORTED, file=sys.stderr)
            raise SystemExit(2)
        if transport == "stdio":
            self.server.run_stdio()
            return
        if transport not in ("streamable-http", "http"):
            raise ValueError(f"Unknown transport: {transport}")
        app = self._served_app(**options)
        from millimcp.server.serve import run_app

        level = str(self.settings.log_level).lower()
        run_app(
            app,
            host=self.settings.host,
            port=self.settings.port,
            log_level=level if level in ("critical", "error", "warning", "info") else "warning",
        )

    async def run_stdio_async(self) -> None:
        await self.server.serve_stdio()

    async def run_streamable_http_async(self, **options: Any) -> None:
        from millimcp.server.serve import front_for

        app = self._served_app(**options)
        if front_for(app, None) == "native":
            from millimcp.transports.native import serve_native

            await serve_native(app, host=self.settings.host, port=self.settings.port)
            return
        import uvicorn

        config = uvicorn.Config(
            app, host=self.settings.host, port=self.settings.port, log_level="warning"
        )
        await uvicorn.Server(config).serve()

    def _served_app(self, **options: Any) -> Any:
        """What ``run()`` serves: millimcp's endpoint app itself when no custom route needs
        Starlette (the native front serves it, by default), else ``streamable_http_app()``."""
        if self._routes:
            return self.streamable_http_app(**options)
        self._configure(**options)
        endpoint = self.settings.streamable_http_path
        return self.server.asgi(http=http_config(self.settings, endpoint))

    def _configure(
        self,
        *,
        host: str | None = None,
        port: int | None = None,
        streamable_http_path: str | None = None,
        path: str | None = None,
        json_response: bool | None = None,
        stateless_http: bool | None = None,
        transport_security: Any = None,
        log_level: str | None = None,
        **_: Any,
    ) -> None:
        """The settings ``run()`` and ``*_app()`` are given (``None`` keeps a setting)."""
        self.settings.update(
            host=host,
            port=port,
            streamable_http_path=streamable_http_path or path,
            json_response=json_response,
            stateless_http=stateless_http,
            transport_security=transport_security,
            log_level=log_level,
        )

    def streamable_http_app(self, **options: Any) -> Any:
        """The MCP endpoint (and the custom routes) as an ASGI app: a Starlette app when
        Starlette is installed (``.routes``, ``.router.lifespan_context``), else millimcp's.
        ``options``: ``host``, ``port``, ``streamable_http_path`` (or ``path``),
        ``json_response``, ``stateless_http``, ``transport_security``, ``log_level``."""
        self._configure(**options)
        endpoint = self.settings.streamable_http_path
        try:
            from starlette.applications import Starlette
            from starlette.routing import Route
        except ImportError:
            if self._routes:
                raise
            return self.server.asgi(http=http_config(self.settings, endpoint))
        mcp_app = self.server.asgi(http=http_config(self.settings, None))

        @contextlib.asynccontextmanager
        async def lifespan(_: Any) -> AsyncIterator[None]:
            async with self.server.running():
                yield

        routes = [*self._routes, Route(endpoint, endpoint=mcp_app)]
        return Starlette(routes=routes, lifespan=lifespan)

    http_app = streamable_http_app

    def sse_app(self, *_: Any, **__: Any) -> Any:
        """The deprecated HTTP+SSE endpoints, each answering 501 with :data:`SSE_UNSUPPORTED`
        (said once on stderr too): a server that mounts them beside ``streamable_http_app()``
        (``markitdown-mcp --http``) keeps serving Streamable HTTP. Needs Starlette."""
        try:
            from starlette.applications import Starlette
            from starlette.responses import PlainTextResponse
            from starlette.routing import Route
        except ImportError:
            raise NotImplementedError(SSE_UNSUPPORTED) from None
        print(SSE_UNSUPPORTED, file=sys.stderr)

        async def unsupported(_: Any) -> Any:
            return PlainTextResponse(SSE_UNSUPPORTED, status_code=501)

        return Starlette(
            routes=[
                Route(self.settings.sse_path, unsupported, methods=["GET"]),
                Route(self.settings.message_path, unsupported, methods=["POST"]),
            ]
        )

    @property
    def session_manager(self) -> _SessionManager:
        """The SDK's ``session_manager``: ``run()`` is the server's lifespan, for apps that
        mount ``streamable_http_app()`` inside their own."""
        return _SessionManager(self.server)


class _SessionManager:
    __slots__ = ("_server",)

    def __init__(self, server: Server) -> None:
        self._server = server

    def run(self) -> contextlib.AbstractAsyncContextManager[None]:
        return self._server.running()
