"""The load generator: closed and open loops of one tool call, cheap enough to measure servers.

Two ways to make a call:

- **lean** (HTTP, :mod:`~millimcp.lab.loadgen.lean`): the request the millimcp Client sent
  once is resent as pre-serialized bytes with only the JSON-RPC id spliced in, over raw
  keep-alive HTTP/1.1 connections framed by the lab's reader (:mod:`millimcp.lab.http1`).
- **full** (:mod:`~millimcp.lab.loadgen.full`): :meth:`millimcp.Client.call_tool` (stdio
  targets; ``--client full`` on HTTP), to measure with a realistic client's cost.

Two loops (:mod:`~millimcp.lab.loadgen.loop`): **closed** (each slot sends its next call when
the previous one is answered; a stall hides in the percentiles: coordinated omission) and
**open** (calls due on a fixed schedule, latency from the time each was due).

Errors are counted by kind: ``http_<status>``, ``jsonrpc_<code>``, ``tool_error``
(``isError: true``), ``timeout``, ``connection``, ``protocol`` (a reply that is not a
JSON-RPC response); see :func:`millimcp.lab.results.error_kind`.

``python -m millimcp.lab.loadgen`` runs one process of a multi-process run
(:mod:`~millimcp.lab.loadgen.child`).
"""

from millimcp.errors import ResponseFramingError
from millimcp.lab.loadgen.child import ChildSpec
from millimcp.lab.loadgen.full import call_kind, prepare_full, run_full
from millimcp.lab.loadgen.lean import classify, parse_response, prepare_lean, run_lean
from millimcp.lab.loadgen.loop import Plan, Ready, run_event_loop

__all__ = [
    "ChildSpec",
    "Plan",
    "Ready",
    "ResponseFramingError",
    "call_kind",
    "classify",
    "parse_response",
    "prepare_full",
    "prepare_lean",
    "run_event_loop",
    "run_full",
    "run_lean",
]
