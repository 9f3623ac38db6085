"""Hypothesis-generated JSON-RPC envelopes POSTed in-process to the real ASGI app.

The app is the conformance fixture server (``examples/conformance_server.py``), called with
hand-made ASGI ``scope``/``receive``/``send``. Whatever arrives, the server must answer with a
status below 500, a body that is JSON (or empty for 202), SSE events whose data is JSON, and
only the JSON-RPC error codes MCP defines.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from millimcp.protocol.types import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
)
from millimcp.testing import MODERN_VERSION, http_scope, modern_request

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "conformance_server.py"

ALLOWED_CODES = frozenset(
    {-32700, -32600, -32601, -32602, -32603, -32020, -32021, -32022, -32000, -32001, -32002}
)
ALLOWED_STATUSES = frozenset({200, 202, 400, 404})
PATIENCE_S = 0.15
"""How long the fake client waits for a response to finish before it disconnects."""

REAL_METHODS = [
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "subscriptions/listen",
]
OTHER_METHODS = [
    "initialize",
    "ping",
    "notifications/cancelled",
    "notifications/initialized",
    "resources/subscribe",
    "logging/setLevel",
    "tools/CALL",
    "",
    " tools/list",
    "rpc.discover",
]
TOOL_NAMES = [
    "test_simple_text",
    "test_image_content",
    "test_error_handling",
    "test_tool_with_progress",
    "test_logging_tool",
    "test_missing_capability",
    "test_custom_header",
    "test_streaming_elicitation",
    "test_input_required_result_elicitation",
    "test_input_required_result_request_state",
    "test_input_required_result_multiple_inputs",
    "test_input_required_result_capabilities",
    "json_schema_2020_12_tool",
    "no_such_tool",
]
PROMPT_NAMES = [
    "test_simple_prompt",
    "test_prompt_with_arguments",
    "test_prompt_with_embedded_resource",
    "test_prompt_with_image",
    "test_input_required_result_prompt",
    "no_such_prompt",
]
URIS = [
    "test://static-text",
    "test://static-binary",
    "test://template/1/data",
    "test://template/%ZZ/data",
    "test://template//data",
    "test://nope",
]
VERSIONS = [MODERN_VERSION, "2025-11-25", "2025-03-26", "1999-01-01", ""]


def load_conformance_server() -> Any:
    spec = importlib.util.spec_from_file_location("millimcp_fuzz_conformance_server", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def app() -> Iterator[Any]:
    module = load_conformance_server()
    try:
        yield module.server.asgi()
    finally:
        module.server.close()
        sys.modules.pop("millimcp_fuzz_conformance_server", None)


# -- calling the app ------------------------------------------------------------------------------


@dataclass
class Response:
    status: int = 0
    headers: dict[bytes, bytes] = field(default_factory=dict)
    chunks: list[bytes] = field(default_factory=list)
    complete: bool = False
    disconnected: bool = False

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)


async def post(app: Any, body: bytes, headers: list[tuple[bytes, bytes]]) -> Response:
    response = Response()
    finished = asyncio.Event()
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        # A client that waits for its answer, then goes away (or gives up on a long stream).
        try:
            await asyncio.wait_for(finished.wait(), PATIENCE_S)
        except TimeoutError:
            response.disconnected = True
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        assert not response.complete, f"send after the response ended: {message}"
        if message["type"] == "http.response.start":
            assert response.status == 0, "two response starts"
            response.status = message["status"]
            response.headers = dict(message.get("headers", []))
        else:
            assert message["type"] == "http.response.body", message
            assert response.status, "body before start"
            response.chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                response.complete = True
                finished.set()

    scope = http_scope([(b"content-length", str(len(body)).encode()), *headers])
    async with asyncio.timeout(20):
        await app(scope, receive, send)
    return response


def call(app: Any, body: bytes, headers: list[tuple[bytes, bytes]]) -> Response:
    # A fresh loop per example: anything the app leaves running is cancelled with it.
    return asyncio.run(post(app, body, headers))


# -- checking what came back ----------------------------------------------------------------------


def sse_messages(stream: bytes) -> list[Any]:
    messages = []
    for frame in stream.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = [line[5:].lstrip(b" ") for line in frame.split(b"\n") if line.startswith(b"data:")]
        if data:
            assert len(data) == 1, f"an event with {len(data)} data lines: {frame!r}"
            messages.append(json.loads(data[0]))
    assert stream == b"" or stream.endswith(b"\n\n"), f"a partial event: {stream[-80:]!r}"
    return messages


def check_message(message: Any) -> None:
    assert isinstance(message, dict), message
    assert message.get("jsonrpc") == "2.0", message
    if "error" in message:
        error = message["error"]
        assert "result" not in message
        assert isinstance(error, dict), message
        assert error.get("code") in ALLOWED_CODES, f"unexpected error code in {message}"
        assert isinstance(error.get("message"), str), message
    elif "result" in message:
        assert "id" in message, message
    else:
        assert isinstance(message.get("method"), str), message  # a notification


def valid_id(value: Any) -> bool:
    return isinstance(value, int | str) and not isinstance(value, bool)


def check_response(response: Response, request: Any = None) -> list[Any]:
    """Assert the invariants; return the JSON-RPC messages of the response."""
    assert response.status != 500, f"HTTP 500: {response.body[:500]!r}"
    assert response.status in ALLOWED_STATUSES, response.status
    if not response.complete:
        # Only a stream the client gave up on may end unfinished.
        assert response.disconnected, "the app returned without finishing the response"
        assert response.headers.get(b"content-type") == b"text/event-stream"
    if response.status == 202:
        assert response.body == b""
        return []
    content_type = response.headers.get(b"content-type")
    if content_type == b"text/event-stream":
        assert response.status == 200
        messages = sse_messages(response.body)
    else:
        assert content_type == b"application/json", content_type
        assert int(response.headers[b"content-length"]) == len(response.body)
        messages = [json.loads(response.body)]
    for message in messages:
        check_message(message)
    replies = [m for m in messages if "result" in m or "error" in m]
    if response.complete:
        assert len(replies) == 1, messages
    for reply in replies:
        if "id" in reply:
            assert isinstance(request, dict), "an id echoed from a body that had none"
            assert reply["id"] == request.get("id"), (reply, request)
            assert valid_id(reply["id"])
        elif (
            isinstance(request, dict)
            and valid_id(request.get("id"))
            and isinstance(request.get("method"), str)
            and reply.get("error", {}).get("code") != -32700  # a parse error knows no id
        ):
            pytest.fail(f"the reply to a request with id {request['id']!r} lost it: {reply}")
    return messages


def describe(response: Response, messages: list[Any]) -> str:
    """A label for hypothesis statistics (``--hypothesis-show-statistics``)."""
    codes = [m["error"]["code"] for m in messages if "error" in m]
    kind = "sse" if response.headers.get(b"content-type") == b"text/event-stream" else "json"
    return f"HTTP {response.status} {kind} {codes[0] if codes else 'ok'}"


# -- strategies -----------------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
ids = st.one_of(
    st.integers(min_value=-5, max_value=2**31),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.sampled_from([0, -1, 2**53 + 1, 2**63, 2**64, 2**70]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.text(max_size=12),
    json_values,
)
methods = st.one_of(
    st.sampled_from(REAL_METHODS), st.sampled_from(OTHER_METHODS), st.text(max_size=20)
)
capabilities = st.one_of(
    st.just({}),
    st.just({"sampling": {}, "elicitation": {}, "roots": {}}),
    st.dictionaries(st.sampled_from(["sampling", "elicitation", "roots", "x"]), json_values),
    json_values,
)
good_meta = st.fixed_dictionaries(
    {
        META_PROTOCOL_VERSION: st.sampled_from(VERSIONS),
        META_CLIENT_CAPABILITIES: capabilities,
    },
    optional={
        "progressToken": st.one_of(st.integers(), st.text(max_size=5), json_values),
        META_LOG_LEVEL: st.sampled_from(["debug", "info", "error", "loud"]),
        META_CLIENT_INFO: st.one_of(st.just({"name": "fuzz", "version": "1"}), json_values),
        "traceparent": st.text(max_size=10),
    },
)
metas = st.one_of(good_meta, good_meta, json_values)
cursors = st.one_of(
    st.text(max_size=12),
    st.integers(min_value=-3, max_value=10**6).map(
        lambda n: base64.urlsafe_b64encode(f"o:{n}".encode()).decode()
    ),
)
arguments = st.one_of(
    st.just({}),
    st.fixed_dictionaries(
        {},
        optional={
            "region": st.one_of(st.text(max_size=10), json_values),
            "arg1": st.text(max_size=6),
            "arg2": st.text(max_size=6),
            "resourceUri": st.text(max_size=10),
            "name": st.text(max_size=6),
        },
    ),
    json_values,
)
params = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "_meta": metas,
            "name": st.one_of(st.sampled_from(TOOL_NAMES + PROMPT_NAMES), st.text(max_size=10)),
            "arguments": arguments,
            "uri": st.one_of(st.sampled_from(URIS), st.text(max_size=20)),
            "cursor": cursors,
            "notifications": st.one_of(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "toolsListChanged": st.booleans(),
                        "resourceSubscriptions": st.lists(st.sampled_from(URIS), max_size=2),
                    },
                ),
                json_values,
            ),
            "ref": st.one_of(
                st.just({"type": "ref/prompt", "name": "test_prompt_with_arguments"}),
                json_values,
            ),
            "argument": st.one_of(
                st.fixed_dictionaries(
                    {"name": st.sampled_from(["arg1", "arg2"]), "value": st.text(max_size=3)}
                ),
                json_values,
            ),
            "context": st.one_of(st.just({"arguments": {"arg1": "x"}}), json_values),
            "inputResponses": st.dictionaries(
                st.sampled_from(["confirm", "user_name", "capital_question", "client_roots", "x"]),
                json_values,
                max_size=3,
            ),
            "requestState": st.one_of(st.text(max_size=20), st.just("m1.e30.AAAA")),
        },
    ),
    json_values,
)
random_envelopes = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.one_of(st.just("2.0"), st.just("1.0"), json_values),
        "id": ids,
        "method": methods,
        "params": params,
        "result": json_values,
        "error": json_values,
    },
)
modern_meta = st.fixed_dictionaries(
    {
        META_PROTOCOL_VERSION: st.just(MODERN_VERSION),
        META_CLIENT_CAPABILITIES: st.sampled_from(
            [{}, {"sampling": {}, "elicitation": {}, "roots": {}}, {"elicitation": {}}]
        ),
    },
    optional={
        "progressToken": st.one_of(st.integers(), st.text(max_size=5)),
        META_LOG_LEVEL: st.sampled_from(["debug", "info", "error"]),
    },
)
METHOD_PARAMS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "tools/call": {
        "name": st.sampled_from(TOOL_NAMES),
        "arguments": st.one_of(st.just({}), arguments),
    },
    "prompts/get": {
        "name": st.sampled_from(PROMPT_NAMES),
        "arguments": st.one_of(
            st.fixed_dictionaries({"arg1": st.text(max_size=5), "arg2": st.text(max_size=5)}),
            st.fixed_dictionaries({"resourceUri": st.text(max_size=10)}),
            arguments,
        ),
    },
    "resources/read": {"uri": st.one_of(st.sampled_from(URIS), st.text(max_size=20))},
    "subscriptions/listen": {
        "notifications": st.fixed_dictionaries(
            {}, optional={"toolsListChanged": st.booleans(), "promptsListChanged": st.booleans()}
        )
    },
    "completion/complete": {
        "ref": st.just({"type": "ref/prompt", "name": "test_prompt_with_arguments"}),
        "argument": st.fixed_dictionaries(
            {"name": st.sampled_from(["arg1", "arg2", "x"]), "value": st.text(max_size=3)}
        ),
    },
}


@st.composite
def well_formed(draw: st.DrawFn) -> dict[str, Any]:
    """A request that gets past the envelope checks, so that the handlers run."""
    method = draw(st.sampled_from(REAL_METHODS))
    fields = {name: draw(strategy) for name, strategy in METHOD_PARAMS.get(method, {}).items()}
    fields["_meta"] = draw(modern_meta if draw(st.integers(0, 9)) < 8 else metas)
    if draw(st.integers(0, 9)) == 0:
        extra = draw(params)
        if isinstance(extra, dict):
            fields.update(extra)  # sometimes overwrites good fields with odd ones
    if method.endswith("/list") and draw(st.booleans()):
        fields["cursor"] = draw(cursors)
    usual_id = st.one_of(st.integers(min_value=0, max_value=10**6), st.text(max_size=8))
    request_id = draw(usual_id if draw(st.integers(0, 9)) < 8 else ids)
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": fields}


notifications = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0"), "method": methods}, optional={"params": params}
)
envelopes = st.one_of(
    well_formed(), well_formed(), well_formed(), well_formed(), notifications, random_envelopes
)
latin1_text = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"),
    max_size=16,
)


def sentinel(value: str) -> str:
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


@st.composite
def mirrored(draw: st.DrawFn, value: Any) -> str | None:
    """A header value for a body field: absent, equal, encoded, padded, or anything."""
    choice = draw(
        st.sampled_from(["same"] * 12 + ["absent", "sentinel", "sentinel", "padded", "random"])
    )
    if choice == "absent":
        return None
    if choice == "random" or not isinstance(value, str):
        return draw(st.one_of(latin1_text, latin1_text.map(sentinel)))
    if choice == "sentinel":
        return sentinel(value)
    if choice == "padded":
        return f" {value}\t"
    return value


@st.composite
def requests(draw: st.DrawFn) -> tuple[Any, list[tuple[bytes, bytes]]]:
    body = draw(st.one_of(envelopes, envelopes, envelopes, envelopes, json_values))
    fields: dict[str, Any] = body if isinstance(body, dict) else {}
    given_params = fields.get("params")
    body_params: dict[str, Any] = given_params if isinstance(given_params, dict) else {}
    given_meta = body_params.get("_meta")
    meta: dict[str, Any] = given_meta if isinstance(given_meta, dict) else {}
    values = {
        b"mcp-method": fields.get("method"),
        b"mcp-protocol-version": meta.get(META_PROTOCOL_VERSION),
        b"mcp-name": body_params.get("name", body_params.get("uri")),
    }
    args = body_params.get("arguments")
    values[b"mcp-param-region"] = args.get("region") if isinstance(args, dict) else None
    headers = []
    for name, value in values.items():
        header = draw(mirrored(value))
        if header is not None:
            headers.append((name, header.encode("latin-1", "replace")))
    return body, headers


# -- the properties -------------------------------------------------------------------------------

FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@FUZZ
@given(request=requests(), ensure_ascii=st.booleans())
def test_any_envelope_gets_a_well_formed_answer(
    app: Any, request: tuple[Any, list[tuple[bytes, bytes]]], ensure_ascii: bool
) -> None:
    body, headers = request
    raw = json.dumps(body, ensure_ascii=ensure_ascii).encode()
    response = call(app, raw, headers)
    messages = check_response(response, body)
    event(describe(response, messages))


@FUZZ
@given(
    raw=st.one_of(
        st.binary(max_size=200),
        st.sampled_from(
            [
                b"",
                b"[",
                b"{",
                b"null",
                b"[]",
                b"\xef\xbb\xbf{}",
                b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}',
                b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":' + b"[" * 5000,
                b'{"jsonrpc":"2.0","id":1,"method":"x","params":' + b"[" * 200 + b"]" * 200 + b"}",
                b'{"jsonrpc":"2.0","id":1,"method":"\xff"}',
                b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}',
                b'{"jsonrpc":"2.0","id":1e400,"method":"ping"}',
                b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":1e400}}',
                b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_custom_'
                b'header","arguments":{"region":1e400}}}',
                b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}',
            ]
        ),
    ),
    tweak=st.tuples(st.integers(min_value=0, max_value=80), st.binary(max_size=4)),
)
def test_any_bytes_get_a_well_formed_answer(app: Any, raw: bytes, tweak: tuple[int, bytes]) -> None:
    position, insert = tweak
    for body in (raw, raw[:position] + insert + raw[position:]):
        try:
            request = json.loads(body)
        except (ValueError, RecursionError):
            request = None
        check_response(call(app, body, []), request)


def mcp_headers(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    """The ``mcp-*`` headers of ``headers`` as the harness takes them."""
    return [(k.encode(), v.encode()) for k, v in headers.items() if k.startswith("mcp-")]


def test_the_harness_sees_a_real_answer(app: Any) -> None:
    """A well-formed request through the same harness gets a full, correct result."""
    params = {"name": "test_simple_text", "arguments": {}}
    raw, headers = modern_request("tools/call", params, request_id=2**70)
    body = json.loads(raw)
    response = call(app, raw, mcp_headers(headers))
    (message,) = check_response(response, body)
    assert response.status == 200
    assert message["id"] == 2**70
    assert message["result"]["content"][0]["text"].startswith("This is a simple text")


def test_the_harness_sees_a_stream(app: Any) -> None:
    params = {"name": "test_tool_with_progress", "_meta": {"progressToken": "p"}}
    raw, headers = modern_request("tools/call", params, request_id="s")
    body = json.loads(raw)
    response = call(app, raw, mcp_headers(headers))
    messages = check_response(response, body)
    assert response.complete
    assert [m.get("method") for m in messages[:-1]] == ["notifications/progress"] * 3
    assert messages[-1]["id"] == "s"


def test_the_harness_catches_a_bad_error_code() -> None:
    """The checks can fail: a made-up error code or a 500 is reported."""
    bad = Response(status=400, headers={b"content-type": b"application/json"}, complete=True)
    body = b'{"jsonrpc":"2.0","error":{"code":-1,"message":"x"}}'
    bad.headers[b"content-length"] = str(len(body)).encode()
    bad.chunks.append(body)
    with pytest.raises(AssertionError, match="unexpected error code"):
        check_response(bad)
    crashed = Response(status=500, complete=True)
    with pytest.raises(AssertionError, match="HTTP 500"):
        check_response(crashed)
