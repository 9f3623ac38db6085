"""The official MCP conformance suite against the millimcp client (examples/conformance_client.py).

Runs ``conformance client --requirements 2026-07-28`` and ``--requirements 2025-11-25``, once
each (the suite runs a revision's scenarios in parallel, each against its own scenario
server, at that revision's wire). Every scenario the revision requires must pass,
authorization included: no FAILURE and no WARNING in its checks, and the client ran to its
end (the negative authorization scenarios allow the client to fail; it does, before any
token request). The unscored ``auth/client-credentials-basic`` and ``-jwt`` must pass too.
The suite is the npm package ``@modelcontextprotocol/conformance@0.2.0-alpha.12`` on Node
22, found via ``MILLIMCP_CONFORMANCE`` and ``MILLIMCP_NODE``; ``make test`` installs both
into .tools/.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
CLIENT = ROOT / "examples" / "conformance_client.py"

# The required client scenarios of each revision (`conformance list --requirements REV`).
REQUIRED = {
    "2026-07-28": [
        "tools_call",
        "request-metadata",
        "sep-2322-client-request-state",
        "http-standard-headers",
        "http-custom-headers",
        "http-invalid-tool-headers",
        "json-schema-ref-no-deref",
    ],
    "2025-11-25": [
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "sse-retry",
    ],
}
_AUTH_BOTH = [
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
]
# Required too: the OAuth flow (millimcp.auth, Client.over_http(auth=...)).
AUTHORIZATION = {
    "2026-07-28": [
        *_AUTH_BOTH,
        "auth/resource-mismatch",
        "auth/offline-access-scope",
        "auth/offline-access-not-supported",
        "auth/authorization-server-migration",
        "auth/iss-supported",
        "auth/iss-not-advertised",
        "auth/iss-supported-missing",
        "auth/iss-wrong-issuer",
        "auth/iss-unexpected",
        "auth/iss-normalized",
        "auth/metadata-issuer-mismatch",
    ],
    "2025-11-25": _AUTH_BOTH,
}
# The negative authorization scenarios (the suite allows the client to fail): the client
# must stop with this error, not finish.
REFUSED = {
    "auth/resource-mismatch": "AuthorizationFailed: the protected resource metadata names",
    "auth/iss-supported-missing": "AuthorizationFailed: the authorization response lacks",
    "auth/iss-wrong-issuer": "AuthorizationFailed: the authorization response came from",
    "auth/iss-unexpected": "AuthorizationFailed: the authorization response came from",
    "auth/iss-normalized": "AuthorizationFailed: the authorization response came from",
    "auth/metadata-issuer-mismatch": "AuthorizationFailed: no usable authorization server",
    "auth/scope-retry-limit": "RequestRejected: HTTP 403",
}
# Run by the requirement set but never scored: not asserted, except the ones we pass anyway.
_EXTENSIONS = [
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
    "auth/enterprise-managed-authorization",
    "auth/dpop",
    "auth/dpop-nonce",
    "auth/wif-jwt-bearer",
]
NOT_SCORED = {
    "2026-07-28": [*_EXTENSIONS, "json-schema-2020-12-preservation"],
    "2025-11-25": [*_EXTENSIONS, "json-schema-2020-12-preservation"],
}
PASSED_ANYWAY = [
    "json-schema-2020-12-preservation",
    "auth/client-credentials-basic",
    "auth/client-credentials-jwt",
]

# The suite starts every scenario's client at once (about 40 Python processes): on a small,
# busy machine one may take far longer than the default 30 s to start and finish.
CLIENT_TIMEOUT_MS = 120_000
_TIMESTAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
_DONE = "conformance-client: {} ok"


@dataclass
class SuiteRun:
    """One ``conformance client --requirements`` run: each scenario's checks and output."""

    summary: str
    checks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    stdout: dict[str, str] = field(default_factory=dict)
    stderr: dict[str, str] = field(default_factory=dict)

    def verdict(self, scenario: str) -> list[str]:
        """What went wrong in one scenario (empty when it passed)."""
        if scenario not in self.checks:
            return [f"{scenario} did not run:\n{self.summary}"]
        bad = [
            f"{check['id']} {check['status']}: {check.get('errorMessage', '')}"
            for check in self.checks[scenario]
            if check["status"] in ("FAILURE", "WARNING")
        ]
        if not any(check["status"] == "SUCCESS" for check in self.checks[scenario]):
            bad.append("no check succeeded")
        refused = REFUSED.get(scenario)
        if refused is not None:
            if (
                refused not in self.stderr[scenario]
                or _DONE.format(scenario) in self.stdout[scenario]
            ):
                bad.append(
                    f"the client did not stop with {refused}:\n{self.stderr[scenario][-3000:]}"
                )
        elif _DONE.format(scenario) not in self.stdout[scenario]:
            bad.append(f"the client did not finish:\n{self.stderr[scenario][-3000:]}")
        return bad


