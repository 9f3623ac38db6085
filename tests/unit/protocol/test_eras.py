"""millimcp.protocol.eras: which era a request is, over every combination, and each era's checks."""

from __future__ import annotations

import itertools

import pytest

from millimcp.errors import (
    HeaderMismatch,
    InvalidParams,
    MethodNotFound,
    ProtocolError,
    UnsupportedProtocolVersion,
)
from millimcp.protocol import METHODS, McpHeaders
from millimcp.protocol.eras import (
    HANDSHAKE,
    MODERN,
    check_handshake_version,
    check_modern,
    classify_http,
    classify_line,
    negotiate_handshake,
    without_result_type,
)
from millimcp.protocol.jsonrpc import encode_result
from millimcp.protocol.types import ClientCapabilities, EmptyResult, RequestMeta

VERSIONS = (None, "2026-07-28", "2025-11-25", "2025-03-26", "1999-01-01")
"""Versions a request may name: none, ours of each era, one nobody serves."""


def expected_http(session: bool, meta_version: str | None, header_version: str | None) -> str:
    """The rule, written out independently of the implementation."""
    if session:
        return HANDSHAKE
    if meta_version is not None:  # any version in _meta: a modern request (checked later)
        return MODERN
    if header_version == "2026-07-28":  # a modern header without _meta: modern, refused later
        return MODERN
    return HANDSHAKE


@pytest.mark.parametrize(
    ("session", "meta_version", "header_version"),
    list(itertools.product((False, True), VERSIONS, VERSIONS)),
)
def test_http_classification_over_every_combination(
    session: bool, meta_version: str | None, header_version: str | None
) -> None:
    session_id = "abc" if session else None
    era = classify_http(meta_version, header_version, session_id)
    assert era == expected_http(session, meta_version, header_version)


@pytest.mark.parametrize(
    ("method", "meta_version"), list(itertools.product(sorted(METHODS), VERSIONS))
)
def test_line_classification_over_every_method_and_version(
    method: str, meta_version: str | None
) -> None:
    legacy_only = METHODS[method].era == "legacy"
    expected = HANDSHAKE if meta_version is None or legacy_only else MODERN
    assert classify_line(method, meta_version) == expected


def test_line_initialize_and_ping_stay_in_the_handshake_era_even_with_modern_meta() -> None:
    assert classify_line("initialize", "2026-07-28") == HANDSHAKE
    assert classify_line("ping", "2026-07-28") == HANDSHAKE
    assert classify_line("tools/call", "2026-07-28") == MODERN


def meta(version: str | None = "2026-07-28", capabilities: bool = True) -> RequestMeta:
    return RequestMeta(
        protocol_version=version,
        client_capabilities=ClientCapabilities() if capabilities else None,
    )


def headers(
    method: str | None = "tools/call",
    name: str | None = "echo",
    version: str | None = "2026-07-28",
) -> McpHeaders:
    return McpHeaders(version, method, name)


def test_a_complete_modern_request_passes_and_names_its_version() -> None:
    assert check_modern("tools/call", meta(), "echo", headers()) == "2026-07-28"
    assert check_modern("tools/list", meta(), None, headers("tools/list", None)) == "2026-07-28"
    assert check_modern("tools/call", meta()) == "2026-07-28"  # stdio: no headers


