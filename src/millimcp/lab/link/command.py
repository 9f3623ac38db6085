"""``millimcp link --listen 127.0.0.1:P --to 127.0.0.1:Q --rtt 40ms --bandwidth 10mbit``:
a link emulator between a client and a server on this machine.

Every connection to the listening address is carried to ``--to`` across an emulated path:
each direction delayed by half the RTT (order kept), shaped by a token bucket, with losses
(as the retransmissions TCP would make of them) and jitter if asked. Half-closes and resets
are passed on. On SIGINT or SIGTERM (and every ``--report-every`` seconds) it prints what it
carried and the CPU it spent doing so.

The kernel's netem (a network namespace and ``tc``) is faster where the kernel has it and
the user is root; ``--path kernel`` prints its commands, ``auto`` (the default) says why it
is not used and runs the userspace proxy.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import signal
import sys

from millimcp.errors import ConfigurationError
from millimcp.lab.link.kernel import kernel_commands, netem_status
from millimcp.lab.link.proxy import Link
from millimcp.lab.link.spec import LinkConfig, parse_bandwidth, parse_duration, parse_loss

__all__ = ["add_arguments", "parse_address", "run"]


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigurationError(f"not HOST:PORT: {text!r}")
    return host or "127.0.0.1", int(port)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", required=True, help="HOST:PORT to accept on (port 0: any)")
    parser.add_argument("--to", required=True, help="HOST:PORT of the server")
    parser.add_argument("--rtt", default="40ms", help="round-trip time (default 40ms)")
    parser.add_argument("--bandwidth", default="10mbit", help="each way (default 10mbit; 0: none)")
    parser.add_argument("--loss", default="0", help="share of segments lost, e.g. 0.1%%")
    parser.add_argument("--jitter", default="0ms", help="added to each delay, either way")
    parser.add_argument("--seed", type=int, default=None, help="for the loss and jitter draws")
    parser.add_argument(
        "--path",
        choices=("auto", "userspace", "kernel"),
        default="auto",
        help="kernel: print the netem commands (needs root and netem); default auto",
    )
    parser.add_argument(
        "--report-every", type=float, default=0.0, help="print the counters every N seconds"
    )


def config_from(args: argparse.Namespace) -> LinkConfig:
    return LinkConfig(
        rtt_s=parse_duration(args.rtt),
        bandwidth_bps=parse_bandwidth(args.bandwidth),
        loss=parse_loss(args.loss),
        jitter_s=parse_duration(args.jitter),
        seed=args.seed,
    )


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from(args)
        listen, target = parse_address(args.listen), parse_address(args.to)
    except ConfigurationError as exc:
        print(f"millimcp link: {exc}", file=sys.stderr)
        return 2
    usable, why = netem_status()
    if args.path == "kernel":
        if not usable:
            print(f"millimcp link: no kernel path here: {why}", file=sys.stderr)
            return 2
        print("# the kernel path (run as root; then run the server in the namespace):")
        for command in kernel_commands(config):
            print(shlex.join(command))
        return 0
    note = "" if args.path == "userspace" else f" (kernel path not used: {why})"
    return asyncio.run(_serve(config, listen, target, args.report_every, note))


async def _serve(
    config: LinkConfig,
    listen: tuple[str, int],
    target: tuple[str, int],
    every: float,
    note: str,
    stop: asyncio.Event | None = None,
) -> int:
    """Carry connections until SIGINT or SIGTERM (or ``stop`` is set), printing the counters
    every ``every`` seconds (0: only at the end)."""
    link = Link(config, target, listen)
    await link.start()
    loop = asyncio.get_running_loop()
    if stop is None:
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
    print(
        f"link: userspace path{note}: 127.0.0.1:{link.port} -> {target[0]}:{target[1]}, "
        f"{config.describe()}",
        flush=True,
    )
    try:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=every or None)
            if every and not stop.is_set():
                print(f"link: {link.stats().describe()}", flush=True)
    finally:
        stats = link.stats()
        await link.close()
        print(f"link: stopped: {stats.describe()}", flush=True)
    return 0
