"""The scenario file of ``millimcp scenario``: sequences and fan-outs of tool calls, with
values passed between steps (:mod:`millimcp.lab.scenario` runs them).

The format (TOML, read with the standard library's ``tomllib``)::

    name = "agent"                    # optional; defaults to the file's stem
    description = "..."               # optional
    seed = 7                          # optional: agent i draws from Random(f"{seed}:{i}")
    timeout = 5.0                     # optional: seconds per call (the client's otherwise)
    [vars]                            # optional constants, read as vars.NAME
    regions = ["eu", "us"]

    [[step]]                          # a call
    name = "order"
    tool = "get_order"
    args = { order_id = "{{ random_int(1, 1000000) }}" }

    [[step]]
    name = "recs"
    tool = "get_recommendations"
    args = { customer_id = "{{ order.customer_id }}" }

    [[step]]                          # a fan-out: its calls run at once
    name = "profiles"                 # optional: the group's own latency is reported too
    parallel = [
      { name = "p1", tool = "get_profile", args = { customer_id = "{{ order.customer_id }}" } },
      ...
    ]

Steps run in order; the calls of a ``parallel`` step run concurrently and the next step
starts when all of them have ended. A call with ``as_task = true`` is started as a task (the
tasks extension) and the next steps start at once; the iteration ends when it has its result
too, and later steps cannot read its value. Every string in ``args`` may hold templates:

- ``"{{ expr }}"`` as the whole string gives the expression's value with its type (an int
  stays an int); ``"id-{{ expr }}"`` formats it into the string (JSON for lists and objects).
- A step's **value** is its result's ``structuredContent``; when there is none, its text
  parsed as JSON; when that fails, the text itself. ``order.customer_id``,
  ``recs.items[0].sku``, ``recs["key with spaces"]`` read into it. A name must be a step that
  ran before (not one of the same fan-out), checked when the file is loaded.
- Also ``agent`` (the virtual agent's number, from 0), ``iteration`` (its iteration, from 0),
  ``vars.NAME``; literals (numbers, strings, true/false as Python's ``True``/``False``,
  lists); and the functions ``random_int(lo, hi)`` (inclusive), ``random_float(lo, hi)``,
  ``choice(a, b, ...)`` or ``choice(list)``, ``uuid()``, ``int(x)``, ``float(x)``,
  ``str(x)``, ``len(x)``. Nothing else: expressions are parsed with :mod:`ast` and only these
  forms are interpreted, never evaluated as Python.
"""

from __future__ import annotations

import ast
import json
import random
import re
import tomllib
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from millimcp.errors import ConfigurationError, MillimcpError

if TYPE_CHECKING:
    from millimcp.client import ToolResult

__all__ = [
    "Call",
    "IterationContext",
    "Parallel",
    "ReferenceFailed",
    "Scenario",
    "load_scenario",
    "parse_scenario",
    "step_value",
]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_BUILTIN_NAMES = frozenset({"agent", "iteration", "vars"})


# -- expressions ------------------------------------------------------------------------------


@dataclass(slots=True)
class IterationContext:
    """What an expression can read during one iteration of one agent."""

    results: dict[str, ToolResult]
    values: dict[str, Any]
    agent: int
    iteration: int
    rng: random.Random
    vars: Mapping[str, Any]

    def value(self, step: str) -> Any:
        try:
            return self.values[step]
        except KeyError:
            value = self.values[step] = step_value(self.results[step])
            return value


_Eval = Callable[[IterationContext], Any]


class ReferenceFailed(MillimcpError, LookupError):
    """An expression read a field its value does not have (counted, never raised out)."""


def step_value(result: ToolResult) -> Any:
    """The value a later step sees for ``result``: ``structuredContent``, else the text parsed
    as JSON, else the text."""
    if result.structured_content is not None:
        return result.structured_content
    text = result.text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _random_int(ctx: IterationContext, low: Any, high: Any) -> int:
    return ctx.rng.randint(int(low), int(high))


def _random_float(ctx: IterationContext, low: Any, high: Any) -> float:
    return ctx.rng.uniform(float(low), float(high))


def _choice(ctx: IterationContext, *items: Any) -> Any:
    pool = items[0] if len(items) == 1 and isinstance(items[0], list) else items
    if not pool:
        raise ReferenceFailed("choice() of an empty list")
    return ctx.rng.choice(pool)


def _uuid(ctx: IterationContext) -> str:
    return str(uuid.UUID(int=ctx.rng.getrandbits(128), version=4))


def _convert(kind: Callable[[Any], Any]) -> Callable[[IterationContext, Any], Any]:
    def convert(ctx: IterationContext, value: Any) -> Any:
        try:
            return kind(value)
        except (TypeError, ValueError) as exc:
            raise ReferenceFailed(f"{kind.__name__}({value!r}): {exc}") from None

    return convert


