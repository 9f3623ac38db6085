"""Schemas from type hints: a function's parameters become one msgspec struct.

Decoding a call's ``arguments`` into that struct parses and validates in one pass. msgspec
types, dataclasses, TypedDicts, enums, literals, ``Annotated[..., msgspec.Meta(...)]`` all
work natively; pydantic models are accepted too (decoded as JSON values, then validated by
pydantic, their schema taken from pydantic).
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any, Final

import msgspec

from millimcp.errors import ConfigurationError
from millimcp.session import Context
from millimcp.tensor.extension import RequestAttachment, TensorParam, tensor_param

__all__ = ["ArgumentModel", "OutputModel", "is_pydantic_model", "json_schema"]

_REF_TEMPLATE: Final = "#/$defs/{name}"


def is_pydantic_model(tp: Any) -> bool:
    return (
        isinstance(tp, type) and hasattr(tp, "model_validate") and hasattr(tp, "model_json_schema")
    )


def json_schema(tp: Any) -> dict[str, Any]:
    """A self-contained JSON schema for ``tp`` with local ``$defs`` only."""
    if is_pydantic_model(tp):
        return dict(tp.model_json_schema())
    (schema,), components = msgspec.json.schema_components([tp], ref_template=_REF_TEMPLATE)
    return _inline_root(schema, components)


def _inline_root(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and len(schema) == 1:
        name = ref[len("#/$defs/") :]
        root = dict(components[name])
        if not _refers_to(components, name):
            components = {k: v for k, v in components.items() if k != name}
        schema = root
    if components:
        schema = {**schema, "$defs": components}
    return schema


def _refers_to(components: dict[str, Any], name: str) -> bool:
    needle = f'"#/$defs/{name}"'
    return needle in msgspec.json.encode(components).decode()


class ArgumentModel:
    """The arguments of one handler: a struct type, its JSON schema, how to call the handler."""

    __slots__ = (
        "context_param",
        "decoder",
        "empty",
        "fields",
        "optional_pydantic",
        "positional",
        "pydantic_fields",
        "schema",
        "struct",
        "tensor_fields",
    )

    def __init__(self, fn: Callable[..., Any], *, struct_name: str) -> None:
        hints = typing.get_type_hints(fn, include_extras=True)
        signature = inspect.signature(fn)
        fields: list[tuple[str, Any, Any]] = []
        properties_override: dict[str, dict[str, Any]] = {}
        lifted_defs: dict[str, Any] = {}  # pydantic's $defs, moved to the schema root
        self.context_param: str | None = None
        self.pydantic_fields: dict[str, Any] = {}
        self.optional_pydantic: set[str] = set()
        self.tensor_fields: dict[str, TensorParam] = {}
        keyword_only = False
        for name, param in signature.parameters.items():
            annotation = hints.get(name, Any)
            if annotation is Context or (
                isinstance(annotation, type) and issubclass(annotation, Context)
            ):
                self.context_param = name
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
                raise ConfigurationError(
                    f"{fn.__qualname__}: parameter {name!r} must be a plain or keyword parameter"
                )
            tensor = tensor_param(annotation)
            if tensor is not None:  # ndarray / Tensor (or a dict of them): see millimcp.tensor
                self.tensor_fields[name] = tensor
                properties_override[name] = tensor.schema
                annotation = tensor.wire_type
            model, optional = _pydantic_parameter(annotation)
            if model is not None:
                self.pydantic_fields[name] = model
                if optional:
                    self.optional_pydantic.add(name)
                sub = json_schema(model)
                for def_name, definition in sub.pop("$defs", {}).items():
                    if lifted_defs.setdefault(def_name, definition) != definition:
                        raise ConfigurationError(
                            f"{fn.__qualname__}: two different models named {def_name!r}"
                        )
                properties_override[name] = {"anyOf": [sub, {"type": "null"}]} if optional else sub
                annotation = Any
            keyword_only = keyword_only or param.kind == param.KEYWORD_ONLY
            default = msgspec.NODEFAULT if param.default is param.empty else param.default
            fields.append((name, annotation, default))
        self.fields = tuple(name for name, _, _ in fields)
        self.struct: type[msgspec.Struct] = msgspec.defstruct(
            struct_name,
            [(n, a) if d is msgspec.NODEFAULT else (n, a, d) for n, a, d in fields],
            kw_only=True,
            forbid_unknown_fields=False,
        )
        try:
            self.decoder = msgspec.json.Decoder(self.struct)
            schema = json_schema(self.struct)
        except TypeError as exc:
            raise ConfigurationError(
                f"{fn.__qualname__}: unsupported parameter type: {exc}"
            ) from None
        schema.pop("title", None)
        for name, sub in properties_override.items():
            schema.setdefault("properties", {})[name] = sub
        if lifted_defs:
            defs = schema.setdefault("$defs", {})
            for def_name, definition in lifted_defs.items():
                if defs.setdefault(def_name, definition) != definition:
                    raise ConfigurationError(
                        f"{fn.__qualname__}: two different types named {def_name!r}"
                    )
        schema.setdefault("properties", {})
        self.schema: dict[str, Any] = schema
        self.empty = not self.fields
        self.positional = not (
            keyword_only or self.context_param or self.pydantic_fields or self.tensor_fields
        )
        """The decoded struct's fields, in order, are the handler's positional arguments (no
        keyword-only, Context, pydantic or tensor parameter): a call can skip the dict."""

    def decode(self, raw: bytes, attachment: RequestAttachment | None = None) -> dict[str, Any]:
        """Decode and validate ``raw`` JSON arguments into keyword arguments.

        Tensor parameters are read from their base64 blob or from ``attachment`` (the
        request's raw tensors). Raises msgspec.ValidationError (or pydantic's
        ValidationError, or TensorFormatError: all ValueErrors) on bad input.
        """
        args = self.decoder.decode(raw or b"{}")
        kwargs = msgspec.structs.asdict(args)
        for name, model in self.pydantic_fields.items():
            value = kwargs[name]
            if value is not None or name not in self.optional_pydantic:
                kwargs[name] = model.model_validate(value)
        if self.tensor_fields:
            attachment = attachment or RequestAttachment(None)
            for name, tensor in self.tensor_fields.items():
                kwargs[name] = tensor.decode(kwargs[name], attachment)
        return kwargs


class OutputModel:
    """How a typed return value becomes ``structuredContent``, and its ``outputSchema``."""

    __slots__ = ("schema", "to_builtins", "wrap")

    def __init__(self, annotation: Any) -> None:
        self.wrap = False
        if is_pydantic_model(annotation):
            self.schema = json_schema(annotation)
            self.to_builtins: Callable[[Any], Any] = _pydantic_dump
            return
        schema = json_schema(annotation)
        if schema.get("type") != "object":
            # structuredContent must be an object: wrap other values as {"result": value}.
            self.wrap = True
            defs = schema.pop("$defs", None)
            schema = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
            if defs:
                schema["$defs"] = defs
        schema.pop("title", None)
        self.schema = schema
        self.to_builtins = msgspec.to_builtins

    def structured(self, value: Any) -> Any:
        data = self.to_builtins(value)
        return {"result": data} if self.wrap else data

    @staticmethod
    def for_return(annotation: Any) -> OutputModel | None:
        """An output model for typed returns; None for text, content and untyped returns."""
        if annotation in (inspect.Signature.empty, Any, None, type(None), str):
            return None
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            return OutputModel.for_return(typing.get_args(annotation)[0])
        if _is_content_type(annotation):
            return None
        if (
            (
                isinstance(annotation, type)
                and (
                    issubclass(annotation, msgspec.Struct)
                    or dataclasses.is_dataclass(annotation)
                    or typing.is_typeddict(annotation)
                    or is_pydantic_model(annotation)
                )
            )
            or origin in (dict, list, tuple)
            or annotation in (int, float, bool)
        ):
            try:
                return OutputModel(annotation)
            except TypeError:
                return None
        return None


def _pydantic_parameter(annotation: Any) -> tuple[Any, bool]:
    """(model, optional) when ``annotation`` is a pydantic model or ``Model | None``."""
    if is_pydantic_model(annotation):
        return annotation, False
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if (
            len(members) == 1
            and len(typing.get_args(annotation)) == 2
            and is_pydantic_model(members[0])
        ):
            return members[0], True
    return None, False


def _is_content_type(annotation: Any) -> bool:
    from millimcp.protocol.types import content

    names = set(content.__all__)
    args = typing.get_args(annotation) or (annotation,)
    for arg in args:
        for inner in typing.get_args(arg) or (arg,):
            if getattr(inner, "__module__", "") == content.__name__ and inner.__name__ in names:
                return True
    return False


def _pydantic_dump(value: Any) -> Any:
    return value.model_dump(mode="json", by_alias=True)
