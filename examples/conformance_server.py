"""The fixture server the official MCP conformance suite tests against.

Run: ``python examples/conformance_server.py --port 3999`` then
``conformance server --url http://127.0.0.1:3999/mcp --requirements 2026-07-28`` (or
``--requirements 2025-11-25``: one endpoint serves both eras). ``--stdio`` serves stdio.

It exposes the ``test_*`` tools, ``test://`` resources and ``test_*`` prompts that the
suite's scenarios call, the diagnostic tools of ``server-stateless``, the MRTR tools and
the task tools of the ``tasks-*`` scenarios.
Everything is written with the public millimcp API, so it doubles as an example of it.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from millimcp import Context, InputRequired, Server, ToolError, content
from millimcp.errors import InternalError, MissingClientCapability
from millimcp.protocol.types import (
    CreateMessageParams,
    CreateMessageRequest,
    ElicitParams,
    ElicitRequest,
    InputRequest,
    ListRootsRequest,
    PromptMessage,
    SamplingMessage,
    TextContent,
)

# A 1x1 PNG and a minimal WAV header, as base64.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8Dw"
    "HwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

server = Server(
    "millimcp-conformance",
    version="0.1.0",
    instructions="Fixture server for the MCP conformance suite.",
)


def _form(message: str, field: str, kind: str = "string") -> ElicitRequest:
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return ElicitRequest(params=ElicitParams(message=message, requested_schema=schema))


def _sampling(prompt: str, max_tokens: int) -> CreateMessageRequest:
    message = SamplingMessage(role="user", content={"type": "text", "text": prompt})
    return CreateMessageRequest(
        params=CreateMessageParams(messages=[message], max_tokens=max_tokens)
    )


# -- plain tools (tools/call scenarios) ------------------------------------------------------
# test_simple_text must stay first: some scenarios call tools[0] with {}.


@server.tool(description="Returns a simple text response.")
async def test_simple_text() -> str:
    return "This is a simple text response for testing."


@server.tool(description="Returns an image.")
async def test_image_content() -> Any:
    return content.image(PNG, "image/png")


@server.tool(description="Returns audio.")
async def test_audio_content() -> Any:
    return content.audio(WAV, "audio/wav")


@server.tool(description="Returns an embedded resource.")
async def test_embedded_resource() -> Any:
    return content.embedded(
        "test://embedded-resource",
        text="This is an embedded resource content.",
        mime_type="text/plain",
    )


@server.tool(description="Returns text, an image and an embedded resource.")
async def test_multiple_content_types() -> Any:
    return [
        content.text("Multiple content types test:"),
        content.image(PNG, "image/png"),
        content.embedded(
            "test://mixed-content-resource",
            text='{"test":"data","value":123}',
            mime_type="application/json",
        ),
    ]


@server.tool(description="Always fails with a tool error.")
async def test_error_handling() -> str:
    raise ToolError("This tool intentionally returns an error for testing")


@server.tool(description="Reports progress three times, then answers.")
async def test_tool_with_progress(ctx: Context) -> str:
    for step in (0, 50, 100):
        await ctx.report_progress(step, total=100, message=f"step {step}")
        if step < 100:
            await asyncio.sleep(0.05)
    return "Progress complete"


@server.tool(description="Logs at several levels while it works.")
async def test_logging_tool(ctx: Context) -> str:
    await ctx.info("logging tool started")
    await ctx.debug("a debug detail")
    await ctx.info("logging tool finished")
    return "Logging complete"


@server.tool(description="Needs the sampling capability, and says so when it is missing.")
async def test_missing_capability(ctx: Context) -> str:
    if ctx.client_capabilities.sampling is None:
        raise MissingClientCapability(
            "Missing required client capability: sampling",
            {"requiredCapabilities": {"sampling": {}}},
        )
    return "The client declared sampling."


@server.tool(description="Asks for a confirmation through MRTR, never over the stream.")
async def test_streaming_elicitation(ctx: Context) -> str:
    answer = await ctx.elicit("Please confirm", _boolean_schema("ok"), key="confirm")
    return f"Confirmed: {answer.action}"


@server.tool(description="Announces a tool-list change to listeners.")
async def test_trigger_tool_change() -> str:
    server.notify_list_changed("tools")
    return "Tool list change announced"


@server.tool(description="Announces a prompt-list change to listeners.")
async def test_trigger_prompt_change() -> str:
    server.notify_list_changed("prompts")
    return "Prompt list change announced"


@server.tool(
    description="Echoes a region mirrored in the Mcp-Param-Region header.",
    headers={"region": "Region"},
)
async def test_custom_header(region: str) -> str:
    return f"Region: {region}"


def _boolean_schema(field: str) -> dict[str, Any]:
    return {"type": "object", "properties": {field: {"type": "boolean"}}, "required": [field]}


# -- MRTR tools (input-required-result-* scenarios) ------------------------------------------


@server.tool(description="Asks the user's name by elicitation.")
async def test_input_required_result_elicitation(ctx: Context) -> str:
    answer = await ctx.elicit("What is your name?", _name_schema("name"), key="user_name")
    name = (answer.content or {}).get("name", "stranger")
    return f"Hello, {name}!"


def _name_schema(field: str) -> dict[str, Any]:
    return {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}


@server.tool(description="Asks the client's model a question.")
async def test_input_required_result_sampling(ctx: Context) -> str:
    result = await ctx.sample(
        "What is the capital of France?", max_tokens=100, key="capital_question"
    )
    text = result.content.get("text") if isinstance(result.content, dict) else None
    return f"The model answered: {text}"


@server.tool(description="Asks the client for its roots.")
async def test_input_required_result_list_roots(ctx: Context) -> str:
    roots = await ctx.list_roots(key="client_roots")
    return "Roots: " + ", ".join(root.uri for root in roots)


@server.tool(description="Keeps handler state across rounds in requestState.")
async def test_input_required_result_request_state(ctx: Context) -> str:
    if ctx.state is None:
        ctx.state = {"phase": "confirm"}
    answer = await ctx.elicit("Please confirm", _boolean_schema("ok"), key="confirm")
    ok = (answer.content or {}).get("ok")
    return f"state-ok: phase={ctx.state['phase']} confirmed={ok}"


@server.tool(description="Asks for elicitation, sampling and roots at once.")
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    answers = await ctx.request_input(
        {
            "user_name": _form("What is your name?", "name"),
            "greeting": _sampling("Generate a greeting", 50),
            "client_roots": ListRootsRequest(),
        }
    )
    return f"Received {len(answers)} answers"


@server.tool(description="Asks two questions in two rounds.")
async def test_input_required_result_multi_round(ctx: Context) -> str:
    first = await ctx.elicit("Step 1: What is your name?", _name_schema("name"), key="step1")
    second = await ctx.elicit(
        "Step 2: What is your favorite color?", _name_schema("color"), key="step2"
    )
    name = (first.content or {}).get("name")
    color = (second.content or {}).get("color")
    return f"{name} likes {color}"


@server.tool(description="Carries a sealed requestState; a tampered one is refused.")
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    ctx.state = {"sealed": True}
    await ctx.elicit("Please confirm", _boolean_schema("ok"), key="confirm")
    return "state verified"


@server.tool(description="Asks only for the kinds of input the client declared.")
async def test_input_required_result_capabilities(ctx: Context) -> str:
    caps = ctx.client_capabilities
    wanted: dict[str, InputRequest] = {}
    if caps.sampling is not None:
        wanted["capital_question"] = _sampling("What is the capital of France?", 100)
    if caps.elicitation is not None:
        wanted["user_name"] = _form("What is your name?", "name")
    if caps.roots is not None:
        wanted["client_roots"] = ListRootsRequest()
    if not wanted:
        raise MissingClientCapability(
            "Missing required client capability: sampling",
            {"requiredCapabilities": {"sampling": {}}},
        )
    answers = await ctx.request_input(wanted)
    return f"Received {len(answers)} answers"


JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@server.tool(description="Tool with JSON Schema 2020-12 features", input_schema=JSON_SCHEMA_2020_12)
async def json_schema_2020_12_tool(name: str = "") -> str:
    return f"Hello {name}"


# -- handshake-era tools: input from the client as server-to-client requests ------------------
# The same ctx.elicit / ctx.sample calls are MRTR rounds for a modern client.


@server.tool(description="Sends three log messages, 50 ms apart.")
async def test_tool_with_logging(ctx: Context) -> str:
    await ctx.info("Tool execution started")
    await asyncio.sleep(0.05)
    await ctx.info("Tool processing data")
    await asyncio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@server.tool(description="Asks the client's model to answer a prompt.")
async def test_sampling(prompt: str, ctx: Context) -> str:
    result = await ctx.sample(prompt, max_tokens=100)
    text = result.content.get("text", "") if isinstance(result.content, dict) else ""
    return f"LLM response: {text}"


@server.tool(description="Asks the user for a username and an email address.")
async def test_elicitation(message: str, ctx: Context) -> str:
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    answer = await ctx.elicit(message, schema)
    return f"User response: action={answer.action}, content={answer.content}"


@server.tool(description="Elicits a form whose fields all have defaults (SEP-1034).")
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {
                "type": "string",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "default": True},
        },
    }
    answer = await ctx.elicit("Please review these defaults", schema)
    return f"Elicitation completed: action={answer.action}, content={answer.content}"


@server.tool(description="Elicits all five kinds of enum field (SEP-1330).")
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    options = ["option1", "option2", "option3"]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": options},
            "titledSingle": {
                "type": "string",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"},
                ],
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": options}},
            "titledMulti": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]
                },
            },
        },
    }
    answer = await ctx.elicit("Please pick some options", schema)
    return f"Elicitation completed: action={answer.action}, content={answer.content}"


# -- tasks (the tasks-* scenarios: the io.modelcontextprotocol/tasks extension) ---------------


@server.tool(description="Greets someone, synchronously (never a task).")
async def greet(name: str) -> str:
    return f"Hello, {name}!"


@server.tool(description="Sleeps for `seconds`, then answers; a task.", task="optional")
async def slow_compute(seconds: float = 1.0, label: str = "") -> str:
    await asyncio.sleep(seconds)
    return f"Computed {label or 'result'} after {seconds:g} s"


@server.tool(description="Fails with a tool error after about a second; a task.", task="required")
async def failing_job() -> str:
    await asyncio.sleep(1.0)
    raise ToolError("The job failed (a tool error, on purpose)")


@server.tool(description="Fails with a JSON-RPC error; a task.", task="optional")
async def protocol_error_job() -> str:
    await asyncio.sleep(0.1)
    raise InternalError("The job hit an internal error (on purpose)")


@server.tool(description="Asks for a confirmation inside the task, then deletes.", task="optional")
async def confirm_delete(filename: str, ctx: Context) -> str:
    answer = await ctx.elicit(f"Delete {filename}?", _boolean_schema("confirm"), key="confirm")
    confirmed = answer.action == "accept" and (answer.content or {}).get("confirm") is True
    return f"Deleted {filename}" if confirmed else f"Kept {filename}"


@server.tool(description="Asks two questions at once inside the task.", task="optional")
async def multi_input(ctx: Context) -> str:
    answers = await ctx.request_input(
        {"first": _form("First name?", "name"), "second": _form("Second name?", "name")}
    )
    return f"Received {len(answers)} answers"


@server.tool(
    description="Asks the user's name through MRTR, then runs as a task.",
    task="required",
    ask_first={"user_name": _form("What is your name?", "name")},
)
async def test_tool_with_task(ctx: Context) -> str:
    answer = await ctx.elicit("What is your name?", _name_schema("name"), key="user_name")
    await asyncio.sleep(0.2)
    return f"Hello, {(answer.content or {}).get('name', 'stranger')}! (from a task)"


# -- resources --------------------------------------------------------------------------------


@server.resource(
    "test://watched-resource",
    name="watched-resource",
    mime_type="text/plain",
    description="A resource clients subscribe to.",
)
def watched_resource() -> str:
    return "Watched resource content."


@server.resource(
    "test://static-text",
    name="static-text",
    mime_type="text/plain",
    description="A static text resource.",
)
def static_text() -> str:
    return "This is the content of the static text resource."


@server.resource(
    "test://static-binary",
    name="static-binary",
    mime_type="image/png",
    description="A static binary resource.",
)
def static_binary() -> bytes:
    import base64

    return base64.b64decode(PNG)


@server.resource(
    "test://template/{id}/data",
    name="template",
    mime_type="application/json",
    description="A resource template with an id.",
)
def template_data(id: str) -> dict[str, Any]:
    return {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}


# -- prompts ----------------------------------------------------------------------------------


@server.prompt(description="A prompt without arguments.")
def test_simple_prompt() -> str:
    return "This is a simple prompt for testing."


@server.prompt(description="A prompt with two required arguments.")
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt(description="A prompt that embeds a resource.")
def test_prompt_with_embedded_resource(resourceUri: str) -> list[Any]:
    return [
        PromptMessage(
            role="user",
            content=content.embedded(
                resourceUri, text="Embedded resource content for testing.", mime_type="text/plain"
            ),
        ),
        "Please process the embedded resource above.",
    ]


@server.prompt(description="A prompt that shows an image.")
def test_prompt_with_image() -> list[Any]:
    return [content.image(PNG, "image/png"), "Please analyze the image above."]


@server.prompt(description="A prompt that first asks for context (MRTR).")
async def test_input_required_result_prompt(ctx: Context) -> list[Any]:
    answer = await ctx.elicit(
        "What context should the prompt use?", _name_schema("context"), key="user_context"
    )
    return [PromptMessage(role="user", content=TextContent(text=f"Context: {answer.content}"))]


@server.completion()
def complete(ref: Any, argument: Any, context: dict[str, str]) -> list[str]:
    options = {"arg1": ["test", "testing", "tested"], "arg2": ["alpha", "beta"]}
    return [v for v in options.get(argument.name, []) if v.startswith(argument.value)]


app = server.asgi()

_ = InputRequired  # re-exported for handlers that want full control


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3999)
    parser.add_argument("--stdio", action="store_true", help="serve stdio instead of HTTP")
    parser.add_argument(
        "--http",
        choices=("native", "uvicorn", "granian"),
        help="the HTTP front (default: native, or $MILLIMCP_HTTP_FRONT)",
    )
    args = parser.parse_args()
    if args.stdio:
        server.run_stdio()
    else:
        server.run_http(host=args.host, port=args.port, http=args.http)


if __name__ == "__main__":
    main()
