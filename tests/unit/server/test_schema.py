"""millimcp.server.schema: JSON schemas and validating decoders from type hints."""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Any, Literal, Optional, TypedDict

import msgspec
import pydantic
import pytest

from millimcp import ConfigurationError, Context
from millimcp.protocol.types import ImageContent, TextContent
from millimcp.server.schema import ArgumentModel, OutputModel


class Point(msgspec.Struct):
    x: int
    y: int = 0


@dataclasses.dataclass
class Box:
    width: float
    label: str = "box"


class Address(TypedDict):
    street: str
    city: str


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class MyContext(Context):
    """A user's own context subclass (Context is a msgspec Struct: no __slots__ here)."""


class Inner(pydantic.BaseModel):
    value: int


class Order(pydantic.BaseModel):
    item: str
    quantity: int = pydantic.Field(ge=1)
    inner: Inner | None = None


def model(fn: Any) -> ArgumentModel:
    return ArgumentModel(fn, struct_name=f"{fn.__name__}_arguments")


def resolve(schema: dict[str, Any], ref: str) -> Any:
    """Follow a local JSON pointer ``#/...`` from the root of ``schema``."""
    assert ref.startswith("#/"), ref
    node: Any = schema
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        assert isinstance(node, dict), f"{ref} does not resolve"
        assert part in node, f"{ref} does not resolve"
        node = node[part]
    return node


