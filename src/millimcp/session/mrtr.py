"""Multi round-trip requests (MRTR, 2026-07-28): input from the client across requests.

A modern request whose handler needs input (elicitation, sampling, roots) is answered with an
``InputRequiredResult`` carrying the input requests and a sealed ``requestState``
(:mod:`millimcp.protocol.request_state`) that remembers the answers so far. The client sends
the request again with ``inputResponses`` and that state, and the handler runs again from the
top with every answer at hand (see :mod:`millimcp.session.context`).

:class:`Mrtr` opens what a retried request brings (:meth:`Mrtr.context`) and seals what the
next round needs (:meth:`Mrtr.input_required`).
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from millimcp.protocol import McpHeaders, RequestStateSealer, SealedState
from millimcp.protocol.types import InputRequiredResult
from millimcp.session.context import Context, Emit, InputRequired

__all__ = ["Mrtr", "request_binding"]


class Mrtr:
    """The sealing of one server's MRTR state (one key, shared by its replicas)."""

    __slots__ = ("sealer",)

    def __init__(self, sealer: RequestStateSealer) -> None:
        self.sealer = sealer

    def __repr__(self) -> str:
        return f"<Mrtr ttl={self.sealer.ttl}s>"

    def context(
        self,
        request_id: Any,
        method: str,
        params: Any,
        emit: Emit | None,
        headers: McpHeaders | None = None,
    ) -> Context:
        """The context of a checked modern request that brings answers (``requestState``,
        ``inputResponses``), with its answers so far; -32602 for a state that is not ours."""
        answers, state = self._gather(method, params)
        return Context(request_id, method, params.meta, emit, answers, state, headers)

    def input_required(self, need: InputRequired, params: Any, ctx: Context) -> Any:
        """The interim result that asks the client for ``need`` and seals what came so far."""
        binding = request_binding(ctx.method, params)
        state = SealedState(binding, time.time() + self.sealer.ttl, ctx.answers, need.state)
        return InputRequiredResult(
            input_requests=need.requests, request_state=self.sealer.seal(state)
        )

    def _gather(self, method: str, params: Any) -> tuple[dict[str, msgspec.Raw], Any]:
        """Answers so far (sealed state + this round's responses) and the handler's state."""
        answers: dict[str, msgspec.Raw] = {}
        state: Any = None
        if params.request_state:
            sealed = self.sealer.open(
                params.request_state, request_binding(method, params), time.time()
            )
            answers.update(sealed.answers)
            state = sealed.user
        if params.input_responses:
            answers.update(params.input_responses)
        return answers, state


def request_binding(method: str, params: Any) -> str:
    """What a request state is bound to: the method, the target and its arguments."""
    if method == "tools/call":
        return RequestStateSealer.binding(method, params.name, bytes(params.arguments))
    if method == "prompts/get":
        arguments = b"" if params.arguments is None else msgspec.json.encode(params.arguments)
        return RequestStateSealer.binding(method, params.name, arguments)
    return RequestStateSealer.binding(method, getattr(params, "uri", ""), b"")
