"""The lab's link emulator: a WAN between two processes of this machine.

:func:`open_link` (or ``millimcp link``, :mod:`millimcp.lab.link.command`) puts an emulated
path (:class:`LinkConfig`: RTT, bandwidth, loss, jitter) in front of a TCP server on
127.0.0.1. The modules, one concept each: :mod:`~millimcp.lab.link.spec` (the config and its
parsers), :mod:`~millimcp.lab.link.schedule` (when each chunk arrives: token bucket, delay,
jitter, loss; pure), :mod:`~millimcp.lab.link.pipe` (one direction of one connection),
:mod:`~millimcp.lab.link.proxy` (the proxy and its counters) and
:mod:`~millimcp.lab.link.kernel` (the netem alternative).
"""

from __future__ import annotations

from millimcp.lab.link.kernel import kernel_commands, netem_status
from millimcp.lab.link.proxy import Link, LinkStats, open_link
from millimcp.lab.link.schedule import Schedule, TokenBucket
from millimcp.lab.link.spec import LinkConfig, parse_bandwidth, parse_duration, parse_loss

__all__ = [
    "Link",
    "LinkConfig",
    "LinkStats",
    "Schedule",
    "TokenBucket",
    "kernel_commands",
    "netem_status",
    "open_link",
    "parse_bandwidth",
    "parse_duration",
    "parse_loss",
]
