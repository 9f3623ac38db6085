"""What the client answers when a server asks it for input: elicitation, sampling, roots.

The same handlers serve both eras. In the modern era a server asks inside an
``input_required`` result (MRTR) and the client resends the request with the answers; in
the handshake era it sends ``elicitation/create``, ``sampling/createMessage`` or
``roots/list`` as a request on the call's SSE stream (or the GET stream), and the client
POSTs the answer back. The client declares exactly the capabilities it has handlers for.

A handler is an ``async`` function of the request's params (a protocol struct) returning the
protocol result struct or a plain dict of the same shape::

    async def ask_user(params: ElicitParams) -> ElicitResult:
        return ElicitResult(action="accept", content={"name": "Ada"})
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, TypeAlias

import msgspec

from millimcp.codec import encode
from millimcp.errors import InvalidParams, MethodNotFound, MissingClientCapability
from millimcp.protocol.types import (
    ClientCapabilities,
    CreateMessageParams,
    CreateMessageRequest,
    CreateMessageResult,
    ElicitParams,
    ElicitRequest,
    ElicitResult,
    InputRequest,
    ListRootsRequest,
    ListRootsResult,
    Root,
)

__all__ = [
    "ElicitationHandler",
    "Handlers",
    "RootsSource",
    "SamplingHandler",
]

ElicitationHandler: TypeAlias = Callable[[ElicitParams], Awaitable[ElicitResult | dict[str, Any]]]
SamplingHandler: TypeAlias = Callable[
    [CreateMessageParams], Awaitable[CreateMessageResult | dict[str, Any]]
]
RootsSource: TypeAlias = Sequence[Root | str] | Callable[[], Awaitable[Sequence[Root | str]]]
"""Roots as a list (``Root`` or URI strings), or an async function returning one."""

_ELICIT_PARAMS: Final = msgspec.json.Decoder(ElicitParams)
_SAMPLING_PARAMS: Final = msgspec.json.Decoder(CreateMessageParams)
_EMPTY: Final = b"{}"


class Handlers:
    """The client's handlers, its capabilities, and the answers they produce (as JSON)."""

    __slots__ = ("elicitation", "roots", "sampling")

    def __init__(
        self,
        elicitation: ElicitationHandler | None = None,
        sampling: SamplingHandler | None = None,
        roots: RootsSource | None = None,
    ) -> None:
        self.elicitation = elicitation
        self.sampling = sampling
        self.roots = roots

    def capabilities(self) -> ClientCapabilities:
        return ClientCapabilities(
            elicitation={} if self.elicitation is not None else None,
            sampling={} if self.sampling is not None else None,
            roots={} if self.roots is not None else None,
        )

    async def answer(self, request: InputRequest) -> bytes:
        """The JSON answer to one input request (modern era, from ``inputRequests``).

        Raises :class:`MissingClientCapability` when the client has no handler for it.
        """
        if isinstance(request, ElicitRequest):
            return await self._elicit(request.params)
        if isinstance(request, CreateMessageRequest):
            return await self._sample(request.params)
        if isinstance(request, ListRootsRequest):
            return await self._roots()
        raise MissingClientCapability(f"no handler for {type(request).__name__}")

    async def answer_method(self, method: str, params: bytes) -> bytes:
        """The JSON answer to a server-to-client request (handshake era).

        Raises :class:`MethodNotFound` when the client has no handler for ``method``, and
        :class:`InvalidParams` for params of the wrong shape.
        """
        try:
            if method == "elicitation/create" and self.elicitation is not None:
                return await self._elicit(_ELICIT_PARAMS.decode(params or _EMPTY))
            if method == "sampling/createMessage" and self.sampling is not None:
                return await self._sample(_SAMPLING_PARAMS.decode(params or _EMPTY))
        except msgspec.DecodeError as exc:
            raise InvalidParams(f"Invalid params: {exc}") from None
        if method == "roots/list" and self.roots is not None:
            return await self._roots()
        if method == "ping":
            return _EMPTY
        raise MethodNotFound(f"Method not found: {method} (the client has no handler for it)")

    async def _elicit(self, params: ElicitParams) -> bytes:
        if self.elicitation is None:
            raise MissingClientCapability(
                "the server asked for elicitation, but the client has no elicitation handler",
                {"requiredCapabilities": {"elicitation": {}}},
            )
        return _encode(await self.elicitation(params), ElicitResult)

    async def _sample(self, params: CreateMessageParams) -> bytes:
        if self.sampling is None:
            raise MissingClientCapability(
                "the server asked for sampling, but the client has no sampling handler",
                {"requiredCapabilities": {"sampling": {}}},
            )
        return _encode(await self.sampling(params), CreateMessageResult)

    async def _roots(self) -> bytes:
        source = self.roots
        if source is None:
            raise MissingClientCapability(
                "the server asked for roots, but the client has none",
                {"requiredCapabilities": {"roots": {}}},
            )
        items = await source() if callable(source) else source
        roots = [Root(uri=item) if isinstance(item, str) else item for item in items]
        return encode(ListRootsResult(roots=roots))


def _encode(answer: Any, expected: type[Any]) -> bytes:
    if isinstance(answer, expected):
        return encode(answer)
    if isinstance(answer, Mapping):
        # Check the shape once, so a malformed answer fails here, not on the server.
        return encode(msgspec.convert(dict(answer), expected))
    raise TypeError(f"a handler returned {type(answer).__name__}, not {expected.__name__}")
