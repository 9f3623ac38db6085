"""The native front of a protected endpoint: the auth gate's rules without ASGI.

:class:`GuardedFront` is a :class:`~millimcp.transports.native.front.NativeFront` that asks an
:class:`~millimcp.transports.auth_core.AuthCore` (the one the endpoint's
:class:`~millimcp.transports.auth_gate.AuthGate` holds, so a change to the server's tools
reaches both) about every request to the MCP path before serving it, once the request is
complete: the token, the scopes (from ``Mcp-Method``/``Mcp-Name``, else from the body, which
the front holds whole by then), who owns a session. A refusal is written as one response and
the connection stays open; an admitted request is served with its principal in
:data:`~millimcp.auth.resource.CURRENT_PRINCIPAL`, and a response that opens a session binds
it to that principal. The Protected Resource Metadata paths answer without a token (their
answer is known when the head is, so they are sent in order like any early answer).
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Final

from millimcp.auth.resource import CURRENT_PRINCIPAL
from millimcp.transports.auth_core import Answer, AuthCore, Opening
from millimcp.transports.http import StreamableHTTPApp
from millimcp.transports.native.connection import HttpConnection, Request, refusal_closes
from millimcp.transports.native.front import _FRAMED, _OTHER, _POST, NativeFront
from millimcp.transports.native.wire import head

__all__ = ["GuardedFront", "answer_bytes"]

_GUARDED: Final = frozenset((_POST, _OTHER, _FRAMED))
_IDENTITY: Final = frozenset((b"identity", b""))


def answer_bytes(answer: Answer, *, close: bool = False) -> bytes:
    """An :class:`Answer` as one HTTP/1.1 response."""
    headers = answer.headers
    if answer.status != 204:
        headers = [*headers, (b"content-length", b"%d" % len(answer.body))]
    return head(answer.status, headers, close=close) + answer.body


class GuardedFront(NativeFront):
    """See the module docstring."""

    def __init__(
        self, app: StreamableHTTPApp, loop: asyncio.AbstractEventLoop, auth: AuthCore
    ) -> None:
        super().__init__(app, loop)
        self.auth = auth

    def judge(self, request: Request) -> None:
        super().judge(request)
        if request.path in self.auth.metadata_paths:
            request.kind = 0
            request.limit = 0
            metadata = self.auth.metadata(request.method)
            request.refusal = answer_bytes(metadata, close=refusal_closes(request))

    async def _serve(self, conn: HttpConnection, request: Request) -> None:
        if request.kind not in _GUARDED:
            await super()._serve(conn, request)
            return
        core = self.auth
        fields = request.fields
        method = request.method
        authorization = fields.get(b"authorization")
        verdict = core.judge(authorization, method, fields)
        if verdict is None:
            verdict = await core.settle(authorization, method, fields, partial(_body, request))
        if type(verdict) is Answer:
            conn.write(answer_bytes(verdict, close=not request.keep_alive or self.draining))
            return
        principal = verdict.principal  # type: ignore[union-attr]
        if type(verdict) is Opening:
            request.owner = partial(core.record, principal=principal)
        reset = CURRENT_PRINCIPAL.set(principal)
        try:
            await super()._serve(conn, request)
        finally:
            CURRENT_PRINCIPAL.reset(reset)


async def _body(request: Request) -> bytes | None:
    """The body of a plain JSON POST as it came (None when framed or content-encoded: the
    core cannot read the operation from it)."""
    if request.kind != _POST:
        return None
    coding = request.fields.get(b"content-encoding")
    if coding is not None and coding.strip().lower() not in _IDENTITY:
        return None
    chunks = request.chunks
    if len(chunks) != 1:
        chunks[:] = [b"".join(chunks)]  # joined once: the front reads the same list
    return chunks[0]
