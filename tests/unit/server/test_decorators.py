"""Every form of ``@server.tool``, ``@server.prompt`` and ``@server.completion`` registers the
function and gives it back unchanged."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from millimcp import Server
from millimcp.protocol.types import CompleteArgument, CompletionRef
from tests.unit.server.asgi_calls import result


async def shout(text: str) -> str:
    return text.upper()


def greet(who: str) -> str:
    return f"hello {who}"


TOOL_FORMS: dict[str, Callable[[Server], object]] = {
    "bare": lambda server: server.tool(shout),
    "empty call": lambda server: server.tool()(shout),
    "positional name": lambda server: server.tool("loud")(shout),
    "keyword name": lambda server: server.tool(name="loud")(shout),
    "keywords only": lambda server: server.tool(title="Shout", timeout=5)(shout),
}
PROMPT_FORMS: dict[str, Callable[[Server], object]] = {
    "bare": lambda server: server.prompt(greet),
    "empty call": lambda server: server.prompt()(greet),
    "positional name": lambda server: server.prompt("hi")(greet),
    "keyword name": lambda server: server.prompt(name="hi")(greet),
    "keywords only": lambda server: server.prompt(description="Greets")(greet),
}


@pytest.mark.parametrize("form", TOOL_FORMS)
async def test_tool_forms(form: str) -> None:
    server = Server("forms")
    assert TOOL_FORMS[form](server) is shout
    name = "loud" if "name" in form else "shout"
    app = server.asgi()
    (tool,) = (await result(app, "tools/list", {}))["tools"]
    assert tool["name"] == name
    called = await result(app, "tools/call", {"name": name, "arguments": {"text": "hi"}})
    assert called["content"][0]["text"] == "HI"
    server.close()


async def test_the_decorator_syntax_without_parentheses() -> None:
    server = Server("forms")

    @server.tool
    async def echo(text: str) -> str:
        """Echoes."""
        return text

    @server.prompt
    def welcome(who: str) -> str:
        return f"welcome {who}"

    @server.completion
    def complete(
        ref: CompletionRef, argument: CompleteArgument, context: dict[str, str]
    ) -> list[str]:
        return [argument.value + "!"]

    assert echo.__name__ == "echo"
    assert welcome("you") == "welcome you"  # still the plain function
    app = server.asgi()
    (tool,) = (await result(app, "tools/list", {}))["tools"]
    assert (tool["name"], tool["description"]) == ("echo", "Echoes.")
    (prompt,) = (await result(app, "prompts/list", {}))["prompts"]
    assert prompt["name"] == "welcome"
    completed = await result(
        app,
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "welcome"},
            "argument": {"name": "who", "value": "x"},
        },
    )
    assert completed["completion"]["values"] == ["x!"]
    server.close()


@pytest.mark.parametrize("form", PROMPT_FORMS)
async def test_prompt_forms(form: str) -> None:
    server = Server("forms")
    assert PROMPT_FORMS[form](server) is greet
    name = "hi" if "name" in form else "greet"
    app = server.asgi()
    (prompt,) = (await result(app, "prompts/list", {}))["prompts"]
    assert prompt["name"] == name
    got = await result(app, "prompts/get", {"name": name, "arguments": {"who": "you"}})
    assert got["messages"][0]["content"]["text"] == "hello you"
    server.close()


def test_completion_forms() -> None:
    def complete(
        ref: CompletionRef, argument: CompleteArgument, context: dict[str, str]
    ) -> list[str]:
        return []

    forms: list[Callable[[Server], object]] = [
        lambda server: server.completion(complete),
        lambda server: server.completion()(complete),
    ]
    for register in forms:
        server = Server("forms")
        assert register(server) is complete
        assert server.capabilities().completions == {}


def test_unknown_tool_options_are_refused_at_once() -> None:
    server = Server("forms")
    with pytest.raises(TypeError, match="colour"):
        server.tool(colour="red")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="colour"):
        server.tool(shout, colour="red")  # type: ignore[call-overload]


async def test_arguments_reach_a_tool_by_position_and_by_keyword_alike() -> None:
    server = Server("arguments")

    @server.tool()
    async def ordered(a: str, b: int, c: str = "z") -> str:  # passed positionally
        return f"{a}{b}{c}"

    @server.tool()
    async def keywords(a: str, *, b: int, c: str = "z") -> str:  # passed by keyword
        return f"{a}{b}{c}"

    app = server.asgi()
    for name in ("ordered", "keywords"):
        given = {"c": "y", "b": 2, "a": "x"}  # not in the signature's order
        called = await result(app, "tools/call", {"name": name, "arguments": given})
        assert called["content"][0]["text"] == "x2y", name
        called = await result(app, "tools/call", {"name": name, "arguments": {"b": 3, "a": "w"}})
        assert called["content"][0]["text"] == "w3z", name
        refused = await result(app, "tools/call", {"name": name, "arguments": {"a": "w"}})
        assert refused["isError"] is True, name
    server.close()
