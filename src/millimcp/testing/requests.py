"""Hand-built 2026-07-28 requests: the JSON-RPC body with its ``_meta``, and the MCP headers.

For tests and benchmarks that speak Streamable HTTP (or stdio lines) without a client::

    body, headers = modern_request("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    httpx.post(url, content=body, headers=headers)

The body's ``params._meta`` carries the protocol version and the client's capabilities (an
empty object), the two entries the modern era requires; entries of ``params["_meta"]`` are
added and win. The headers are lower-case: ``content-type``, ``accept``,
``mcp-protocol-version``, ``mcp-method`` and, for a method that names its target
(``tools/call``, ``prompts/get``, ``resources/read``), ``mcp-name``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from millimcp.protocol.headers import encode_header_value
from millimcp.protocol.methods import METHODS
from millimcp.protocol.types import (
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    RequestId,
)
from millimcp.protocol.versions import MODERN_VERSIONS

__all__ = ["MODERN_VERSION", "modern_meta", "modern_request"]

MODERN_VERSION: Final = MODERN_VERSIONS[0]
"""The protocol version of the requests built here: ``2026-07-28``."""

_ENCODER: Final = msgspec.json.Encoder()


def modern_meta(extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A modern request's ``_meta``: version and (empty) client capabilities, then ``extra``."""
    return {META_PROTOCOL_VERSION: MODERN_VERSION, META_CLIENT_CAPABILITIES: {}, **(extra or {})}


def modern_request(
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    request_id: RequestId = 1,
    name: str | None = None,
) -> tuple[bytes, dict[str, str]]:
    """A 2026-07-28 request for ``method``: ``(body, headers)``.

    ``params`` is copied, with its ``_meta`` completed by :func:`modern_meta`; the
    ``mcp-protocol-version`` header mirrors the version there. ``name`` is the
    ``Mcp-Name`` header; by default it is the params field the method names its target by
    (``name``, or ``uri`` for ``resources/read``), and absent for other methods. A name
    that is not plain visible ASCII is sent in the header's base64 form.
    """
    fields = dict(params or {})
    fields["_meta"] = modern_meta(fields.get("_meta"))
    if name is None:
        spec = METHODS.get(method)
        field = spec.name_field if spec else None
        target = fields.get(_camel(field)) if field else None
        name = target if isinstance(target, str) else None
    version = fields["_meta"][META_PROTOCOL_VERSION]
    body = _ENCODER.encode({"jsonrpc": "2.0", "id": request_id, "method": method, "params": fields})
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": str(version),
        "mcp-method": method,
    }
    if name is not None:
        headers["mcp-name"] = encode_header_value(name)
    return body, headers


def _camel(field: str) -> str:
    """The wire (camelCase) name of a params attribute (``task_id`` -> ``taskId``)."""
    head, *rest = field.split("_")
    return head + "".join(part.title() for part in rest)
