"""millimcp.protocol.header_params: one x-mcp-header rule set for the server and the client."""

from __future__ import annotations

from typing import Any

import pytest

from millimcp.errors import ConfigurationError, HeaderMismatch, InvalidHeaderDeclaration
from millimcp.protocol import McpHeaders, encode_header_value
from millimcp.protocol.header_params import (
    check_param_headers,
    declare,
    header_params,
    param_headers,
    value_at,
)


def schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def test_declared_parameters_are_read_back_with_their_paths() -> None:
    tool = schema(
        region={"type": "string"},
        order={
            "type": "object",
            "properties": {"id": {"type": "integer", "x-mcp-header": "Order"}},
        },
    )
    declare(tool, {"region": "Region"})
    assert tool["properties"]["region"]["x-mcp-header"] == "Region"
    assert header_params(tool) == (("Region", ("region",)), ("Order", ("order", "id")))


@pytest.mark.parametrize(
    ("tool", "broken"),
    [
        (schema(a={"type": "string", "x-mcp-header": "bad name"}), "not an HTTP token"),
        (schema(a={"type": "string", "x-mcp-header": ""}), "not an HTTP token"),
        (schema(a={"type": "string", "x-mcp-header": 3}), "not an HTTP token"),
        (schema(a={"type": "object", "x-mcp-header": "A"}), "only string, integer and boolean"),
        (schema(a={"anyOf": [{"type": "string"}], "x-mcp-header": "A"}), "of type None"),
        (
            schema(a={"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}),
            "reachable through 'properties'",
        ),
        ({"type": "string", "x-mcp-header": "Root"}, "the schema root"),
        (
            schema(
                a={"type": "string", "x-mcp-header": "Dup"},
                b={"type": "integer", "x-mcp-header": "dup"},
            ),
            "declared twice",
        ),
    ],
)
def test_a_declaration_that_breaks_a_rule_is_refused(tool: dict[str, Any], broken: str) -> None:
    with pytest.raises(InvalidHeaderDeclaration, match=broken) as raised:
        header_params(tool)
    assert isinstance(raised.value, ConfigurationError)


def test_declaring_a_parameter_that_does_not_exist_is_refused() -> None:
    with pytest.raises(InvalidHeaderDeclaration, match="no parameter 'nope'"):
        declare(schema(a={"type": "string"}), {"nope": "Nope"})


def test_deep_schemas_are_refused_not_recursed_forever() -> None:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(100):
        node = {"type": "object", "properties": {"x": node}}
    with pytest.raises(InvalidHeaderDeclaration, match="nests too deeply"):
        header_params(node)


def test_the_client_sends_one_header_per_present_value() -> None:
    params = (("Region", ("region",)), ("Id", ("order", "id")), ("Flag", ("flag",)))
    assert param_headers(params, {"region": "eu", "order": {"id": 7}, "flag": True}) == {
        "Mcp-Param-Region": "eu",
        "Mcp-Param-Id": "7",
        "Mcp-Param-Flag": "true",
    }
    assert param_headers(params, {"region": None, "order": "not an object"}) == {}
    assert param_headers(params, {"region": " Zürich "}) == {
        "Mcp-Param-Region": encode_header_value(" Zürich ")
    }


def test_value_at_stops_at_anything_that_is_not_an_object() -> None:
    assert value_at({"a": {"b": 1}}, ("a", "b")) == 1
    assert value_at({"a": [1]}, ("a", "b")) is None
    assert value_at({}, ("a",)) is None


def test_the_server_checks_what_the_client_sent_against_the_body() -> None:
    params = (("Region", ("region",)), ("Id", ("order", "id")))
    sent = McpHeaders(raw=[(b"mcp-param-region", b"eu"), (b"Mcp-Param-Id", b"7")])
    check_param_headers(params, {"region": "eu", "order": {"id": 7}}, sent)
    check_param_headers(params, {"region": "eu"}, sent)  # absent in the body: not checked
    with pytest.raises(HeaderMismatch):
        check_param_headers(params, {"region": "us"}, sent)
    with pytest.raises(HeaderMismatch):
        check_param_headers(params, {"order": {"id": 8}}, sent)
    missing = McpHeaders(raw=[])
    with pytest.raises(HeaderMismatch, match="Mcp-Param-Region header is required"):
        check_param_headers(params, {"region": "eu"}, missing)


def test_what_the_client_sends_the_server_accepts() -> None:
    tool = schema(
        region={"type": "string", "x-mcp-header": "Region"},
        n={"type": "integer", "x-mcp-header": "N"},
        on={"type": "boolean", "x-mcp-header": "On"},
    )
    params = header_params(tool)
    arguments = {"region": "São Paulo\t", "n": 2**53 + 1, "on": False}
    headers = param_headers(params, arguments)
    raw = [(name.lower().encode(), value.encode("latin-1")) for name, value in headers.items()]
    check_param_headers(params, arguments, McpHeaders(raw=raw))
