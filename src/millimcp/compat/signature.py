"""A user function's signature as the FastMCP family reads it: a pydantic arguments model
(``Annotated``/``Field`` metadata and defaults kept), its JSON schema, lax validation, and
the output model of a typed return.

The schemas are pydantic's, built the way the flavour builds them (model ``{fn}Arguments``,
wrapped returns as ``{fn}Output`` with one ``result`` field), so a client sees the same
definitions on millimcp as on the real framework.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
import re
import sys
import typing
from collections.abc import Callable
from typing import Annotated, Any, Final

import pydantic
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, WithJsonSchema

from millimcp.compat.flavour import Flavour

__all__ = ["Arguments", "Output", "context_parameter", "docstring"]


class _ArgsBase(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)


def context_parameter(fn: Callable[..., Any], context_types: tuple[type, ...]) -> str | None:
    """The parameter annotated with a compat ``Context`` (subscripted or not, or the
    string ``"Context"``), or None."""
    try:
        hints = typing.get_type_hints(fn)
    except (AttributeError, NameError, SyntaxError, TypeError):
        hints = {}
    for name, param in inspect.signature(fn).parameters.items():
        annotation = hints.get(name, param.annotation)
        origin = typing.get_origin(annotation) or annotation
        if annotation == "Context" or (
            isinstance(origin, type) and issubclass(origin, context_types)
        ):
            return name
    return None


_ARGS_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")
_ARG_LINE = re.compile(r"^\s+(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def docstring(doc: str | None) -> tuple[str | None, dict[str, str]]:
    """fastmcp's reading of a docstring: (the text before its first section, parameter ->
    description). With griffe installed (fastmcp's own parser), as fastmcp reads it: Google,
    NumPy and Sphinx styles; without, Google-style ``Args:`` only."""
    if not doc:
        return None, {}
    parsed = _griffe_docstring(doc)
    return parsed if parsed is not None else google_docstring(doc)


def google_docstring(doc: str) -> tuple[str | None, dict[str, str]]:
    """:func:`docstring` without griffe: the text before ``Args:``, and its entries."""
    summary: list[str] = []
    params: dict[str, str] = {}
    current: str | None = None
    arg_indent: int | None = None
    section = False
    in_args = False
    for line in inspect.cleandoc(doc).splitlines():
        if _ARGS_SECTION.match(line):
            in_args = section = True
            continue
        if in_args:
            if line and not line[0].isspace():
                in_args = False  # the next section (Returns:, Raises:...)
                continue
            match = _ARG_LINE.match(line)
            indent = len(line) - len(line.lstrip())
            if match and (arg_indent is None or indent <= arg_indent):
                arg_indent = indent
                current = match.group(1).lstrip("*")
                params[current] = match.group(2).strip()
            elif current is not None and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
        elif not section:
            summary.append(line)
    text = "\n".join(summary).strip()
    return text or None, params


_STRUCTURE_ADMONITIONS: Final = frozenset(
    [
        "attention",
        "caution",
        "danger",
        "error",
        "example",
        "hint",
        "important",
        "note",
        "notes",
        "raise",
        "references",
        "return",
        "see-also",
        "tip",
        "todo",
        "warning",
        "yield",
    ]
)
"""Google-style headings griffe reads as admonitions that are sections (Napoleon's names),
unlike prose that happens to end in a colon."""


def _griffe_docstring(doc: str) -> tuple[str | None, dict[str, str]] | None:
    """fastmcp 4's rule: the first of griffe's google, numpy and sphinx parsers that finds a
    section gives the description (its first text) and the parameters; none: the whole
    docstring is the description. None when griffe is not installed."""
    try:
        from griffe import Docstring, DocstringSectionKind
    except ImportError:
        return None
    logging.getLogger("griffe").setLevel(logging.ERROR)  # its warnings about missing types
    text = inspect.cleandoc(doc)
    for parser in ("google", "numpy", "sphinx"):
        description: str | None = None
        params: dict[str, str] = {}
        structured = False
        for section in Docstring(text, lineno=1, parser=parser).parse():
            if section.kind == DocstringSectionKind.text:
                description = section.value if description is None else description
            elif section.kind == DocstringSectionKind.parameters:
                params.update({p.name: p.description for p in section.value})
                structured = True
            elif section.kind == DocstringSectionKind.admonition:
                structured = structured or section.value.kind in _STRUCTURE_ADMONITIONS
            else:
                structured = True
        if params or structured:
            return description, params
    return text, {}


class Arguments:
    """A function's parameters as the flavour's pydantic model: schema and validation."""

    __slots__ = ("aliases", "descriptions", "model", "not_str", "pre_parse", "schema")

    def __init__(
        self,
        fn: Callable[..., Any],
        flavour: Flavour,
        *,
        skip: str | None,
        descriptions: dict[str, str] | None = None,
    ) -> None:
        signature = inspect.signature(fn, eval_str=True)
        fields: dict[str, Any] = {}
        self.aliases: dict[str, str] = {}
        descriptions = descriptions or {}
        for name, param in signature.parameters.items():
            if name == skip:
                continue
            annotation = Any if param.annotation is inspect.Parameter.empty else param.annotation
            metadata: list[Any] = []
            if param.annotation is inspect.Parameter.empty:
                metadata.append(WithJsonSchema({"title": name, "type": "string"}))
            field_kwargs: dict[str, Any] = {}
            field_name = name
            if hasattr(BaseModel, name) and callable(getattr(BaseModel, name)):
                field_kwargs["alias"] = name
                field_name = f"field_{name}"
            self.aliases[field_name] = name
            if name in descriptions and not _has_description(annotation, param.default):
                field_kwargs["description"] = descriptions[name]
            typed = Annotated[(annotation, *metadata, Field(**field_kwargs))]  # type: ignore[valid-type]
            if param.default is inspect.Parameter.empty:
                fields[field_name] = typed
            else:
                fields[field_name] = (typed, param.default)
        self.model: type[BaseModel] = pydantic.create_model(
            f"{fn.__name__}Arguments", __base__=_ArgsBase, **fields
        )
        schema = self.model.model_json_schema(by_alias=True)
        if flavour.prune_titles:
            schema = _prune_titles(schema)
            schema["additionalProperties"] = False
        self.schema: dict[str, Any] = schema
        self.pre_parse = flavour.pre_parse_json
        self.not_str = {
            info.alias or name
            for name, info in self.model.model_fields.items()
            if info.annotation is not str
        }

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        """Validated keyword arguments (sub-models kept as objects); raises pydantic's
        ``ValidationError``."""
        if self.pre_parse:
            data = self._pre_parse(data)
        model = self.model.model_validate(data)
        return {self.aliases[name]: getattr(model, name) for name in type(model).model_fields}

    def _pre_parse(self, data: dict[str, Any]) -> dict[str, Any]:
        parsed = data
        for key, value in data.items():
            if isinstance(value, str) and key in self.not_str:
                try:
                    decoded = json.loads(value)
                except (ValueError, RecursionError):
                    continue
                if not isinstance(decoded, str | int | float):
                    if parsed is data:
                        parsed = dict(data)
                    parsed[key] = decoded
        return parsed


def _has_description(annotation: Any, default: Any) -> bool:
    if isinstance(default, pydantic.fields.FieldInfo) and default.description:
        return True
    for meta in typing.get_args(annotation)[1:] if typing.get_origin(annotation) else ():
        if isinstance(meta, pydantic.fields.FieldInfo) and meta.description:
            return True
    return False


def _prune_titles(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if key == "title" and isinstance(value, str):
                continue
            if key == "properties" and isinstance(value, dict):
                out[key] = {k: _prune_titles(v) for k, v in value.items()}
            else:
                out[key] = _prune_titles(value)
        return out
    if isinstance(schema, list):
        return [_prune_titles(item) for item in schema]
    return schema


class Output:
    """The structured output of a typed return: its schema and how a value is dumped."""

    __slots__ = ("adapter", "schema", "wrap")

    def __init__(self, adapter: TypeAdapter[Any], schema: dict[str, Any], wrap: bool) -> None:
        self.adapter = adapter
        self.schema = schema
        self.wrap = wrap

    def structured(self, value: Any) -> Any:
        """The ``structuredContent`` of ``value`` (validated by the output type)."""
        if self.wrap:
            value = {"result": value}
        validated = self.adapter.validate_python(value)
        if isinstance(validated, BaseModel):
            return validated.model_dump(mode="json", by_alias=True)
        return self.adapter.dump_python(validated, mode="json", by_alias=True)

    @staticmethod
    def for_function(
        fn: Callable[..., Any], flavour: Flavour, structured: bool | None
    ) -> Output | None:
        """The output of ``fn``'s return annotation, or None for unstructured tools."""
        if structured is False:
            return None
        returns = inspect.signature(fn, eval_str=True).return_annotation
        if returns is inspect.Parameter.empty:
            return None
        base = returns
        if typing.get_origin(base) is Annotated:
            base = typing.get_args(base)[0]
        if structured is None and _is_content(base):
            return None
        if _is_call_result(base):
            # ``Annotated[CallToolResult, Model]``: the tool builds its result, Model its schema
            extra = typing.get_args(returns)[1:] if returns is not base else ()
            if not extra or not isinstance(extra[0], type):
                return None
            returns = base = extra[0]
        name = fn.__name__
        try:
            return _output(returns, base, name, flavour)
        except (pydantic.PydanticUserError, TypeError, ValueError, NameError):
            return None


def _output(returns: Any, base: Any, name: str, flavour: Flavour) -> Output | None:
    origin = typing.get_origin(base)
    if isinstance(base, type) and issubclass(base, BaseModel):
        return _unwrapped(TypeAdapter(base), flavour)
    if isinstance(base, type) and typing.is_typeddict(base):
        return _unwrapped(TypeAdapter(_readable_typeddict(base)), flavour)
    if origin is dict and typing.get_args(base)[:1] == (str,):
        return _unwrapped(TypeAdapter(Annotated[base, Field(title=f"{name}DictOutput")]), flavour)
    if (
        isinstance(base, type)
        and origin is None
        and base not in (str, int, float, bool, bytes, type(None))
    ):
        if dataclasses.is_dataclass(base):
            return _unwrapped(TypeAdapter(base), flavour)
        hints = typing.get_type_hints(base)
        if not hints:
            return None
        fields: dict[str, Any] = {
            name: (hint, getattr(base, name)) if hasattr(base, name) else hint
            for name, hint in hints.items()
            if not name.startswith("_")
        }
        model = pydantic.create_model(
            base.__name__, __config__=ConfigDict(from_attributes=True), **fields
        )
        return _unwrapped(TypeAdapter(model), flavour)
    wrapper = pydantic.create_model(f"{name}Output", result=(returns, ...))
    schema = wrapper.model_json_schema()
    if flavour.wrap_marker:
        schema = {**_prune_titles(schema), "x-fastmcp-wrap-result": True}
    return Output(TypeAdapter(wrapper), schema, wrap=True)


def _readable_typeddict(td: Any) -> Any:
    """A ``typing.TypedDict`` rebuilt as ``typing_extensions``' (pydantic refuses the former
    below Python 3.12)."""
    if sys.version_info >= (3, 12) or type(td).__module__ != "typing":
        return td
    from typing import NotRequired

    from typing_extensions import TypedDict as ExtTypedDict

    hints = typing.get_type_hints(td, include_extras=True)
    items = {k: h if k in td.__required_keys__ else NotRequired[h] for k, h in hints.items()}
    rebuilt: Any = ExtTypedDict(td.__name__, items)  # type: ignore[misc]
    rebuilt.__doc__ = td.__doc__
    rebuilt.__module__ = td.__module__
    return rebuilt


def _unwrapped(adapter: TypeAdapter[Any], flavour: Flavour) -> Output:
    schema = adapter.json_schema()
    if flavour.prune_titles:
        schema = _prune_titles(schema)
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        schema = {**schema["$defs"][ref.removeprefix("#/$defs/")], **schema}
        schema.pop("$ref")
    return Output(adapter, schema, wrap=False)


def _is_content(annotation: Any) -> bool:
    from millimcp.compat.results import is_content_type

    origin = typing.get_origin(annotation)
    if origin is None:
        return is_content_type(annotation)
    if origin is Annotated:
        return _is_content(typing.get_args(annotation)[0])
    return any(_is_content(arg) for arg in typing.get_args(annotation))


def _is_call_result(annotation: Any) -> bool:
    return isinstance(annotation, type) and annotation.__name__ == "CallToolResult"