def _str(ctx: IterationContext, value: Any) -> str:
    return _format(value)


# name -> (function, fewest arguments, most arguments or None)
_FUNCTIONS: dict[str, tuple[Callable[..., Any], int, int | None]] = {
    "random_int": (_random_int, 2, 2),
    "random_float": (_random_float, 2, 2),
    "choice": (_choice, 1, None),
    "uuid": (_uuid, 0, 0),
    "int": (_convert(int), 1, 1),
    "float": (_convert(float), 1, 1),
    "str": (_str, 1, 1),
    "len": (_convert(len), 1, 1),
}


def _format(value: Any) -> str:
    """A value formatted into a string template."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def _field(value: Any, key: Any, shown: str) -> Any:
    try:
        if isinstance(value, dict):
            return value[key]
        if isinstance(value, list) and isinstance(key, int) and not isinstance(key, bool):
            return value[key]
    except (KeyError, IndexError):
        pass
    raise ReferenceFailed(f"{shown}: no such field in {_format(value)[:200]}")


@dataclass(slots=True)
class _Compiler:
    """Turns the ``ast`` of one ``{{ expr }}`` into a closure, checking names as it goes."""

    where: str
    known: frozenset[str]
    pending: frozenset[str]
    referenced: set[str]

    def fail(self, message: str) -> ConfigurationError:
        return ConfigurationError(f"{self.where}: {message}")

    def compile(self, source: str) -> _Eval:
        try:
            tree = ast.parse(source.strip(), mode="eval")
        except SyntaxError as exc:
            raise self.fail(f"cannot parse {{{{ {source.strip()} }}}}: {exc.msg}") from None
        return self.node(tree.body)

    def node(self, node: ast.expr) -> _Eval:
        if isinstance(node, ast.Constant):
            value = node.value
            if value is not None and not isinstance(value, str | int | float | bool):
                raise self.fail(f"literal {ast.unparse(node)} is not allowed")
            return lambda ctx: value
        if (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, ast.USub | ast.UAdd)
            and isinstance(node.operand, ast.Constant)
            and isinstance(node.operand.value, int | float)
            and not isinstance(node.operand.value, bool)
        ):
            number = -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
            return lambda ctx: number
        if isinstance(node, ast.List | ast.Tuple):
            items = [self.node(item) for item in node.elts]
            return lambda ctx: [item(ctx) for item in items]
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.Attribute):
            base = self.node(node.value)
            key, shown = node.attr, ast.unparse(node)
            return lambda ctx: _field(base(ctx), key, shown)
        if isinstance(node, ast.Subscript):
            base, index, shown = self.node(node.value), self.node(node.slice), ast.unparse(node)
            return lambda ctx: _field(base(ctx), index(ctx), shown)
        if isinstance(node, ast.Call):
            return self.call(node)
        raise self.fail(
            f"{ast.unparse(node)!r} is not allowed: use step references (order.customer_id), "
            f"literals and the functions {', '.join(sorted(_FUNCTIONS))}"
        )

    def name(self, name: str) -> _Eval:
        if name == "agent":
            return lambda ctx: ctx.agent
        if name == "iteration":
            return lambda ctx: ctx.iteration
        if name == "vars":
            return lambda ctx: ctx.vars
        if name in self.known:
            self.referenced.add(name)
            return lambda ctx: ctx.value(name)
        if name in self.pending:
            raise self.fail(
                f"{name!r} is not a call that ran before this one (a later step, one of the "
                "same fan-out, or a fan-out's name): it has no value here"
            )
        earlier = ", ".join(sorted(self.known)) or "none"
        raise self.fail(f"unknown name {name!r} (steps before this one: {earlier})")

    def call(self, node: ast.Call) -> _Eval:
        shown = ast.unparse(node)
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            raise self.fail(
                f"{shown!r}: the functions are {', '.join(sorted(_FUNCTIONS))}, nothing else"
            )
        if node.keywords or any(isinstance(arg, ast.Starred) for arg in node.args):
            raise self.fail(f"{shown!r}: positional arguments only")
        function, fewest, most = _FUNCTIONS[node.func.id]
        count = len(node.args)
        if count < fewest or (most is not None and count > most):
            wanted = str(fewest) if most == fewest else f"at least {fewest}"
            raise self.fail(f"{shown!r}: {node.func.id}() takes {wanted} argument(s)")
        args = [self.node(arg) for arg in node.args]
        return lambda ctx: function(ctx, *(arg(ctx) for arg in args))


_TEMPLATE = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


def _compile_string(text: str, compiler: _Compiler) -> _Eval:
    if "{{" not in text:
        return lambda ctx: text
    parts: list[str | _Eval] = []
    position = 0
    for match in _TEMPLATE.finditer(text):
        if match.start() > position:
            parts.append(text[position : match.start()])
        parts.append(compiler.compile(match.group(1)))
        position = match.end()
    rest = text[position:]
    if "{{" in rest:
        raise compiler.fail(f"unterminated template in {text!r}")
    if rest:
        parts.append(rest)
    if len(parts) == 1 and not isinstance(parts[0], str):
        return parts[0]  # the whole string is one template: keep the value's type

    def interpolate(ctx: IterationContext) -> str:
        return "".join(part if isinstance(part, str) else _format(part(ctx)) for part in parts)

    return interpolate


def _compile_value(value: Any, compiler: _Compiler) -> tuple[_Eval, bool]:
    """A closure building ``value`` with its templates filled, and whether it is constant."""
    if isinstance(value, str):
        if "{{" not in value:
            return (lambda ctx: value), True
        return _compile_string(value, compiler), False
    if isinstance(value, dict):
        entries = {key: _compile_value(item, compiler) for key, item in value.items()}
        if all(constant for _, constant in entries.values()):
            return (lambda ctx: value), True
        fields = {key: build for key, (build, _) in entries.items()}
        return (lambda ctx: {key: build(ctx) for key, build in fields.items()}), False
    if isinstance(value, list):
        items = [_compile_value(item, compiler) for item in value]
        if all(constant for _, constant in items):
            return (lambda ctx: value), True
        elements = [build for build, _ in items]
        return (lambda ctx: [build(ctx) for build in elements]), False
    return (lambda ctx: value), True


# -- the scenario -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call of a scenario."""

    name: str
    tool: str
    args: Any
    """The arguments as written in the file (templates unfilled)."""
    timeout: float | None = None
    as_task: bool = False
    """Started as a task (``call_tool(..., as_task=True)``); the steps after it do not wait."""
    build: _Eval = field(default=lambda ctx: {}, repr=False, compare=False)
    """Builds the arguments of one call from an iteration's context."""

    def render(
        self,
        values: Mapping[str, Any] | None = None,
        *,
        agent: int = 0,
        iteration: int = 0,
        rng: random.Random | None = None,
        vars: Mapping[str, Any] | None = None,
    ) -> Any:
        """The arguments this call would send, given earlier steps' ``values`` (what
        :func:`step_value` made of their results). Raises LookupError for a reference the
        values cannot satisfy."""
        context = IterationContext(
            {}, dict(values or {}), agent, iteration, rng or random.Random(0), vars or {}
        )
        return self.build(context)