def refs(node: Any) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                found.append(value)
            else:
                found.extend(refs(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(refs(item))
    return found


# -- ArgumentModel: schemas -----------------------------------------------------------------------


def test_plain_types_defaults_and_optional() -> None:
    def fn(a: int, b: str = "x", c: Optional[int] = None, d: float | None = 1.5) -> None: ...  # noqa: UP045

    schema = model(fn).schema
    assert schema["type"] == "object"
    assert schema["required"] == ["a"]
    props = schema["properties"]
    assert props["a"] == {"type": "integer"}
    assert props["b"] == {"type": "string", "default": "x"}
    assert props["c"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert props["c"]["default"] is None
    assert props["d"]["default"] == 1.5
    assert "title" not in schema


def test_no_parameters_gives_an_empty_object_schema() -> None:
    def fn() -> None: ...

    arguments = model(fn)
    assert arguments.empty
    assert arguments.schema["type"] == "object"
    assert arguments.schema["properties"] == {}
    assert arguments.decode(b"") == {}
    assert arguments.decode(b"{}") == {}


def test_struct_dataclass_typeddict_parameters_use_local_defs() -> None:
    def fn(point: Point, box: Box, address: Address) -> None: ...

    schema = model(fn).schema
    assert set(schema["required"]) == {"point", "box", "address"}
    for name, definition in (("point", "Point"), ("box", "Box"), ("address", "Address")):
        assert schema["properties"][name] == {"$ref": f"#/$defs/{definition}"}
    assert schema["$defs"]["Point"]["required"] == ["x"]
    assert schema["$defs"]["Box"]["properties"]["label"]["default"] == "box"
    assert sorted(schema["$defs"]["Address"]["required"]) == ["city", "street"]
    for ref in refs(schema):
        resolve(schema, ref)


def test_literal_and_enum_parameters() -> None:
    def fn(mode: Literal["fast", "slow"], color: Color) -> None: ...

    schema = model(fn).schema
    assert schema["properties"]["mode"] == {"enum": ["fast", "slow"]}
    assert sorted(resolve(schema, schema["properties"]["color"]["$ref"])["enum"]) == ["blue", "red"]


def test_annotated_constraints_appear_in_the_schema() -> None:
    def fn(
        n: Annotated[int, msgspec.Meta(ge=0)],
        name: Annotated[str, msgspec.Meta(min_length=1, max_length=8, description="who")],
    ) -> None: ...

    props = model(fn).schema["properties"]
    assert props["n"] == {"type": "integer", "minimum": 0}
    assert props["name"] == {
        "type": "string",
        "minLength": 1,
        "maxLength": 8,
        "description": "who",
    }


def test_context_parameter_is_excluded_from_the_schema() -> None:
    def fn(query: str, ctx: Context) -> None: ...

    arguments = model(fn)
    assert arguments.context_param == "ctx"
    assert list(arguments.schema["properties"]) == ["query"]
    assert arguments.fields == ("query",)
    assert "ctx" not in arguments.decode(b'{"query":"q"}')


def test_a_context_subclass_is_also_recognised() -> None:
    def fn(c: MyContext, n: int = 1) -> None: ...

    arguments = model(fn)
    assert arguments.context_param == "c"
    assert list(arguments.schema["properties"]) == ["n"]


@pytest.mark.parametrize("kind", ["varargs", "kwargs", "positional-only"])
def test_variadic_and_positional_only_parameters_are_rejected(kind: str) -> None:
    def varargs(*args: int) -> None: ...

    def kwargs(**extra: int) -> None: ...

    def positional_only(a: int, /) -> None: ...

    fn = {"varargs": varargs, "kwargs": kwargs, "positional-only": positional_only}[kind]
    with pytest.raises(ConfigurationError, match="plain or keyword"):
        model(fn)


def test_an_unsupported_parameter_type_is_a_configuration_error() -> None:
    def fn(thing: object) -> None: ...

    with pytest.raises(ConfigurationError, match="unsupported parameter type"):
        model(fn)


def test_a_pydantic_model_parameter_takes_its_schema_from_pydantic() -> None:
    def fn(order: Order, note: str = "") -> None: ...

    arguments = model(fn)
    order_schema = arguments.schema["properties"]["order"]
    assert order_schema["title"] == "Order"
    assert order_schema["properties"]["quantity"]["minimum"] == 1
    assert order_schema["required"] == ["item", "quantity"]
    assert arguments.schema["required"] == ["order"]
    assert "#/$defs/Inner" in refs(order_schema)  # pydantic's own reference style


def test_every_ref_in_a_pydantic_parameter_schema_resolves_from_the_root() -> None:
    def fn(order: Order) -> None: ...

    schema = model(fn).schema
    assert refs(schema), "expected the nested model to be referenced"
    for ref in refs(schema):
        resolve(schema, ref)


def test_an_optional_pydantic_model_parameter_is_accepted() -> None:
    def fn(order: Order | None = None) -> None: ...

    arguments = model(fn)
    assert arguments.decode(b"{}") == {"order": None}


# -- ArgumentModel: decoding ----------------------------------------------------------------------


def test_decode_applies_defaults() -> None:
    def fn(a: int, b: str = "x", c: Optional[int] = None) -> None: ...  # noqa: UP045

    assert model(fn).decode(b'{"a":1}') == {"a": 1, "b": "x", "c": None}
    assert model(fn).decode(b'{"a":2,"b":"y","c":3}') == {"a": 2, "b": "y", "c": 3}


def test_unknown_arguments_are_ignored() -> None:
    def fn(a: int) -> None: ...

    assert model(fn).decode(b'{"a":1,"zzz":[1,2]}') == {"a": 1}


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (b'{"a":"1"}', "$.a"),
        (b'{"a":1.0}', "$.a"),
        (b'{"a":true}', "$.a"),
        (b'{"a":null}', "$.a"),
        (b"{}", "missing required field `a`"),
        (b"", "missing required field `a`"),
        (b"[]", "Expected `object`"),
        (b'"a"', "Expected `object`"),
    ],
)
def test_decode_rejects_wrong_types(raw: bytes, where: str) -> None:
    def fn(a: int) -> None: ...

    with pytest.raises(msgspec.ValidationError) as info:
        model(fn).decode(raw)
    assert where in str(info.value)


def test_decode_malformed_json_is_a_decode_error() -> None:
    def fn(a: int) -> None: ...

    with pytest.raises(msgspec.DecodeError):
        model(fn).decode(b'{"a":')


def test_decode_builds_structs_dataclasses_typeddicts() -> None:
    def fn(point: Point, box: Box, address: Address) -> None: ...

    kwargs = model(fn).decode(
        b'{"point":{"x":3},"box":{"width":2.5},"address":{"street":"s","city":"c"}}'
    )
    assert kwargs == {
        "point": Point(3, 0),
        "box": Box(2.5),
        "address": {"street": "s", "city": "c"},
    }
    with pytest.raises(msgspec.ValidationError, match=r"\$\.point\.x"):
        model(fn).decode(
            b'{"point":{"x":"3"},"box":{"width":1},"address":{"street":"s","city":"c"}}'
        )


def test_decode_literal_enum_and_constraints() -> None:
    def fn(
        mode: Literal["fast", "slow"], color: Color, n: Annotated[int, msgspec.Meta(ge=0)]
    ) -> None: ...

    arguments = model(fn)
    assert arguments.decode(b'{"mode":"fast","color":"blue","n":0}') == {
        "mode": "fast",
        "color": Color.BLUE,
        "n": 0,
    }
    for bad, message in (
        (b'{"mode":"medium","color":"red","n":0}', "$.mode"),
        (b'{"mode":"fast","color":"green","n":0}', "$.color"),
        (b'{"mode":"fast","color":"red","n":-1}', ">= 0"),
    ):
        with pytest.raises(msgspec.ValidationError) as info:
            arguments.decode(bad)
        assert message in str(info.value)


def test_decode_validates_a_pydantic_parameter_with_pydantic() -> None:
    def fn(order: Order) -> None: ...

    arguments = model(fn)
    kwargs = arguments.decode(b'{"order":{"item":"tea","quantity":2,"inner":{"value":5}}}')
    assert isinstance(kwargs["order"], Order)
    assert kwargs["order"].inner == Inner(value=5)
    with pytest.raises(pydantic.ValidationError, match="greater than or equal to 1"):
        arguments.decode(b'{"order":{"item":"tea","quantity":0}}')
    with pytest.raises(pydantic.ValidationError):
        arguments.decode(b'{"order":"not an object"}')
    with pytest.raises(msgspec.ValidationError, match="order"):
        arguments.decode(b"{}")


def test_decode_keeps_big_integers_exact() -> None:
    def fn(n: int) -> None: ...

    assert model(fn).decode(b'{"n":1180591620717411303424}') == {"n": 2**70}


# -- OutputModel ----------------------------------------------------------------------------------


@pytest.mark.parametrize("annotation", [str, None, type(None), Any])
def test_text_and_untyped_returns_have_no_output_model(annotation: Any) -> None:
    assert OutputModel.for_return(annotation) is None


@pytest.mark.parametrize(
    "annotation",
    [TextContent, ImageContent, list[TextContent], TextContent | ImageContent],
    ids=["text", "image", "list", "union"],
)
def test_content_returns_have_no_output_model(annotation: Any) -> None:
    assert OutputModel.for_return(annotation) is None


def test_a_struct_return_gives_an_object_schema() -> None:
    output = OutputModel.for_return(Point)
    assert output is not None
    assert not output.wrap
    assert output.schema["type"] == "object"
    assert output.schema["required"] == ["x"]
    assert "title" not in output.schema
    assert output.structured(Point(1, 2)) == {"x": 1, "y": 2}


def test_dataclass_typeddict_and_pydantic_returns_are_objects() -> None:
    for annotation in (Box, Address, Order):
        output = OutputModel.for_return(annotation)
        assert output is not None, annotation
        assert output.schema["type"] == "object"
        assert not output.wrap
    order = OutputModel.for_return(Order)
    assert order is not None
    assert order.structured(Order(item="a", quantity=2)) == {
        "item": "a",
        "quantity": 2,
        "inner": None,
    }


def test_a_list_return_is_wrapped_in_result() -> None:
    output = OutputModel.for_return(list[int])
    assert output is not None
    assert output.wrap
    assert output.schema == {
        "type": "object",
        "properties": {"result": {"type": "array", "items": {"type": "integer"}}},
        "required": ["result"],
    }
    assert output.structured([1, 2]) == {"result": [1, 2]}


@pytest.mark.parametrize("annotation", [int, float, bool])
def test_scalar_returns_are_wrapped(annotation: Any) -> None:
    output = OutputModel.for_return(annotation)
    assert output is not None
    assert output.wrap
    assert output.schema["required"] == ["result"]


def test_a_list_of_structs_keeps_its_defs_at_the_root() -> None:
    output = OutputModel.for_return(list[Point])
    assert output is not None
    assert output.wrap
    assert "Point" in output.schema["$defs"]
    for ref in refs(output.schema):
        resolve(output.schema, ref)
    assert output.structured([Point(1)]) == {"result": [{"x": 1, "y": 0}]}


def test_a_dict_return_is_an_object_not_wrapped() -> None:
    output = OutputModel.for_return(dict[str, int])
    assert output is not None
    assert not output.wrap
    assert output.structured({"a": 1}) == {"a": 1}


def test_annotated_returns_are_unwrapped() -> None:
    output = OutputModel.for_return(Annotated[Point, "meta"])
    assert output is not None
    assert output.schema["type"] == "object"
