"""The client core: one request from the application to a result, in either era.

The call pipeline, top to bottom (each stage set once, trio-style, and spent from below):

1. **deadline** (:func:`~millimcp.resilience.deadline.run_with_deadline`): the call's total
   time, queue wait, retries, backoff and MRTR rounds included; on expiry the request in
   flight is cancelled (the link closes the stream or sends ``notifications/cancelled``)
   and :class:`~millimcp.errors.CallTimeout` is raised;
2. **MRTR rounds** (modern era): an ``input_required`` result runs the client's handlers and
   sends the request again with ``inputResponses`` and the server's ``requestState``;
3. **gate** (:class:`~millimcp.resilience.gate.CallGate`): the cap on calls in flight and its
   bounded queue;
4. **retries** (:func:`~millimcp.resilience.retry.call_with_retries`): only what is safe;
5. **attempt**: a fresh id, the body encoded once, the headers from a small cache, the link;
   a ``-32022`` renegotiates the version once, a lost handshake-era session is initialized
   again once.

The constant part of each request's ``_meta`` (version, capabilities, identity) is encoded
once per era; per call only the ``traceparent`` (and a ``progressToken`` when asked) is
spliced in. Replies are decoded once, into the result type of the method.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar

import msgspec

from millimcp.client import era as eras
from millimcp.client.handlers import Handlers
from millimcp.client.link import Link, Reply
from millimcp.client.results import ClientStats
from millimcp.codec import encode
from millimcp.errors import (
    CallTimeout,
    ClientError,
    InternalError,
    NotSent,
    Overloaded,
    ProtocolError,
    RequestRejected,
    SessionNotFound,
    UnsupportedProtocolVersion,
)
from millimcp.protocol import (
    LEGACY_VERSIONS,
    MODERN_VERSIONS,
    Message,
    encode_error,
    encode_header_value,
    encode_notification,
    encode_request,
)
from millimcp.protocol.jsonrpc import decode_error
from millimcp.protocol.methods import ReplyDecoder, reply_decoder
from millimcp.protocol.types import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    DiscoverResult,
    Implementation,
    InitializeResult,
    InputRequiredResult,
    LegacyEmptyResult,
    LoggingMessageParams,
    ProgressParams,
    ServerCapabilities,
)
from millimcp.resilience.deadline import Deadline, run_with_deadline
from millimcp.resilience.gate import CallGate
from millimcp.resilience.policy import Limits, Retry, Timeout
from millimcp.resilience.retry import call_with_retries, status_of

if TYPE_CHECKING:
    from millimcp.client.core_subscribe import Subscription

__all__ = ["MAX_ROUNDS", "Core", "OnProgress", "traceparent"]

log: Final = logging.getLogger("millimcp.client")
server_log: Final = logging.getLogger("millimcp.client.server")

T = TypeVar("T")

MAX_ROUNDS: Final = 8
"""MRTR rounds one call may take before the client gives up."""

OnProgress = Callable[[float, float | None, str | None], Awaitable[None] | None]
"""``on_progress(progress, total, message)``: a plain or an async function."""

_UNSET: Final[Any] = msgspec.UNSET
_NO_HEADERS: Final[Mapping[str, str]] = {}
_MAX_HEADER_SETS: Final = 4096
_LOG_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


_PROGRESS: Final = msgspec.json.Decoder(ProgressParams)
_SERVER_LOG: Final = msgspec.json.Decoder(LoggingMessageParams)
_TRACE_TAIL: Final = b'"}'


DISCOVER: Final[ReplyDecoder[DiscoverResult]] = reply_decoder("server/discover")
INITIALIZE: Final[ReplyDecoder[InitializeResult]] = reply_decoder("initialize")
EMPTY: Final[ReplyDecoder[LegacyEmptyResult]] = reply_decoder("resources/subscribe")


_otel_trace: Any = None


def traceparent() -> str:
    """A W3C ``traceparent``: the current OpenTelemetry span's when one is active, else a
    fresh random trace (flags ``00``: nothing was recorded on this side)."""
    trace = _otel_trace
    if trace:
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            return (
                f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
            )
    return f"00-{random.getrandbits(128) or 1:032x}-{random.getrandbits(64) or 1:016x}-00"


def _load_otel() -> None:
    global _otel_trace
    if _otel_trace is None:
        try:
            from opentelemetry import trace
        except ImportError:
            _otel_trace = False
        else:
            _otel_trace = trace


def subscription_of(params: Any) -> Any:
    """The subscription id a notification's ``_meta`` names, if any."""
    if isinstance(params, dict):
        meta = params.get("_meta")
        if isinstance(meta, dict):
            return meta.get(META_SUBSCRIPTION_ID)
    return None