@dataclass(frozen=True, slots=True)
class Parallel:
    """Calls that run at once; the next step waits for all of them."""

    name: str | None
    calls: tuple[Call, ...]


@dataclass(frozen=True, slots=True)
class Scenario:
    """A parsed scenario file (see the module docstring for the format)."""

    name: str
    steps: tuple[Call | Parallel, ...]
    description: str = ""
    seed: int | None = None
    timeout: float | None = None
    vars: Mapping[str, Any] = field(default_factory=dict)
    referenced: frozenset[str] = frozenset()
    """Steps whose values later steps read (only these results are decoded)."""

    @property
    def calls(self) -> tuple[Call, ...]:
        """Every call, in file order."""
        found: list[Call] = []
        for step in self.steps:
            found.extend(step.calls if isinstance(step, Parallel) else (step,))
        return tuple(found)

    @property
    def stat_names(self) -> tuple[str, ...]:
        """The names per-step stats are kept under: calls and named fan-outs, in order."""
        names: list[str] = []
        for step in self.steps:
            if isinstance(step, Parallel):
                if step.name is not None:
                    names.append(step.name)
                names.extend(call.name for call in step.calls)
            else:
                names.append(step.name)
        return tuple(names)

    @property
    def width(self) -> int:
        """The most calls one iteration has in flight at once."""
        return max(
            (len(step.calls) if isinstance(step, Parallel) else 1 for step in self.steps),
            default=1,
        )


