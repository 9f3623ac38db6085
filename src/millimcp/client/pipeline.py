"""The call pipeline: one request from the application to a result, in either era.

Top to bottom (each stage set once, trio-style, and spent from below):

1. **deadline** (:meth:`~millimcp.resilience.deadline.Deadline.watch`): the call's total
   time, queue wait, retries, backoff and MRTR rounds included; on expiry the request in
   flight is cancelled (the link closes the stream or sends ``notifications/cancelled``)
   and :class:`~millimcp.errors.CallTimeout` is raised;
2. **MRTR rounds** (modern era): an ``input_required`` result runs the client's handlers and
   sends the request again with ``inputResponses`` and the server's ``requestState``;
3. **gate** (:class:`~millimcp.resilience.gate.CallGate`): the cap on calls in flight and its
   bounded queue;
4. **retries** (:func:`~millimcp.resilience.retry.call_with_retries`): only what is safe;
5. **attempt**: a fresh id, the body encoded once, the ``_meta`` and headers of the era
   (:class:`~millimcp.client.envelope.Envelope`), the link; then **recovery**: a ``-32022``
   switches to a version the server lists, a lost handshake-era session is initialized
   again, and the request is sent once more (once).

Replies are decoded once, into the result type of the method. :meth:`Pipeline.stream` runs
a request whose response is a long-lived stream (``subscriptions/listen``) through the same
stages.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import math
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Final, TypeVar

import msgspec

from millimcp.client.envelope import TRACE_TAIL, Envelope, trace_bytes
from millimcp.client.era import Negotiation
from millimcp.client.handlers import Handlers
from millimcp.client.inbound import Inbound, Inbox, OnProgress
from millimcp.client.link import Attachment, Link, Reply
from millimcp.client.results import ClientStats
from millimcp.codec import encode
from millimcp.errors import (
    CallTimeout,
    ClientError,
    MethodNotFound,
    Overloaded,
    ProtocolError,
    RequestRejected,
    SessionNotFound,
    UnsupportedProtocolVersion,
)
from millimcp.protocol import Message
from millimcp.protocol.jsonrpc import decode_error
from millimcp.protocol.methods import ReplyDecoder
from millimcp.protocol.types import InputRequiredResult
from millimcp.resilience.deadline import Deadline
from millimcp.resilience.gate import CallGate
from millimcp.resilience.policy import Limits, Retry, Timeout
from millimcp.resilience.retry import call_with_retries, retry_failed, status_of

__all__ = ["MAX_ROUNDS", "Pipeline"]

log: Final = logging.getLogger("millimcp.client")

T = TypeVar("T")

_REQUEST: Final = b'{"jsonrpc":"2.0","id":%d,"method":%s,"params":%s}'
"""A request around its id, method (as JSON) and params (encoded): the envelope is never a
struct to encode (the same bytes as :func:`~millimcp.protocol.encode_request`)."""

MAX_ROUNDS: Final = 8
"""MRTR rounds one call may take before the client gives up."""


class Pipeline:
    """Requests to one server through one :class:`~millimcp.client.link.Link`.

    ``recovering`` is off while the client opens (the era is being found: a failure then is
    an answer, not something to recover from).
    """

    def __init__(
        self,
        link: Link,
        envelope: Envelope,
        inbound: Inbound,
        negotiation: Negotiation,
        *,
        limits: Limits,
        timeout: Timeout,
        retry: Retry | None,
        handlers: Handlers,
    ) -> None:
        self.link = link
        self.envelope = envelope
        self.inbound = inbound
        self.negotiation = negotiation
        self.timeout = timeout
        self.retry = retry
        self.handlers = handlers
        self.gate = CallGate(limits)
        self.stats = ClientStats()
        self.recovering = False
        self._ids = itertools.count(1)
        self._methods: dict[str, bytes] = {}
        """Each method's name as JSON, for :data:`_REQUEST`."""
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"<Pipeline in_flight={self.gate.in_flight} queued={self.gate.queued}>"

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
        tasks: bool = False,
    ) -> T:
        """Run one request to its final result (see the module docstring). ``tasks``: the
        request declares the tasks extension (a ``tools/call`` may become a task)."""
        result, _ = await self.call_with_attachment(
            method,
            params,
            kind,
            name=name,
            extra_headers=extra_headers,
            idempotent=idempotent,
            timeout=timeout,
            on_progress=on_progress,
            tasks=tasks,
        )
        return result

    async def call_with_attachment(
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
        attachment: Attachment | None = None,
        tasks: bool = False,
    ) -> tuple[T, memoryview | None]:
        """:meth:`call`, sending ``attachment`` with the request (each round and retry) and
        returning the final reply's attachment beside its result."""
        stats = self.stats
        stats.calls += 1
        if timeout is None:
            timeout = self.timeout
        deadline = Deadline(
            timeout.total, reset_on_progress=timeout.reset_on_progress, hard_cap=timeout.hard_cap
        )
        token: int | None = None
        if on_progress is not None or timeout.reset_on_progress:
            token = self.inbound.track_progress(on_progress, deadline)
        try:  # the stages inline (see the module docstring): no closure, no task per call
            watch = deadline.watch(method, name)
            try:
                trace = trace_bytes()
                gate = self.gate
                envelope = self.envelope
                for _ in range(MAX_ROUNDS):
                    if not gate.try_enter():
                        await gate.enter()
                    try:
                        failed: Exception | None = None
                        try:
                            reply = await self._attempt(
                                method,
                                params,
                                name,
                                extra_headers,
                                token,
                                trace,
                                self.recovering,
                                attachment,
                                None,
                                tasks,
                            )
                        except Exception as exc:
                            failed = exc  # retried outside the handler: no "during handling"
                        if failed is not None:
                            reply = await retry_failed(
                                lambda params=params: self._attempt(  # type: ignore[misc]
                                    method,
                                    params,
                                    name,
                                    extra_headers,
                                    token,
                                    trace,
                                    self.recovering,
                                    attachment,
                                    None,
                                    tasks,
                                ),
                                failed,
                                self.retry,
                                idempotent=idempotent,
                                deadline=deadline,
                                on_retry=self._count_retry,
                            )
                    finally:
                        gate.release()
                    result = kind.decode(reply.message.result, envelope.era == "modern")
                    if type(result) is not InputRequiredResult:
                        return result, reply.attachment  # type: ignore[return-value]
                    params = await self._answer_inputs(params, result)  # the next MRTR round
                raise ClientError(
                    f"{method}: the server asked for input {MAX_ROUNDS} times; gave up"
                )
            except BaseException as error:
                timed_out = None if watch is None else watch.timed_out(error)
                if timed_out is not None:
                    raise timed_out from timed_out.__cause__
                raise
            finally:
                if watch is not None:
                    watch.close()
        except CallTimeout:
            stats.timeouts += 1
            raise
        finally:
            if token is not None:
                self.inbound.untrack_progress(token)

    async def send_once(self, method: str, params: dict[str, Any], trace: bytes) -> msgspec.Raw:
        """One attempt, outside the gate, with no retry and no recovery: its raw result."""
        reply = await self._attempt(method, params, None, None, None, trace, False, None, None)
        return reply.message.result

    async def _attempt(
        self,
        method: str,
        params: dict[str, Any],
        name: str | None,
        extra: Mapping[str, str] | None,
        token: int | None,
        trace: bytes,
        recover: bool,
        attachment: Attachment | None,
        inbox: Inbox | None,
        tasks: bool = False,
    ) -> Reply:
        """One request on the link: its reply (a result), or the error it came back with.
        ``inbox``: the request opens a stream, whose messages go there."""
        envelope = self.envelope
        on_message = (
            self.inbound.on_message
            if inbox is None
            else functools.partial(self.inbound.on_message, stream=inbox)
        )
        while True:
            generation = envelope.generation
            request_id = next(self._ids)
            head = envelope.task_head if tasks else envelope.head
            if token is None:  # the era's _meta with this call's traceparent spliced in
                meta = head + trace + TRACE_TAIL
            else:
                meta = b'%s%s","progressToken":%d}' % (head, trace, token)
            params["_meta"] = msgspec.Raw(meta)
            headers = envelope.headers_for(method, name)
            if extra:
                headers = {**headers, **extra}
            if inbox is not None:
                self.inbound.streams[request_id] = inbox
            try:
                body = _REQUEST % (request_id, self._method_json(method), encode(params))
                reply = await self.link.request(
                    request_id,
                    body,
                    headers=headers,
                    on_message=on_message,
                    attachment=attachment,
                )
            except RequestRejected as exc:
                if recover and await self._recover(exc, generation):
                    recover = False
                    continue
                raise
            finally:
                if inbox is not None:
                    self.inbound.streams.pop(request_id, None)
            if not reply.message.error:
                return reply
            error = self.error_of(reply)
            if recover and await self._recover(error, generation):
                recover = False
                continue
            raise error

    def _method_json(self, method: str) -> bytes:
        known = self._methods.get(method)
        if known is None:
            known = self._methods[method] = encode(method)
        return known

    def error_of(self, reply: Reply) -> ProtocolError:
        """The exception of an error reply, with its HTTP status and ``Retry-After``."""
        found = decode_error(reply.message.error)
        error = found.exception()
        if self.envelope.http:
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
        envelope = self.envelope
        lost_session = envelope.era == "handshake" and (
            isinstance(error, SessionNotFound)
            # a 404 is a lost session unless it says what else it is: a method not found
            or (envelope.http and status_of(error) == 404 and not isinstance(error, MethodNotFound))
        )
        if lost_session:
            async with self._lock:
                if envelope.generation == generation:
                    log.info("the server lost the session; initializing again")
                    await self.negotiation.initialize(self)
            return True
        if not isinstance(error, UnsupportedProtocolVersion):
            return False
        async with self._lock:
            if envelope.generation != generation:
                return True  # another call renegotiated already
            return await self.negotiation.switch_version(error, self)

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

    # -- streams ----------------------------------------------------------------------------

    async def stream(
        self, method: str, params: dict[str, Any], *, timeout: Timeout | None = None
    ) -> AsyncGenerator[Message, None]:
        """A request whose response is a stream: the messages the server sends for it, until
        its response (whose error is raised).

        Opening it is a call: it waits for a slot of the gate, is retried when it was not
        sent, recovers as calls do, and must see its first message (or its response) within
        ``timeout`` (the client's by default), else :class:`~millimcp.errors.CallTimeout`.
        Once the first message is in, the stream gives its slot back and lives as long as
        it is read. Its messages are those on the request's own HTTP response, or (stdio)
        those whose ``_meta`` names its request id as their subscription id; every one also
        reaches the list cache. Closing the iterator cancels the request on the server.
        """
        self.stats.calls += 1
        deadline = Deadline.from_timeout(timeout or self.timeout)
        inbox: Inbox = asyncio.Queue()
        trace = trace_bytes()
        gate = self.gate
        remaining = deadline.remaining()
        try:
            async with asyncio.timeout(None if math.isinf(remaining) else remaining):
                await gate.__aenter__()
        except TimeoutError:
            self.stats.timeouts += 1
            raise CallTimeout(
                f"{method} timed out waiting for a slot ({deadline.describe()})"
            ) from None
        holding = True
        task = asyncio.get_running_loop().create_task(
            call_with_retries(
                lambda: self._attempt(
                    method, params, None, None, None, trace, self.recovering, None, inbox
                ),
                self.retry,
                idempotent=False,
                deadline=deadline,
                on_retry=self._count_retry,
            )
        )
        try:
            while True:
                wait_s = None
                if holding:
                    remaining = deadline.remaining()
                    wait_s = None if math.isinf(remaining) else max(0.0, remaining)
                message = await _next_or_end(inbox, task, wait_s)
                if holding:
                    holding = False
                    await gate.__aexit__(None, None, None)
                    if message is None and not task.done():
                        self.stats.timeouts += 1
                        raise CallTimeout(
                            f"{method} timed out after {deadline.elapsed():.3g} s waiting for "
                            f"its stream to open ({deadline.describe()})"
                        )
                if message is None:
                    task.result()  # the response: raises its error, else the stream ended
                    return
                yield message
        finally:
            if holding:
                await gate.__aexit__(None, None, None)
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def _next_or_end(
    inbox: Inbox, task: asyncio.Task[Reply], wait_s: float | None
) -> Message | None:
    """The next message of a stream; None when its request ended (and nothing is left in
    ``inbox``) or ``wait_s`` passed."""
    if not inbox.empty():
        return inbox.get_nowait()
    if task.done():
        return None
    getter = asyncio.ensure_future(inbox.get())
    try:
        await asyncio.wait({getter, task}, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not getter.done():
            getter.cancel()
    if getter.done() and not getter.cancelled():
        return getter.result()
    return inbox.get_nowait() if not inbox.empty() else None