@pytest.mark.parametrize(
    ("method", "request_meta", "name", "request_headers", "error"),
    [
        # each row breaks one rule; the first broken rule in the spec's order is reported
        ("initialize", meta(), None, headers("initialize", None), MethodNotFound),
        ("ping", None, None, headers("wrong", None, None), MethodNotFound),
        ("tools/call", meta(), "echo", headers(method=None), HeaderMismatch),
        ("tools/call", meta(), "echo", headers(method="tools/list"), HeaderMismatch),
        ("tools/call", None, "echo", headers(method="tools/list"), HeaderMismatch),
        ("tools/call", meta(), "echo", headers(name="other"), HeaderMismatch),
        ("tools/call", meta(), "echo", headers(name=None), HeaderMismatch),
        ("tools/call", None, "echo", headers(), InvalidParams),
        ("tools/call", meta(None), "echo", headers(), InvalidParams),
        ("tools/call", meta(capabilities=False), "echo", headers(version=None), InvalidParams),
        ("tools/call", meta(), "echo", headers(version=None), HeaderMismatch),
        ("tools/call", meta(), "echo", headers(version="2025-11-25"), HeaderMismatch),
        ("tools/call", meta("2025-11-25"), "echo", headers(version="2025-11-25"),
         UnsupportedProtocolVersion),
        ("tools/call", meta("1999-01-01"), None, None, UnsupportedProtocolVersion),
    ],
)  # fmt: skip
def test_modern_checks_report_the_first_rule_broken(
    method: str,
    request_meta: RequestMeta | None,
    name: str | None,
    request_headers: McpHeaders | None,
    error: type[ProtocolError],
) -> None:
    with pytest.raises(ProtocolError) as raised:
        check_modern(method, request_meta, name, request_headers)
    assert type(raised.value) is error


def test_an_unsupported_version_lists_the_supported_ones() -> None:
    with pytest.raises(UnsupportedProtocolVersion) as raised:
        check_modern("tools/list", meta("2031-01-01"))
    assert raised.value.data == {"supported": ["2026-07-28"], "requested": "2031-01-01"}


@pytest.mark.parametrize(
    ("requested", "agreed"),
    [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2025-11-25"),  # unknown: our latest, the client decides
        ("2026-07-28", "2025-11-25"),  # the modern revision has no handshake
    ],
)
def test_handshake_negotiation(requested: str, agreed: str) -> None:
    assert negotiate_handshake(requested) == agreed


def test_a_server_without_the_handshake_era_refuses_initialize() -> None:
    with pytest.raises(UnsupportedProtocolVersion) as raised:
        negotiate_handshake("2025-11-25", enabled=False)
    assert raised.value.data == {"supported": ["2026-07-28"], "requested": "2025-11-25"}


def test_handshake_version_header() -> None:
    check_handshake_version(None)
    check_handshake_version("2025-06-18")
    for version in ("2026-07-28", "junk"):
        with pytest.raises(UnsupportedProtocolVersion):
            check_handshake_version(version)


def test_replies_to_the_handshake_era_lose_result_type_and_nothing_else() -> None:
    data = encode_result(7, EmptyResult(meta={"resultType": "complete", "x": 1}))
    assert data.startswith(b'{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete",')
    stripped = without_result_type(data)
    assert (
        stripped == b'{"jsonrpc":"2.0","id":7,"result":{"_meta":{"resultType":"complete","x":1}}}'
    )
    assert without_result_type(b'{"jsonrpc":"2.0","id":1,"result":{}}') == (
        b'{"jsonrpc":"2.0","id":1,"result":{}}'
    )


@pytest.mark.parametrize(
    ("meta_version", "header_version"), list(itertools.product(VERSIONS, VERSIONS))
)
def test_classifying_checks_agree_with_classify_http_then_check_modern(
    meta_version: str | None, header_version: str | None
) -> None:
    """``check_modern(..., classify=True)`` (the HTTP hot path) is classify_http and, when
    modern, check_modern: None for the handshake era, else the same version or error."""
    request_meta = None if meta_version is None else meta(meta_version)
    request_headers = headers(version=header_version)
    era = classify_http(meta_version, header_version)
    try:
        expected: object = check_modern("tools/call", request_meta, "echo", request_headers)
    except ProtocolError as exc:
        expected = type(exc)
    if era == HANDSHAKE:
        expected = None
    try:
        got: object = check_modern("tools/call", request_meta, "echo", request_headers, True)
    except ProtocolError as exc:
        got = type(exc)
    assert got == expected
