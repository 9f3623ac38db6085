"""Which protocol era a server speaks, as the 2026-07-28 versioning page says to find out.

A dual-era client tries the modern era first (``server/discover`` with the version in
``_meta`` and, over HTTP, in ``MCP-Protocol-Version``). A result, or a *recognized modern
error*, means a modern server; anything else (an HTTP 400/404/405 without such an error,
``-32601``, ``-32600``, ``-32000``, a ``-32022`` that lists no modern version, over stdio also
no answer in time) means a handshake-era server, and the client falls back to ``initialize``.

The answer is a property of the server, so it is remembered per server (the URL, or the
stdio command line) for the life of the process, and probed again when a remembered
assumption fails. :class:`Negotiation` runs all of it: the probe, ``initialize`` (again
after a lost session), and the choice of a version when a server refuses one (``-32022``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from typing import Any, Final, Literal, Protocol, TypeVar

import msgspec

from millimcp.client.envelope import Envelope, trace_bytes
from millimcp.client.inbound import Inbound
from millimcp.client.link import Link
from millimcp.errors import (
    CallTimeout,
    HeaderMismatch,
    MissingClientCapability,
    ProtocolError,
    RequestRejected,
    UnsupportedProtocolVersion,
)
from millimcp.protocol import LEGACY_VERSIONS, MODERN_VERSIONS, encode_notification
from millimcp.protocol.eras import Era
from millimcp.protocol.methods import ReplyDecoder, reply_decoder
from millimcp.protocol.types import (
    META_SERVER_INFO,
    DiscoverResult,
    Implementation,
    InitializeResult,
    ServerCapabilities,
)
from millimcp.resilience.policy import Timeout

__all__ = [
    "Era",
    "Negotiation",
    "Requester",
    "choose_version",
    "forget",
    "is_modern_error",
    "modern_version_for",
    "offered_versions",
    "remember",
    "remembered",
]

log: Final = logging.getLogger("millimcp.client")

T = TypeVar("T")

_ERAS: dict[str, tuple[Era, str]] = {}
"""server key -> (era, protocol version) found by the last probe."""
_MAX_REMEMBERED: Final = 1024
_DISCOVER: Final[ReplyDecoder[DiscoverResult]] = reply_decoder("server/discover")
_INITIALIZE: Final[ReplyDecoder[InitializeResult]] = reply_decoder("initialize")


def remembered(key: str) -> tuple[Era, str] | None:
    return _ERAS.get(key)


def remember(key: str, era: Era, version: str) -> None:
    if len(_ERAS) >= _MAX_REMEMBERED and key not in _ERAS:
        _ERAS.clear()
    _ERAS[key] = (era, version)


def forget(key: str) -> None:
    _ERAS.pop(key, None)


def offered_versions(error: BaseException) -> list[str]:
    """The versions a ``-32022`` error lists in ``data.supported`` (empty when none)."""
    data: Any = getattr(error, "data", None)
    supported = data.get("supported") if isinstance(data, dict) else None
    if not isinstance(supported, list):
        return []
    return [v for v in supported if isinstance(v, str)]


def choose_version(offered: Iterable[str], ours: Iterable[str]) -> str | None:
    """Our most preferred version among those offered."""
    offered = set(offered)
    for version in ours:
        if version in offered:
            return version
    return None


def is_modern_error(error: BaseException) -> bool:
    """Whether an error to a modern request shows that the server speaks the modern era.

    ``-32022`` counts only when it lists a modern version (a handshake-era server that checks
    versions lists its own); header and capability errors exist only in the modern era.
    """
    if isinstance(error, UnsupportedProtocolVersion):
        return any(v not in LEGACY_VERSIONS for v in offered_versions(error))
    return isinstance(error, HeaderMismatch | MissingClientCapability)


def modern_version_for(error: ProtocolError) -> str | None:
    """The modern version to retry with after ``-32022``, when the server lists one we speak."""
    return choose_version(offered_versions(error), MODERN_VERSIONS)


class Requester(Protocol):
    """How the negotiation sends its requests (the client's call pipeline)."""

    async def call(
        self,
        method: str,
        params: dict[str, Any],
        kind: ReplyDecoder[T],
        *,
        timeout: Timeout | None = None,
    ) -> T:
        """A request through the whole pipeline (deadline, gate, retries)."""
        ...

    async def send_once(self, method: str, params: dict[str, Any], trace: bytes) -> msgspec.Raw:
        """One attempt, outside the gate, with no retry and no recovery: its raw result."""
        ...


class Negotiation:
    """The era and version one client uses with one server, and what the server said of
    itself (``server_info``, ``server_capabilities``, ``instructions``).

    ``forced`` is ``"auto"`` (probe, remember the answer under ``key``), ``"modern"`` or
    ``"handshake"``; the era in use is written to ``envelope``. ``answers_requests``: the
    client has handlers, so a handshake-era HTTP session opens its GET stream at once.
    """

    def __init__(
        self,
        link: Link,
        envelope: Envelope,
        inbound: Inbound,
        *,
        key: str,
        forced: Literal["auto", "modern", "handshake"],
        timeout: Timeout,
        answers_requests: bool,
    ) -> None:
        self.link = link
        self.envelope = envelope
        self.inbound = inbound
        self.key = key
        self.forced = forced
        self.timeout = timeout
        self.answers_requests = answers_requests
        self.server_info: Implementation | None = None
        self.server_capabilities = ServerCapabilities()
        self.instructions: str | None = None

    def __repr__(self) -> str:
        return f"<Negotiation {self.key} forced={self.forced} {self.envelope!r}>"

    async def detect(self, requester: Requester) -> None:
        """Find the era on open: forced, remembered, or probed."""
        if self.forced == "handshake":
            await self.initialize(requester)
            return
        if self.forced == "auto":
            known = remembered(self.key)
            if known is not None and known[0] == "handshake":
                try:
                    await self.initialize(requester)
                    return
                except (ProtocolError, RequestRejected):
                    forget(self.key)  # the server changed: probe again
        await self.discover(requester)

    async def discover(self, requester: Requester) -> None:
        """``server/discover``, the modern probe; falls back to ``initialize`` on the spec's
        signals unless the era is forced to modern."""
        version = MODERN_VERSIONS[0]
        http = self.envelope.http
        timeout = self.timeout
        if not http:  # a handshake-era stdio server may never answer the probe
            timeout = Timeout(total=timeout.connect or 5.0)
        for _ in range(3):
            self.envelope.use_modern(version)
            try:
                page = await requester.call("server/discover", {}, _DISCOVER, timeout=timeout)
            except (ProtocolError, RequestRejected, CallTimeout) as exc:
                if isinstance(exc, UnsupportedProtocolVersion) and is_modern_error(exc):
                    other = modern_version_for(exc)
                    if other is not None:
                        # Once more with the version it lists, even the one just refused
                        # (a server may refuse a first request whatever it carries).
                        version = other
                        continue
                if self.forced == "modern" or is_modern_error(exc):
                    raise
                if isinstance(exc, CallTimeout) and http:
                    raise
                log.debug("server/discover failed (%r): falling back to initialize", exc)
                try:
                    await self.initialize(requester)
                except UnsupportedProtocolVersion as refused:
                    # A stdio server slow to start (a loaded machine) answers the probe after
                    # its short timeout and then refuses initialize as a modern connection:
                    # ask again, with the call's own timeout.
                    if not (isinstance(exc, CallTimeout) and is_modern_error(refused)):
                        raise
                    timeout = self.timeout
                    continue
                return
            if page.supported_versions and version not in page.supported_versions:
                other = choose_version(page.supported_versions, MODERN_VERSIONS)
                if other is None:
                    if self.forced != "modern" and choose_version(
                        page.supported_versions, LEGACY_VERSIONS
                    ):
                        await self.initialize(requester)
                        return
                    raise UnsupportedProtocolVersion(
                        "the server speaks none of the client's protocol versions",
                        {"supported": page.supported_versions, "ours": list(MODERN_VERSIONS)},
                    )
                self.envelope.use_modern(other)
            self.server_capabilities = page.capabilities
            self.instructions = page.instructions
            info = (page.meta or {}).get(META_SERVER_INFO)
            if isinstance(info, dict):
                with contextlib.suppress(msgspec.ValidationError):
                    self.server_info = msgspec.convert(info, Implementation)
            self._remember("modern")
            return
        raise UnsupportedProtocolVersion("the server refused every modern version offered")

    async def initialize(self, requester: Requester) -> None:
        """The handshake era's ``initialize`` + ``notifications/initialized`` (again after a
        lost session). Runs outside the gate: it may be called by a call holding a slot."""
        envelope = self.envelope
        envelope.use_handshake(None)
        self.link.reset_session()
        params = {
            "protocolVersion": LEGACY_VERSIONS[0],
            "capabilities": envelope.capabilities,
            "clientInfo": envelope.client_info,
        }
        raw = await requester.send_once("initialize", params, trace_bytes())
        result = _INITIALIZE.decode(raw, False)
        assert isinstance(result, InitializeResult)  # no input_required outside MRTR
        if result.protocol_version not in LEGACY_VERSIONS:
            raise UnsupportedProtocolVersion(
                f"the server chose protocol version {result.protocol_version!r}, which the "
                "client does not speak",
                {"supported": [result.protocol_version], "ours": list(LEGACY_VERSIONS)},
            )
        envelope.use_handshake(result.protocol_version)
        self.server_info = result.server_info
        self.server_capabilities = result.capabilities
        self.instructions = result.instructions
        await self.link.send(
            encode_notification("notifications/initialized"),
            headers=envelope.headers_for("", None),
        )
        if envelope.log_level is not None and result.capabilities.logging is not None:
            level = {"level": envelope.log_level}  # a handshake session's level is its own
            await requester.send_once("logging/setLevel", level, trace_bytes())
        self._remember("handshake")
        inbound = self.inbound
        if envelope.http and (inbound.pumping or self.answers_requests):
            # A client that declared roots, sampling or elicitation may be asked outside any
            # call (roots/list after initialized): those requests come on the GET stream,
            # which the server drops while none is open. The old session's stream ended.
            inbound.stop_pump()
            await inbound.open_stream(self.timeout.connect or 5.0)

    async def switch_version(self, error: UnsupportedProtocolVersion, requester: Requester) -> bool:
        """After ``-32022``: use a version the server lists (modern, else ``initialize``
        when the era is not forced to modern). Whether the request should be sent again."""
        envelope = self.envelope
        offered = offered_versions(error)
        modern = choose_version(offered, MODERN_VERSIONS)
        if modern is not None and (envelope.era != "modern" or modern != envelope.version):
            envelope.use_modern(modern)
            self._remember("modern")
            return True
        if self.forced != "modern" and choose_version(offered, LEGACY_VERSIONS):
            await self.initialize(requester)
            return True
        return False

    def _remember(self, era: Era) -> None:
        """Remember what a probe found (a forced era proves nothing about the server's
        preference)."""
        version = self.envelope.version
        if self.forced == "auto" and version is not None:
            remember(self.key, era, version)
