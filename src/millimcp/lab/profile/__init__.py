"""``millimcp profile TARGET --tool NAME --args JSON``: where the time of one call goes.

The client side of each ``tools/call`` is measured on an instrumented connection
(:mod:`millimcp.lab.timed_http`, :mod:`millimcp.lab.timed_stdio`); the server's side comes
from its ``Server-Timing`` header when it sends one (a millimcp server with
``ServerConfig(server_timing=True)`` does: decode, validate, cache, handler, encode,
compress, total). The stages of one HTTP call tile it, end to end:

=================  ===============================================================
dns, connect, tls  a new connection only (the cold calls): ``getaddrinfo``, the TCP
                   connect, the TLS handshake (https)
initialize         a new connection to a handshake-era server: ``initialize`` and
                   ``notifications/initialized`` (a new session)
request encode     the JSON-RPC body and the HTTP head
upload             writing them to the socket (the CPU time of the write when the kernel
                   took it at once: on a loopback the write may wake the server and
                   lose the CPU to it; that wait belongs to the stages after)
server <stage>     the server's own stages (``Server-Timing``)
network/wait       the time to the first response byte minus the server's total:
                   the network both ways, the HTTP server, the event loops
server             without ``Server-Timing``: the whole time to the first byte
download           first byte to last byte of the response (an SSE reply: of the
                   event that answers the request)
client wake-up     from the last byte (seen by the event loop) to the caller running
                   again
response decode    decompression, JSON-RPC and result decoding, as the Client does
=================  ===============================================================

Transport + serialization (S7.1: above 30% the call has room left) is the share of every
stage above but the server's ``validate``, ``cache`` and ``handler`` (and ``server``,
which cannot be split without ``Server-Timing``: the share is then a lower bound).

Over stdio: ``request encode``, ``write`` (to the server's stdin), ``server+pipe`` (until
the first byte of the response line), ``read`` (first to last byte of the line),
``client wake-up``, ``response decode``; a cold call is the first on a new process (``spawn``, and
``initialize`` in the handshake era).

The era is found with :class:`~millimcp.Client` (``server/discover``, else
``initialize``); the calls then carry what that era needs (``_meta`` and the
``MCP-Protocol-Version``/``Mcp-Method``/``Mcp-Name``/``Mcp-Param-*`` headers, or a
session). Warm calls run one at a time on one kept-alive connection (after ``--warmup``
calls that are not counted); each cold call opens a new connection (S2.1).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from millimcp.errors import ConfigurationError, MillimcpError, MissingExtra
from millimcp.lab.loadgen.loop import run_event_loop
from millimcp.lab.profile.call import Profile, ProfileError
from millimcp.lab.profile.output import heading, notes, render, to_run
from millimcp.lab.profile.over_http import profile_http
from millimcp.lab.profile.over_stdio import profile_stdio
from millimcp.lab.target import add_call_arguments, ssl_context, target_from_args

__all__ = [
    "Profile",
    "ProfileError",
    "add_arguments",
    "heading",
    "notes",
    "profile_http",
    "profile_stdio",
    "render",
    "run",
    "to_run",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_call_arguments(parser)
    parser.add_argument(
        "-n",
        "--requests",
        type=int,
        default=200,
        metavar="N",
        help="warm calls measured (default: %(default)s)",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=20,
        metavar="N",
        help="warm calls sent first, not measured (default: %(default)s)",
    )
    parser.add_argument(
        "--cold",
        type=int,
        default=3,
        metavar="N",
        help="calls on a new connection (stdio: process) each (default: %(default)s)",
    )
    parser.add_argument(
        "--export-json", metavar="PATH", help="write the run (a Run file of kind 'profile')"
    )


def run(args: argparse.Namespace) -> int:
    try:
        target = target_from_args(args)
        arguments = json.loads(args.args)
    except ConfigurationError as exc:
        print(f"millimcp profile: {exc}", file=sys.stderr)
        return 2
    except json.JSONDecodeError as exc:
        print(f"millimcp profile: --args is not JSON: {exc}", file=sys.stderr)
        return 2
    if not isinstance(arguments, dict):
        print("millimcp profile: --args must be a JSON object", file=sys.stderr)
        return 2
    if args.requests < 1 or args.warmup < 0 or args.cold < 0:
        print("millimcp profile: -n must be >= 1, --warmup and --cold >= 0", file=sys.stderr)
        return 2
    options: dict[str, Any] = {
        "requests": args.requests,
        "warmup": args.warmup,
        "cold": args.cold,
        "era": args.era,
        "call_timeout": args.timeout,
    }
    try:
        if target.kind == "http":
            assert target.url is not None
            coroutine = profile_http(
                target.url,
                args.tool,
                arguments,
                headers=target.headers,
                ssl=ssl_context(target),
                **options,
            )
        else:
            coroutine = profile_stdio(target.command, args.tool, arguments, **options)
        profile = run_event_loop(coroutine)
    except MissingExtra:
        raise  # the command line says which extra to install
    except ProfileError as exc:
        print(f"millimcp profile: {exc}", file=sys.stderr)
        return 2 if exc.usage else 1
    except (MillimcpError, OSError, TimeoutError) as exc:
        print(f"millimcp profile: the call failed: {exc!r}", file=sys.stderr)
        return 1
    print(heading(profile))
    render(profile).print()
    for line in notes(profile):
        print(line)
    if args.export_json:
        from millimcp.lab.results import save_run

        save_run(to_run(profile), args.export_json)
        print(f"wrote {args.export_json}")
    if len(profile.failed) == len(profile.warm):
        print(
            "millimcp profile: every measured call failed (isError): this profiled the "
            "tool's error path; check --args",
            file=sys.stderr,
        )
        return 1
    return 0
