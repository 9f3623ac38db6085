"""The kernel's way to emulate a link: ``tc qdisc ... netem`` on a veth pair into a network
namespace. Faster than the userspace proxy (no copy through Python) but it needs root and the
``sch_netem`` module; :func:`netem_status` says whether this machine has both, and
:func:`kernel_commands` the commands that set such a path up (the server then runs inside the
namespace: ``ip netns exec NAME ...``)."""

from __future__ import annotations

import os
import platform
import shutil
from pathlib import Path

from millimcp.lab.link.spec import LinkConfig

__all__ = ["kernel_commands", "netem_status"]


def netem_status() -> tuple[bool, str]:
    """(usable, why): root, ``ip`` and ``tc`` on the PATH, and the netem qdisc in the kernel
    (loaded, or a module file for this kernel)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False, "not root"
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        return False, f"no {' or '.join(missing)} on the PATH"
    if Path("/sys/module/sch_netem").exists():
        return True, "netem loaded"
    modules = Path("/lib/modules") / platform.release()
    if modules.is_dir() and any(modules.rglob("sch_netem.ko*")):
        return True, "netem module present"
    return False, "the kernel has no netem qdisc (sch_netem)"


def kernel_commands(config: LinkConfig, name: str = "millimcp-link") -> list[list[str]]:
    """The commands (to run as root) for a namespace ``name`` at 10.77.0.2 behind a veth
    pair from the host's 10.77.0.1, each end delayed by half the RTT and shaped."""
    netem = ["netem", "delay", f"{config.one_way_s * 1000:g}ms"]
    if config.jitter_s:
        netem.append(f"{config.jitter_s * 1000:g}ms")
    if config.loss:
        netem += ["loss", f"{config.loss * 100:g}%"]
    if config.bandwidth_bps:
        netem += ["rate", f"{config.bandwidth_bps / 1000:g}kbit"]
    host, inside = f"{name[:10]}-h", f"{name[:10]}-n"
    run = ["ip", "netns", "exec", name]
    return [
        ["ip", "netns", "add", name],
        ["ip", "link", "add", host, "type", "veth", "peer", "name", inside, "netns", name],
        ["ip", "addr", "add", "10.77.0.1/30", "dev", host],
        ["ip", "link", "set", host, "up"],
        [*run, "ip", "addr", "add", "10.77.0.2/30", "dev", inside],
        [*run, "ip", "link", "set", inside, "up"],
        [*run, "ip", "link", "set", "lo", "up"],
        ["tc", "qdisc", "add", "dev", host, "root", *netem],
        [*run, "tc", "qdisc", "add", "dev", inside, "root", *netem],
    ]
