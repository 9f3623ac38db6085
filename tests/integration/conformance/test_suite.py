"""The official MCP conformance suite against examples/conformance_server.py.

Runs ``conformance server --requirements 2026-07-28`` and ``--requirements 2025-11-25``
against the same endpoint (both eras): every scenario each revision requires must pass,
with no FAILURE and no WARNING in its checks, and so must the ten ``tasks-*`` scenarios of
the tasks extension that 2026-07-28 runs without scoring. The suite is
the npm package ``@modelcontextprotocol/conformance@0.2.0-alpha.12`` on Node 22, found via
``MILLIMCP_CONFORMANCE`` (its dist/index.js) and ``MILLIMCP_NODE``; ``make test`` installs
both into .tools/.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

# Scored scenarios + the ones run but not scored, per revision.
EXPECTED_SCENARIOS = {"2026-07-28": 50, "2025-11-25": 33}
# The tasks extension's scenarios (run, not scored): every one must pass too.
TASKS_SCENARIOS = frozenset(
    {
        "tasks-lifecycle",
        "tasks-capability-negotiation",
        "tasks-wire-fields",
        "tasks-request-state-removal",
        "tasks-mrtr-input",
        "tasks-request-headers",
        "tasks-dispatch-and-envelope",
        "tasks-status-notifications",
        "tasks-required-task-error",
        "tasks-mrtr-composition",
    }
)
# Not scored and not implemented: the server must close a stream mid-call and let the client
# resume it (SEP-1699 polling); here a client disconnect cancels the call instead.
ALLOWED_WARNINGS = {"server-sse-test-reconnection-tool"}
_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z?$")


def _suite(missing_tool: Any) -> tuple[str, str]:
    node = os.environ.get("MILLIMCP_NODE", "")
    entry = os.environ.get("MILLIMCP_CONFORMANCE", "")
    if not (node and Path(node).is_file()):
        missing_tool("MILLIMCP_NODE does not name a Node 22 binary (run `make tools`)")
    if not (entry and Path(entry).is_file()):
        missing_tool("MILLIMCP_CONFORMANCE does not name the suite's dist/index.js")
    return node, entry


def _checks(output: Path) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(output.glob("server-*/checks.json")):
        # server-<scenario>-<ISO time>: cut at the date (a "-20" in the time is no boundary)
        scenario = _STAMP.sub("", path.parent.name.removeprefix("server-"))
        found[scenario] = json.loads(path.read_text())
    return found


@pytest.mark.parametrize("revision", sorted(EXPECTED_SCENARIOS))
def test_requirements(
    revision: str, conformance_url: str, tmp_path: Path, missing_tool: Any
) -> None:
    node, entry = _suite(missing_tool)
    output = tmp_path / "results"
    proc = subprocess.run(
        [
            node,
            entry,
            "server",
            "--url",
            conformance_url,
            "--requirements",
            revision,
            "-o",
            str(output),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        check=False,
    )
    summary = proc.stdout[proc.stdout.find("=== SUMMARY ===") :]
    assert proc.returncode == 0, f"conformance failed:\n{summary}\n{proc.stderr[-2000:]}"
    checks = _checks(output)
    required = list(checks)
    expected = EXPECTED_SCENARIOS[revision]
    assert len(required) >= expected, f"expected {expected} scenarios, got {required}"
    if revision == "2026-07-28":
        missing = TASKS_SCENARIOS - set(required)
        assert not missing, f"the tasks scenarios did not run: {sorted(missing)}"
    bad = [
        f"{scenario}: {check['id']} {check['status']} {check.get('errorMessage', '')}"
        for scenario in required
        for check in checks[scenario]
        if check["status"] in ("FAILURE", "WARNING") and check["id"] not in ALLOWED_WARNINGS
    ]
    assert not bad, "\n".join(bad)