class Core:
    """Requests to one server through one :class:`~millimcp.client.link.Link`."""

    def __init__(
        self,
        link: Link,
        key: str,
        *,
        limits: Limits,
        timeout: Timeout,
        retry: Retry | None,
        era: str,
        handlers: Handlers,
        client_info: Implementation,
        extensions: Mapping[str, Any] | None = None,
    ) -> None:
        if era not in ("auto", "modern", "handshake"):
            raise ValueError(f"era must be 'auto', 'modern' or 'handshake', not {era!r}")
        self.link = link
        self.key = key
        self.http = link.kind == "http"
        self.limits = limits
        self.timeout = timeout
        self.retry = retry
        self.forced = era
        self.handlers = handlers
        self.client_info = client_info
        self.capabilities = handlers.capabilities()
        if extensions:  # declared in the modern _meta and in initialize alike
            self.capabilities = msgspec.structs.replace(
                self.capabilities, extensions=dict(extensions)
            )
        self.gate = CallGate(limits)
        self.stats = ClientStats()
        self.era: eras.Era | None = None
        self.version: str | None = None
        self.server_info: Implementation | None = None
        self.server_capabilities = ServerCapabilities()
        self.instructions: str | None = None
        self.on_notification: Callable[[str], None] | None = None
        """Called with the method of each notification the server starts (list changes,
        resource updates), before the subscriptions get it."""
        self.subscriptions: set[Subscription] = set()
        self._ids = itertools.count(1)
        self._tokens = itertools.count(1)
        self._progress: dict[int | str, tuple[OnProgress | None, Deadline]] = {}
        self._meta_head = b'{"traceparent":"'
        self._headers: dict[tuple[str, str | None], Mapping[str, str]] = {}
        self._generation = 0
        self._lock = asyncio.Lock()
        self._ready = False
        self._pump: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._modern_caps = msgspec.to_builtins(self.capabilities)
        self._info = msgspec.to_builtins(client_info)
        _load_otel()

    def __repr__(self) -> str:
        return (
            f"<Core {self.key} era={self.era} version={self.version} "
            f"in_flight={self.gate.in_flight} queued={self.gate.queued}>"
        )

    # -- lifecycle ----------------------------------------------------------------------

    async def open(self) -> None:
        """Open the link and find the server's era (probe, or the remembered answer)."""
        await self.link.open()
        try:
            if not self.http:
                self.start_pump()
            await self._detect()
        except BaseException:
            await self.close()
            raise
        self._ready = True

    async def close(self) -> None:
        for subscription in tuple(self.subscriptions):
            await subscription.aclose()
        tasks = [t for t in (self._pump, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        self._pump = None
        self._tasks.clear()
        await self.link.close()

    def start_pump(self) -> None:
        """Read what the server starts outside requests (stdio; HTTP: the GET stream)."""
        if self._pump is None or self._pump.done():
            self._pump = asyncio.get_running_loop().create_task(self._read_unsolicited())

    # -- era ----------------------------------------------------------------------------

    async def _detect(self) -> None:
        if self.forced == "handshake":
            await self.initialize()
            return
        if self.forced == "auto":
            known = eras.remembered(self.key)
            if known is not None and known[0] == "handshake":
                try:
                    await self.initialize()
                    return
                except (ProtocolError, RequestRejected):
                    eras.forget(self.key)  # the server changed: probe again
        await self._discover()

    async def _discover(self) -> None:
        """``server/discover``, the modern probe; falls back to ``initialize`` on the spec's
        signals unless the era is forced to modern."""
        version = MODERN_VERSIONS[0]
        timeout = self.timeout
        if not self.http:  # a handshake-era stdio server may never answer the probe
            timeout = Timeout(total=timeout.connect or 5.0)
        for _ in range(2):
            self.use_modern(version)
            try:
                page = await self.call("server/discover", {}, DISCOVER, timeout=timeout)
            except (ProtocolError, RequestRejected, CallTimeout) as exc:
                if isinstance(exc, UnsupportedProtocolVersion) and eras.is_modern_error(exc):
                    other = eras.modern_version_for(exc)
                    if other is not None:
                        # Once more with the version it lists, even the one just refused
                        # (a server may refuse a first request whatever it carries).
                        version = other
                        continue
                if self.forced == "modern" or eras.is_modern_error(exc):
                    raise
                if isinstance(exc, CallTimeout) and self.http:
                    raise
                log.debug("server/discover failed (%r): falling back to initialize", exc)
                await self.initialize()
                return
            assert isinstance(page, DiscoverResult)
            if page.supported_versions and version not in page.supported_versions:
                other = eras.choose_version(page.supported_versions, MODERN_VERSIONS)
                if other is None:
                    if self.forced != "modern" and eras.choose_version(
                        page.supported_versions, LEGACY_VERSIONS
                    ):
                        await self.initialize()
                        return
                    raise UnsupportedProtocolVersion(
                        "the server speaks none of the client's protocol versions",
                        {"supported": page.supported_versions, "ours": list(MODERN_VERSIONS)},
                    )
                self.use_modern(other)
            self.server_capabilities = page.capabilities
            self.instructions = page.instructions
            info = (page.meta or {}).get(META_SERVER_INFO)
            if isinstance(info, dict):
                with contextlib.suppress(msgspec.ValidationError):
                    self.server_info = msgspec.convert(info, Implementation)
            self._remember("modern")
            return
        raise UnsupportedProtocolVersion("the server refused every modern version offered")

    async def initialize(self) -> None:
        """The handshake era's ``initialize`` + ``notifications/initialized`` (again after a
        lost session). Runs outside the gate: it may be called by a call holding a slot."""
        self.use_handshake(None)
        self.link.reset_session()
        params = {
            "protocolVersion": LEGACY_VERSIONS[0],
            "capabilities": self._modern_caps,
            "clientInfo": self._info,
        }
        raw = await self._attempt("initialize", params, None, None, None, traceparent(), False)
        result = INITIALIZE.decode(raw, False)
        assert isinstance(result, InitializeResult)
        if result.protocol_version not in LEGACY_VERSIONS:
            raise UnsupportedProtocolVersion(
                f"the server chose protocol version {result.protocol_version!r}, which the "
                "client does not speak",
                {"supported": [result.protocol_version], "ours": list(LEGACY_VERSIONS)},
            )
        self.use_handshake(result.protocol_version)
        self.server_info = result.server_info
        self.server_capabilities = result.capabilities
        self.instructions = result.instructions
        await self.link.send(
            encode_notification("notifications/initialized"), headers=self.headers_for("", None)
        )
        self._remember("handshake")
        if self.http and (self._pump is not None or self._answers_requests()):
            # A client that declared roots, sampling or elicitation may be asked outside any
            # call (roots/list after initialized): those requests come on the GET stream.
            if self._pump is not None:
                self._pump.cancel()  # the GET stream of the old session ended with it
                self._pump = None
            await self._open_stream()

    async def _open_stream(self) -> None:
        """Open the handshake era's GET stream and wait until it is up (or refused).

        A server sends the requests that belong to no call (elicitation, sampling, roots
        asked from its own tasks) on that stream, and drops them while none is open: a
        client with handlers opens it right after ``initialize``.
        """
        self.start_pump()
        pump = self._pump
        ready = getattr(self.link, "stream_ready", None)
        if pump is None or ready is None:
            return
        waiter = asyncio.ensure_future(ready.wait())
        try:
            await asyncio.wait(
                {waiter, pump},
                timeout=self.timeout.connect or 5.0,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            waiter.cancel()

    def _answers_requests(self) -> bool:
        caps = self.capabilities
        return caps.roots is not None or caps.sampling is not None or caps.elicitation is not None

    def _remember(self, era: eras.Era) -> None:
        """Remember what a probe found (a forced era proves nothing about the server's
        preference)."""
        if self.forced == "auto" and self.version is not None:
            eras.remember(self.key, era, self.version)

    def use_modern(self, version: str) -> None:
        self.era = "modern"
        self.version = version
        meta = {
            META_PROTOCOL_VERSION: version,
            META_CLIENT_CAPABILITIES: self._modern_caps,
            META_CLIENT_INFO: self._info,
        }
        self._meta_head = encode(meta)[:-1] + b',"traceparent":"'
        self._headers.clear()
        self._generation += 1

    def use_handshake(self, version: str | None) -> None:
        self.era = "handshake"
        self.version = version
        self._meta_head = b'{"traceparent":"'
        self._headers.clear()
        self._generation += 1

    def headers_for(self, method: str, name: str | None) -> Mapping[str, str]:
        """The MCP headers of a request (cached per method and name)."""
        if not self.http:
            return _NO_HEADERS
        key = (method, name)
        headers = self._headers.get(key)
        if headers is None:
            version = self.version
            if self.era == "modern" and version is not None:
                headers = {"MCP-Protocol-Version": version, "Mcp-Method": method}
                if name is not None:
                    headers["Mcp-Name"] = encode_header_value(name)
            elif version is not None:
                headers = {"MCP-Protocol-Version": version}
            else:
                headers = _NO_HEADERS
            if len(self._headers) >= _MAX_HEADER_SETS:
                self._headers.clear()
            self._headers[key] = headers
        return headers

    # -- the call pipeline ----------------------------------------------------------------

    async def call(
        self,
        method: str,
        params: dict[str, Any],
        kind: ReplyDecoder[T],
        *,
        name: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
        idempotent: bool = True,
        timeout: Timeout | None = None,
        on_progress: OnProgress | None = None,
    ) -> T:
        """Run one request to its final result (see the module docstring)."""
        self.stats.calls += 1
        if timeout is None:
            timeout = self.timeout
        deadline = Deadline(
            timeout.total, reset_on_progress=timeout.reset_on_progress, hard_cap=timeout.hard_cap
        )
        token: int | None = None
        if on_progress is not None or timeout.reset_on_progress:
            token = next(self._tokens)
            self._progress[token] = (on_progress, deadline)
        try:
            return await run_with_deadline(
                lambda: self._rounds(
                    method, params, kind, name, extra_headers, idempotent, deadline, token
                ),
                deadline,
                what=method if name is None else f"{method} {name!r}",
            )
        except CallTimeout:
            self.stats.timeouts += 1
            raise
        finally:
            if token is not None:
                del self._progress[token]

    async def _rounds(
        self,
        method: str,
        params: dict[str, Any],
        kind: ReplyDecoder[T],
        name: str | None,
        extra: Mapping[str, str] | None,
        idempotent: bool,
        deadline: Deadline,
        token: int | None,
    ) -> T:
        trace = traceparent()
        gate = self.gate
        for _ in range(MAX_ROUNDS):
            async with gate:
                raw = await call_with_retries(
                    lambda params=params: self._attempt(  # type: ignore[misc]
                        method, params, name, extra, token, trace, self._ready
                    ),
                    self.retry,
                    idempotent=idempotent,
                    deadline=deadline,
                    on_retry=self._count_retry,
                )
            result = kind.decode(raw, self.era == "modern")
            if type(result) is not InputRequiredResult:
                return result  # type: ignore[return-value]
            params = await self._answer_inputs(params, result)
        raise ClientError(f"{method}: the server asked for input {MAX_ROUNDS} times; gave up")

    async def _attempt(
        self,
        method: str,
        params: dict[str, Any],
        name: str | None,
        extra: Mapping[str, str] | None,
        token: int | None,
        trace: str,
        recover: bool,
    ) -> msgspec.Raw:
        """One request on the link: its raw result, or the error it came back with."""
        while True:
            generation = self._generation
            request_id = next(self._ids)
            head = self._meta_head
            if token is None:
                meta = head + trace.encode() + _TRACE_TAIL
            else:
                meta = head + trace.encode() + b'","progressToken":%d}' % token
            params["_meta"] = msgspec.Raw(meta)
            headers = self.headers_for(method, name)
            if extra:
                headers = {**headers, **extra}
            try:
                reply = await self.link.request(
                    request_id,
                    encode_request(request_id, method, params),
                    headers=headers,
                    on_message=self.on_message,
                )
            except RequestRejected as exc:
                if recover and await self._recover(exc, generation):
                    recover = False
                    continue
                raise
            message = reply.message
            if not message.error:
                return message.result
            error = self.error_of(reply)
            if recover and await self._recover(error, generation):
                recover = False
                continue
            raise error

    def next_id(self) -> int:
        return next(self._ids)

    def meta_for_call(self, token: int | None) -> msgspec.Raw:
        """A request's ``_meta`` for this era, with a fresh ``traceparent``."""
        trace = traceparent().encode()
        if token is None:
            return msgspec.Raw(self._meta_head + trace + _TRACE_TAIL)
        return msgspec.Raw(self._meta_head + trace + b'","progressToken":%d}' % token)

    def error_of(self, reply: Reply) -> ProtocolError:
        found = decode_error(reply.message.error)
        error = found.exception()
        if self.http:
            error.http_status = reply.status
        if reply.retry_after_s is not None:
            error.retry_after_s = reply.retry_after_s
        elif isinstance(error, Overloaded) and isinstance(found.data, dict):
            after_ms = found.data.get("retryAfterMs")
            if isinstance(after_ms, int | float):
                error.retry_after_s = after_ms / 1000
        return error

    async def _recover(self, error: Exception, generation: int) -> bool:
        """-32022: renegotiate; a lost handshake-era session: initialize again. Whether the
        request should be sent once more."""
        lost_session = self.era == "handshake" and (
            isinstance(error, SessionNotFound) or (self.http and status_of(error) == 404)
        )
        if lost_session:
            async with self._lock:
                if self._generation == generation:
                    log.info("the server lost the session; initializing again")
                    await self.initialize()
            return True
        if not isinstance(error, UnsupportedProtocolVersion):
            return False
        async with self._lock:
            if self._generation != generation:
                return True  # another call renegotiated already
            offered = eras.offered_versions(error)
            modern = eras.choose_version(offered, MODERN_VERSIONS)
            if modern is not None and (self.era != "modern" or modern != self.version):
                self.use_modern(modern)
                self._remember("modern")
                return True
            if self.forced != "modern" and eras.choose_version(offered, LEGACY_VERSIONS):
                await self.initialize()
                return True
        return False

    def _count_retry(self, number: int, error: BaseException, delay: float) -> None:
        self.stats.retries += 1
        log.debug("retry %d in %.3f s after %r", number, delay, error)

    async def _answer_inputs(
        self, params: dict[str, Any], result: InputRequiredResult
    ) -> dict[str, Any]:
        """The next round's params: the answers to ``inputRequests``, the ``requestState``."""
        answers = {
            key: msgspec.Raw(await self.handlers.answer(request))
            for key, request in (result.input_requests or {}).items()
        }
        params = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
        if answers:
            params["inputResponses"] = answers
        if result.request_state is not None:
            params["requestState"] = result.request_state
        return params

    # -- what the server sends besides responses ----------------------------------------

    async def on_message(self, message: Message) -> None:
        """A message on a request's stream (or the unsolicited one) that is not its response."""
        if message.id is _UNSET:
            await self._notified(message)
        else:
            await self._answer_request(message)

    async def _notified(self, message: Message) -> None:
        method = message.method
        if method == "notifications/progress":
            await self._progressed(message.params)
        elif method == "notifications/message":
            self._server_logged(message.params)
        elif method != "notifications/cancelled":
            assert isinstance(method, str)
            self.notify(method, message.params)

    def notify(self, method: str, raw: msgspec.Raw) -> None:
        """A notification the server started: to the list cache, then the subscriptions."""
        if self.on_notification is not None:
            self.on_notification(method)
        if not self.subscriptions:
            return
        try:
            params = msgspec.json.decode(raw) if raw else None
        except msgspec.DecodeError:
            params = None
        subscription = subscription_of(params)
        for target in tuple(self.subscriptions):
            target.offer(method, params, subscription)

    async def _progressed(self, raw: msgspec.Raw) -> None:
        try:
            progress = _PROGRESS.decode(raw or b"{}")
        except msgspec.DecodeError:
            return
        entry = self._progress.get(progress.progress_token)
        if entry is None:
            return
        callback, deadline = entry
        deadline.extend_on_progress()
        if callback is None:
            return
        try:
            outcome = callback(progress.progress, progress.total, progress.message)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            log.exception("the on_progress callback failed")

    def _server_logged(self, raw: msgspec.Raw) -> None:
        try:
            entry = _SERVER_LOG.decode(raw or b"{}")
        except msgspec.DecodeError:
            return
        level = _LOG_LEVELS.get(entry.level, logging.INFO)
        if server_log.isEnabledFor(level):
            server_log.log(level, "%s%s", f"[{entry.logger}] " if entry.logger else "", entry.data)

    async def _answer_request(self, message: Message) -> None:
        """A server-to-client request (handshake era): run the handler, POST the answer."""
        request_id = message.id
        assert isinstance(request_id, int | str)
        assert isinstance(message.method, str)
        try:
            answer = await self.handlers.answer_method(message.method, bytes(message.params))
            body = b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (encode(request_id), answer)
        except ProtocolError as exc:
            body = encode_error(request_id, exc)
        except Exception:
            log.exception("the client's %s handler failed", message.method)
            body = encode_error(request_id, InternalError("the client's handler failed"))
        try:
            await self.link.send(body, headers=self.headers_for("", None))
        except (NotSent, RequestRejected, ConnectionError, OSError) as exc:
            log.warning("could not answer the server's %s: %r", message.method, exc)

    async def _read_unsolicited(self) -> None:
        async for message in self.link.unsolicited():
            if message.method is _UNSET:
                continue
            if message.id is _UNSET:
                await self._notified(message)
            else:
                task = asyncio.get_running_loop().create_task(self._answer_request(message))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