def _check_keys(table: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigurationError(
            f"{where}: unknown key(s) {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})"
        )


def _timeout(table: Mapping[str, Any], where: str) -> float | None:
    value = table.get("timeout")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigurationError(f"{where}: timeout must be a positive number of seconds")
    return float(value)


def parse_scenario(text: str, *, default_name: str = "scenario") -> Scenario:
    """Parse a scenario from TOML text; raise ConfigurationError naming what is wrong."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"scenario: not valid TOML: {exc}") from None
    _check_keys(data, {"name", "description", "seed", "timeout", "vars", "step"}, "scenario")
    name = data.get("name", default_name)
    description = data.get("description", "")
    seed = data.get("seed")
    variables = data.get("vars", {})
    if not isinstance(name, str) or not name:
        raise ConfigurationError("scenario: name must be a non-empty string")
    if not isinstance(description, str):
        raise ConfigurationError("scenario: description must be a string")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ConfigurationError("scenario: seed must be an integer")
    if not isinstance(variables, dict):
        raise ConfigurationError("scenario: vars must be a table")
    raw_steps = data.get("step")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise ConfigurationError("scenario: no steps (add [[step]] tables)")

    taken: set[str] = set()  # every name: calls and fan-outs
    known: set[str] = set()  # calls that have run: their values can be read
    referenced: set[str] = set()
    steps: list[Call | Parallel] = []
    declared = _declared_names(raw_steps)
    for number, raw in enumerate(raw_steps, 1):
        where = f"step {number}"
        if not isinstance(raw, dict):
            raise ConfigurationError(f"{where}: must be a table")
        if "parallel" in raw:
            _check_keys(raw, {"name", "parallel"}, where)
            group = raw.get("name")
            if group is not None:
                where = f"step {group!r}"
                _check_name(group, where, taken)
                taken.add(group)
            entries = raw["parallel"]
            if not isinstance(entries, list) or not entries:
                raise ConfigurationError(f"{where}: parallel must be a non-empty list of calls")
            before = frozenset(known)
            calls = []
            for index, entry in enumerate(entries, 1):
                call = _parse_call(entry, f"{where} call {index}", before, declared, referenced)
                _check_name(call.name, f"{where} call {index}", taken)
                taken.add(call.name)
                calls.append(call)
            known.update(call.name for call in calls)
            steps.append(Parallel(group, tuple(calls)))
        else:
            call = _parse_call(raw, where, frozenset(known), declared, referenced)
            _check_name(call.name, where, taken)
            taken.add(call.name)
            if not call.as_task:  # a task's value comes after the steps that follow it
                known.add(call.name)
            steps.append(call)
    return Scenario(
        name=name,
        steps=tuple(steps),
        description=description,
        seed=seed,
        timeout=_timeout(data, "scenario"),
        vars=variables,
        referenced=frozenset(referenced),
    )


def _declared_names(raw_steps: list[Any]) -> frozenset[str]:
    """Every name the file declares (for a clear message when a step reads a later one)."""
    names: set[str] = set()
    for raw in raw_steps:
        if isinstance(raw, dict):
            entries = raw.get("parallel") if "parallel" in raw else [raw]
            if "parallel" in raw and isinstance(raw.get("name"), str):
                names.add(raw["name"])
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                    names.add(entry["name"])
    return frozenset(names)


def _check_name(name: Any, where: str, taken: set[str]) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigurationError(f"{where}: name must be an identifier (letters, digits, _)")
    if name in _BUILTIN_NAMES or name in _FUNCTIONS:
        raise ConfigurationError(f"{where}: {name!r} is a reserved name")
    if name in taken:
        raise ConfigurationError(f"{where}: a step named {name!r} already exists")


def _parse_call(
    raw: Any,
    where: str,
    known: frozenset[str],
    declared: frozenset[str],
    referenced: set[str],
) -> Call:
    if not isinstance(raw, dict):
        raise ConfigurationError(f"{where}: must be a table")
    _check_keys(raw, {"name", "tool", "args", "timeout", "as_task"}, where)
    name, tool, args = raw.get("name"), raw.get("tool"), raw.get("args", {})
    if isinstance(name, str):
        where = f"step {name!r}"
    if not isinstance(tool, str) or not tool:
        raise ConfigurationError(f"{where}: tool must be a tool's name")
    if name is None:
        raise ConfigurationError(f"{where}: every call needs a name")
    if not isinstance(args, dict):
        raise ConfigurationError(f"{where}: args must be a table")
    compiler = _Compiler(f"{where} args", known, declared - known, referenced)
    build, _ = _compile_value(args, compiler)
    as_task = raw.get("as_task", False)
    if not isinstance(as_task, bool):
        raise ConfigurationError(f"{where}: as_task must be true or false")
    return Call(
        name=name,
        tool=tool,
        args=args,
        timeout=_timeout(raw, where),
        as_task=as_task,
        build=build,
    )


def load_scenario(path: str | Path) -> Scenario:
    """Read and parse a scenario file (its name defaults to the file's stem)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read scenario {str(path)!r}: {exc}") from None
    try:
        return parse_scenario(text, default_name=path.stem)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{path.name}: {exc}") from None
