"""The client's side of MCP authorization: drives :class:`millimcp.auth.flow.ClientFlow`.

An :class:`Authorizer` is the hook an HTTP link calls; it knows nothing of the link:

- ``await authorizer.before()`` before each request: the ``Authorization`` value to send
  (None without a token); renews a token about to expire first;
- ``authorizer.wants(status, www_authenticate)``: is this refusal a challenge (401, or 403
  with ``insufficient_scope``)?
- ``await authorizer.challenge(status, www_authenticate, sent)``: run the flow (one at a
  time per authorizer: concurrent requests wait for it, and a request whose token was
  replaced meanwhile just resends), True when the request should be resent;
- ``authorizer.exhausted()``: ``max_authorizations`` flows ran in a row and the server still
  refuses: give up (answer the refusal); ``authorizer.settled()`` after any other answer
  ends the streak. Counted per authorizer, not per attempt, so that a request the call
  pipeline retries does not start the count again (a minute after the last flow, it does).

Its own aiohttp session talks to the authorization servers (no redirects followed, bodies
capped, 30 s per request); :class:`~millimcp.auth.HeadlessRedirect` and
:class:`~millimcp.auth.LoopbackBrowser` take the user agent through the authorization
request, or any :class:`~millimcp.auth.RedirectHandler`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import webbrowser
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Final, TypeVar
from urllib.parse import urljoin

import aiohttp

from millimcp.auth.challenge import parse_bearer
from millimcp.auth.client_config import (
    BearerToken,
    ClientCredentials,
    HeadlessRedirect,
    LoopbackBrowser,
    OAuth,
    RedirectHandler,
)
from millimcp.auth.flow import ClientFlow
from millimcp.auth.steps import HttpRequest, HttpResponse, Load, Save, Step, UserRedirect
from millimcp.errors import AuthorizationFailed, ConnectionLost

__all__ = ["AuthConfig", "Authorizer"]

log: Final = logging.getLogger("millimcp.client.auth")

AuthConfig = OAuth | ClientCredentials | BearerToken
_MAX_BODY: Final = 1024 * 1024
_TIMEOUT_S: Final = 30.0
_STREAK_S: Final = 60.0
"""After giving up, how long a new challenge is still answered with the refusal."""
_PAGE: Final = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nConnection: close\r\n\r\n"
    b"<!doctype html><title>Authorized</title><p>Done: you may close this window.</p>"
)


_Reply = TypeVar("_Reply")


class Authorizer:
    """One link's authorization (see the module docstring)."""

    def __init__(self, auth: AuthConfig, server_url: str, *, ssl: Any = None) -> None:
        self._static: str | None = None
        self._flow: ClientFlow | None = None
        self.max_authorizations = 0
        if isinstance(auth, BearerToken):
            self._static = f"Bearer {auth.token}"
        else:
            self.max_authorizations = auth.max_authorizations
            redirect_uri = None
            if isinstance(auth, OAuth) and not isinstance(auth.redirect, LoopbackBrowser):
                redirect_uri = auth.redirect.redirect_uri
            self._flow = ClientFlow(server_url, auth, redirect_uri=redirect_uri)
        self._config = auth
        self._ssl = ssl
        self._lock = asyncio.Lock()
        self._session: aiohttp.ClientSession | None = None
        self._listener: socket.socket | None = None
        self._streak = 0
        self._last_flow = 0.0

    def __repr__(self) -> str:
        return f"<Authorizer {type(self._config).__name__} {self._flow!r}>"

    def header(self) -> str | None:
        if self._flow is None:
            return self._static
        return self._flow.authorization()

    async def before(self) -> str | None:
        flow = self._flow
        if flow is not None and flow.due():
            async with self._lock:
                if flow.due():
                    await self._drive(flow.prepare())
        return self.header()

    def wants(self, status: int, www_authenticate: str | None) -> bool:
        if self._flow is None:
            return False
        if status == 401:
            return True
        if status == 403:
            bearer = parse_bearer(www_authenticate)
            return bearer is not None and bearer.error == "insufficient_scope"
        return False

    def exhausted(self) -> bool:
        if self._streak < self.max_authorizations:
            return False
        if time.monotonic() - self._last_flow > _STREAK_S:
            self._streak = 0  # long enough ago: a new operation may authorize again
            return False
        return True

    def settled(self) -> None:
        self._streak = 0

    async def resend_until_settled(
        self,
        send: Callable[[str | None], Awaitable[_Reply]],
        seen: Callable[[_Reply], tuple[int, str | None]],
        drop: Callable[[_Reply], None],
    ) -> _Reply:
        """``send(token)`` until the answer is not a challenge this authorizer takes, running
        the flow between tries (the server refused the request before doing anything, so
        the same request goes again); once exhausted, the refusal is the answer. ``seen``
        reads an answer's status and ``WWW-Authenticate``; ``drop`` lets a refusal go. A
        connection lost on the try right after a flow is tried once more: a flow takes
        seconds (a person: minutes), so a kept-alive connection may have been closed under
        it by the server's keep-alive timeout."""
        after_flow = False
        while True:
            sent = await self.before()
            try:
                reply = await send(sent)
            except ConnectionLost:
                if not after_flow:
                    raise
                after_flow = False
                continue
            status, challenge = seen(reply)
            if not self.wants(status, challenge):
                self.settled()
                return reply
            if self.exhausted():
                return reply
            drop(reply)
            await self.challenge(status, challenge, sent)
            after_flow = True

    async def challenge(self, status: int, www_authenticate: str | None, sent: str | None) -> bool:
        flow = self._flow
        if flow is None:
            return False
        async with self._lock:
            if self.header() != sent:
                return True  # another request's flow replaced the token meanwhile
            if isinstance(self._config, OAuth) and isinstance(
                self._config.redirect, LoopbackBrowser
            ):
                flow.redirect_uri = self._loopback_uri(self._config.redirect)
            self._streak += 1
            self._last_flow = time.monotonic()
            await self._drive(flow.challenged(status, www_authenticate))
            return True

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()

    # -- driving the flow ----------------------------------------------------------------

    async def _drive(self, flow: Generator[Step, Any, None]) -> None:
        answer: Any = None
        while True:
            try:
                step = flow.send(answer)
            except StopIteration:
                return
            try:
                answer = await self._do(step)
            except BaseException as exc:
                flow.close()
                if isinstance(exc, aiohttp.ClientError | TimeoutError):
                    raise AuthorizationFailed(f"authorization request failed: {exc!r}") from None
                raise

    async def _do(self, step: Step) -> Any:
        config = self._config
        assert not isinstance(config, BearerToken)
        if isinstance(step, HttpRequest):
            return await self._http(step, follow=False)
        if isinstance(step, Load):
            return await config.storage.load(step.resource)
        if isinstance(step, Save):
            await config.storage.save(step.resource, step.credentials)
            return None
        assert isinstance(config, OAuth)
        return await self._redirect(config.redirect, step)

    def _http_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._ssl if self._ssl is not None else True),
                timeout=aiohttp.ClientTimeout(total=_TIMEOUT_S),
                headers={"User-Agent": "millimcp"},
            )
        return self._session

    async def _http(self, request: HttpRequest, *, follow: bool) -> HttpResponse:
        session = self._http_session()
        async with session.request(
            request.method,
            request.url,
            headers=dict(request.headers),
            data=request.body,
            allow_redirects=follow,
        ) as response:
            body = await response.content.read(_MAX_BODY + 1)
            if len(body) > _MAX_BODY:
                raise AuthorizationFailed(f"{request.url} answered more than {_MAX_BODY} bytes")
            headers = {k.lower(): v for k, v in response.headers.items()}
            log.debug("%s %s -> %d", request.method, request.url.split("?")[0], response.status)
            return HttpResponse(response.status, headers, body)

    async def _redirect(
        self, handler: HeadlessRedirect | LoopbackBrowser | RedirectHandler, step: UserRedirect
    ) -> str:
        if isinstance(handler, HeadlessRedirect):
            response = await self._http(HttpRequest("GET", step.url), follow=False)
            location = response.headers.get("location")
            if response.status not in (301, 302, 303, 307, 308) or location is None:
                raise AuthorizationFailed(
                    f"the authorization endpoint did not redirect (HTTP {response.status})"
                )
            return urljoin(step.url, location)
        if isinstance(handler, LoopbackBrowser):
            return await self._browser(handler, step)
        return await handler(step.url)

    # -- a person: the browser and a loopback listener ------------------------------------

    def _loopback_uri(self, browser: LoopbackBrowser) -> str:
        if self._listener is None:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.bind(("127.0.0.1", browser.port))
            listener.listen(8)
            listener.setblocking(False)
            self._listener = listener
        port = self._listener.getsockname()[1]
        return f"http://127.0.0.1:{port}{browser.path}"

    async def _browser(self, browser: LoopbackBrowser, step: UserRedirect) -> str:
        assert self._listener is not None
        arrived: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                line = await asyncio.wait_for(reader.readline(), 10)
                parts = line.decode("latin-1").split()
                if len(parts) >= 2 and parts[1].startswith(browser.path) and not arrived.done():
                    arrived.set_result(urljoin(step.redirect_uri, parts[1]))
                writer.write(_PAGE)
                await writer.drain()
            except (OSError, TimeoutError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(on_connection, sock=self._listener.dup())
        try:
            if browser.open_browser:
                await asyncio.to_thread(webbrowser.open, step.url)
            else:
                log.warning("open this URL to authorize: %s", step.url)
            async with asyncio.timeout(browser.timeout_s):
                return await arrived
        finally:
            server.close()
            with contextlib.suppress(Exception):
                await server.wait_closed()