def _run_suite(revision: str, output: Path, missing_tool: Any) -> SuiteRun:
    node = os.environ.get("MILLIMCP_NODE", "")
    entry = os.environ.get("MILLIMCP_CONFORMANCE", "")
    if not (node and Path(node).is_file()):
        missing_tool("MILLIMCP_NODE does not name a Node 22 binary (run `make tools`)")
    if not (entry and Path(entry).is_file()):
        missing_tool("MILLIMCP_CONFORMANCE does not name the suite's dist/index.js")
    command = shlex.join([sys.executable, str(CLIENT)])
    argv = [node, entry, "client", "--command", command, "--requirements", revision]
    proc = subprocess.run(
        [*argv, "--timeout", str(CLIENT_TIMEOUT_MS), "-o", str(output)],
        capture_output=True,
        text=True,
        timeout=280,  # under the 300 s pytest-timeout
        cwd=output.parent,
        check=False,
    )
    run = SuiteRun(summary=proc.stdout[proc.stdout.find("=== SUITE SUMMARY ===") :])
    for path in output.rglob("checks.json"):
        scenario = _TIMESTAMP.sub("", path.parent.relative_to(output).as_posix())
        run.checks[scenario] = json.loads(path.read_text())
        run.stdout[scenario] = (path.parent / "stdout.txt").read_text()
        run.stderr[scenario] = (path.parent / "stderr.txt").read_text()
    return run


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory, missing_tool: Any) -> Any:
    """``suite(revision)``: that revision's run, made once per module."""
    runs: dict[str, SuiteRun] = {}

    def get(revision: str) -> SuiteRun:
        if revision not in runs:
            output = tmp_path_factory.mktemp(f"client-{revision}") / "results"
            runs[revision] = _run_suite(revision, output, missing_tool)
        return runs[revision]

    return get


def _cases() -> list[Any]:
    cases = []
    for revision in sorted(REQUIRED):
        cases += [pytest.param(revision, s, id=f"{revision}-{s}") for s in REQUIRED[revision]]
        cases += [pytest.param(revision, s, id=f"{revision}-{s}") for s in PASSED_ANYWAY]
        cases += [pytest.param(revision, s, id=f"{revision}-{s}") for s in AUTHORIZATION[revision]]
    return cases


@pytest.mark.parametrize(("revision", "scenario"), _cases())
def test_scenario(revision: str, scenario: str, suite: Any) -> None:
    bad = suite(revision).verdict(scenario)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("revision", sorted(REQUIRED))
def test_scenario_list(revision: str, suite: Any) -> None:
    """The suite ran exactly the scenarios listed here (a new suite version shows up)."""
    ran = set(suite(revision).checks)
    listed = {*REQUIRED[revision], *AUTHORIZATION[revision], *NOT_SCORED[revision]}
    assert ran == listed, f"not listed here: {ran - listed}; not run: {listed - ran}"
