"""The millimcp client under the official MCP conformance suite's client contract.

The suite (``@modelcontextprotocol/conformance``) starts a scenario server, then runs::

    python examples/conformance_client.py <server url>

with ``MCP_CONFORMANCE_SCENARIO`` (the scenario's name), ``MCP_CONFORMANCE_PROTOCOL_VERSION``
(the revision whose wire the scenario runs at) and, for some scenarios,
``MCP_CONFORMANCE_CONTEXT`` (a JSON object). The revision fixes the lifecycle: through
2025-11-25 the handshake era (``initialize``, sessions, server-to-client requests on SSE),
from 2026-07-28 the modern era (``server/discover``, per-request ``_meta``, MRTR). Try it::

    conformance client --command "python examples/conformance_client.py" \\
        --requirements 2026-07-28

What each scenario asks of the client, on the wire (the scenario server scores it):

- ``initialize`` (2025-11-25): ``initialize`` with ``protocolVersion`` and ``clientInfo``
  name and version, then ``notifications/initialized``; a GET the server refuses is fine.
- ``tools_call``: list the tools, call ``add_numbers`` with two numbers.
- ``elicitation-sep1034-client-defaults`` (2025-11-25): call the tool; the server sends
  ``elicitation/create`` on the call's SSE stream; answer ``accept`` with every field that
  has a ``default`` in ``requestedSchema`` filled with it.
- ``sse-retry`` (2025-11-25): the ``tools/call`` stream sends only a priming event
  (``id``, ``retry: 500``, empty data) and closes; the client waits at least ``retry`` ms,
  then resumes with a GET carrying ``Last-Event-ID`` and reads the response there.
- ``request-metadata`` (2026-07-28): every POST carries ``MCP-Protocol-Version`` equal to
  ``_meta["io.modelcontextprotocol/protocolVersion"]`` and ``clientCapabilities`` (and
  ``clientInfo``) in ``_meta``; the first request is refused with ``-32022`` listing
  2026-07-28, and the client retries once with that version.
- ``sep-2322-client-request-state`` (2026-07-28): MRTR. Retry an ``input_required`` result
  with a new JSON-RPC id, ``inputResponses`` and ``requestState`` echoed byte for byte (none
  when the server sent none); another call carries neither; a result without
  ``resultType`` is complete.
- ``http-standard-headers`` (2026-07-28): ``Mcp-Method`` on every POST, ``Mcp-Name`` on
  ``tools/call`` / ``prompts/get`` (the name) and ``resources/read`` (the URI): use every
  tool, resource and prompt.
- ``http-custom-headers`` (2026-07-28): call the tools the context names with its
  arguments; each ``x-mcp-header`` parameter is mirrored in ``Mcp-Param-<Name>`` (numbers and
  booleans as text, unsafe strings as ``=?base64?...?=``, null omitted, others never).
- ``http-invalid-tool-headers`` (2026-07-28): tools whose ``x-mcp-header`` declarations
  break the rules are dropped from the list; ``valid_tool`` is still called.
- ``json-schema-ref-no-deref`` (2026-07-28): list tools; never fetch a network ``$ref``.
- ``json-schema-2020-12-preservation`` (scored by neither revision): send the focal tool's
  ``inputSchema`` back, as received, to ``json_schema_echo``.
- ``auth/*``: the first request meets a 401 (or, later, a 403 ``insufficient_scope``); the
  client runs the OAuth flow (``Client.over_http(auth=...)``) and resends. The scenario's
  authorization server approves at once, so :class:`~millimcp.auth.HeadlessRedirect` reads
  the redirect's ``Location`` (nothing listens on ``http://localhost:3000/callback``); the
  client offers the Client ID Metadata Document URL the suite expects
  (``https://conformance-test.local/client-metadata.json``), pre-registered credentials
  come from the context (``auth/pre-registration``), and ``auth/client-credentials-*`` use
  the ``client_credentials`` grant (``client_secret_basic``, or ``private_key_jwt`` with the
  context's PEM key). Then list the tools and call each. The negative scenarios
  (``resource-mismatch``, ``iss-*``, ``metadata-issuer-mismatch``, ``scope-retry-limit``)
  end in :class:`~millimcp.errors.AuthorizationFailed` or a refusal before any token request:
  the client exits non-zero, which those scenarios allow.

Exit status 0 and a last line ``conformance-client: <scenario> ok`` mean the client did
everything it meant to; the scenario's checks say whether the server saw it right.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any, Literal

from millimcp import Client, Timeout
from millimcp.auth import ClientCredentials, HeadlessRedirect, OAuth
from millimcp.protocol import LEGACY_VERSIONS
from millimcp.protocol.types import (
    CreateMessageParams,
    CreateMessageResult,
    ElicitParams,
    ElicitResult,
    Root,
    TextContent,
    Tool,
)

CLIENT_INFO = ("millimcp-conformance-client", "0.1.0")
ROOTS = [Root(uri="file:///conformance/workspace", name="workspace")]
FOCAL_TOOL = "json_schema_2020_12_tool"
ECHO_TOOL = "json_schema_echo"
CIMD_URL = "https://conformance-test.local/client-metadata.json"


async def elicit(params: ElicitParams) -> ElicitResult:
    """Accept, with the form's defaults filled in (a user who accepts a prefilled form)."""
    schema = params.requested_schema or {}
    properties = schema.get("properties") or {}
    content = {
        name: spec["default"]
        for name, spec in properties.items()
        if isinstance(spec, dict) and "default" in spec
    }
    return ElicitResult(action="accept", content=content)


async def sample(params: CreateMessageParams) -> CreateMessageResult:
    """A canned model answer."""
    return CreateMessageResult(
        role="assistant",
        content=TextContent(text="This is a test response from the conformance client."),
        model="conformance-model",
        stop_reason="endTurn",
    )


def sample_arguments(tool: Tool) -> dict[str, Any]:
    """Arguments for a tool we know nothing about: a plain value for each required one."""
    schema = tool.input_schema
    properties = schema.get("properties") or {}
    values = {"string": "conformance", "integer": 1, "number": 1, "boolean": True}
    arguments: dict[str, Any] = {}
    for name in schema.get("required") or []:
        kind = (properties.get(name) or {}).get("type")
        arguments[name] = values.get(kind, "conformance") if isinstance(kind, str) else None
    return arguments


async def use_everything(client: Client, context: dict[str, Any]) -> None:
    """List and use every tool, resource and prompt the server offers."""
    capabilities = client.server_capabilities
    if capabilities.tools is not None:
        for tool in await client.list_tools():
            await client.call_tool(tool.name, sample_arguments(tool))
    if capabilities.resources is not None:
        for resource in await client.list_resources():
            await client.read_resource(resource.uri)
    if capabilities.prompts is not None:
        for prompt in await client.list_prompts():
            arguments = {a.name: "conformance" for a in prompt.arguments or () if a.required}
            await client.get_prompt(prompt.name, arguments)


async def call_from_context(client: Client, context: dict[str, Any]) -> None:
    """Call the tools the scenario's context names, with its arguments."""
    await client.list_tools()
    for call in context["toolCalls"]:
        await client.call_tool(call["name"], call["arguments"])


async def list_only(client: Client, context: dict[str, Any]) -> None:
    await client.list_tools()


async def echo_schema(client: Client, context: dict[str, Any]) -> None:
    """Send the focal tool's ``inputSchema`` back unchanged."""
    tools = {tool.name: tool for tool in await client.list_tools()}
    await client.call_tool(ECHO_TOOL, {"schema": tools[FOCAL_TOOL].input_schema})


SCENARIOS = {
    "http-custom-headers": call_from_context,
    "json-schema-ref-no-deref": list_only,
    "json-schema-2020-12-preservation": echo_schema,
}
"""The scenarios that need more than :func:`use_everything`."""


def auth_for(scenario: str, context: dict[str, Any]) -> OAuth | ClientCredentials | None:
    """How to authorize in an ``auth/*`` scenario (None for the others)."""
    if not scenario.startswith("auth/"):
        return None
    if scenario.startswith("auth/client-credentials-"):
        return ClientCredentials(
            client_id=context["client_id"],
            client_secret=context.get("client_secret"),
            private_key=context.get("private_key_pem"),
            signing_algorithm=context.get("signing_algorithm", "ES256"),
        )
    return OAuth(
        client_name="millimcp-conformance-client",
        client_id=context.get("client_id"),
        client_secret=context.get("client_secret"),
        client_metadata_url=CIMD_URL,
        redirect=HeadlessRedirect(),
    )


async def run(url: str, scenario: str, version: str, context: dict[str, Any]) -> None:
    era: Literal["modern", "handshake"] = "handshake" if version in LEGACY_VERSIONS else "modern"
    async with Client.over_http(
        url,
        auth=auth_for(scenario, context),
        era=era,
        timeout=Timeout(total=60.0, connect=30.0),  # the suite runs every scenario at once
        elicitation=elicit,
        sampling=sample,
        roots=ROOTS,
        client_info=CLIENT_INFO,
    ) as client:
        await SCENARIOS.get(scenario, use_everything)(client, context)


def main() -> None:
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", LEGACY_VERSIONS[0])
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    asyncio.run(run(url, scenario, version, context))
    print(f"conformance-client: {scenario} ok")


if __name__ == "__main__":
    main()
