"""A server run as a subprocess: its environment, its start, its stderr, its end.

- **Environment.** The process gets :func:`default_environment` (a short list of safe
  variables of ours: ``PATH``, ``HOME``, ``USER``, locale...; the official SDKs pass the same
  kind of list) updated with the caller's ``env``. Nothing else leaks from this process's
  environment: pass ``env={**os.environ}`` to inherit everything.
- **Start.** Its stdin, stdout and stderr are pipes read and written by the event loop's
  pipe protocol (no task); on POSIX it runs in a session of its own, so that signals reach
  the helpers it spawns too. A process that cannot be started raises
  :class:`~millimcp.errors.NotSent`.
- **stderr** is drained continuously into a bounded tail (kept for error messages) and
  logged line by line at DEBUG on the ``millimcp.client.stdio`` logger, so a chatty server
  never stalls on a full pipe.
- **Stop.** stdin is closed, the process gets ``close_grace_s`` to exit, then SIGTERM, then
  SIGKILL (to its process group), and it is waited for until reaped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol, cast

from millimcp.errors import NotSent

__all__ = ["PipeListener", "ServerProcess", "default_environment"]

log: Final = logging.getLogger("millimcp.client.stdio")

_POSIX_INHERITED: Final = (
    "HOME",
    "LOGNAME",
    "PATH",
    "SHELL",
    "TERM",
    "USER",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TZ",
)
_WINDOWS_INHERITED: Final = (
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PATHEXT",
    "PROCESSOR_ARCHITECTURE",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "TMP",
    "USERNAME",
    "USERPROFILE",
)
_STDERR_LOG_LINE: Final = 4096


def default_environment() -> dict[str, str]:
    """The variables a server inherits from this process unless ``env`` says otherwise.

    Only a short list (``PATH``, ``HOME``, ``USER``, ``SHELL``, ``TERM``, locale and temp
    directory variables; their Windows equivalents there), and no value that looks like an
    exported shell function (``() {``), so secrets in this process's environment stay here.
    """
    names = _WINDOWS_INHERITED if sys.platform == "win32" else _POSIX_INHERITED
    found: dict[str, str] = {}
    for name in names:
        value = os.environ.get(name)
        if value is not None and not value.startswith("()"):
            found[name] = value
    return found


class PipeListener(Protocol):
    """Who hears what the process's stdout and stdin do (the stdio link)."""

    def stdout_received(self, data: bytes) -> None: ...

    def stdout_ended(self) -> None: ...

    def stdin_changed(self, *, paused: bool | None) -> None:
        """The pipe to the process filled (``paused=True``), drained (``False``), or closed
        (``None``)."""


class _Pipes(asyncio.SubprocessProtocol):
    """The event loop's callbacks for the process, passed on."""

    def __init__(self, process: ServerProcess, listener: PipeListener) -> None:
        self._process = process
        self._listener = listener

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 1:
            self._listener.stdout_received(data)
        else:
            self._process.stderr_received(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self._listener.stdout_ended()
        elif fd == 0:
            self._listener.stdin_changed(paused=None)

    def process_exited(self) -> None:
        _resolve(self._process.exited)

    def pause_writing(self) -> None:
        self._listener.stdin_changed(paused=True)

    def resume_writing(self) -> None:
        self._listener.stdin_changed(paused=False)

    def connection_lost(self, exc: Exception | None) -> None:
        _resolve(self._process.finished)


class ServerProcess:
    """One server process and its pipes."""

    def __init__(
        self,
        command: str,
        args: Sequence[str],
        *,
        env: Mapping[str, str] | None,
        cwd: str | None,
        stderr_tail_bytes: int,
        close_grace_s: float,
    ) -> None:
        self.command = command
        self.args = list(args)
        self.env = {**default_environment(), **(env or {})}
        self.cwd = cwd
        self.stderr_tail_bytes = stderr_tail_bytes
        self.close_grace_s = close_grace_s
        self.transport: asyncio.SubprocessTransport | None = None
        self.stdin: asyncio.WriteTransport | None = None
        self.exited: asyncio.Future[None] | None = None
        self.finished: asyncio.Future[None] | None = None
        self._stderr = bytearray()
        self._stderr_partial = bytearray()

    def __repr__(self) -> str:
        return f"<ServerProcess {self.command!r} pid={self.pid} returncode={self.returncode}>"

    async def start(self, listener: PipeListener) -> None:
        """Start the process; raises NotSent when it cannot be started."""
        loop = asyncio.get_running_loop()
        self.exited = loop.create_future()
        self.finished = loop.create_future()
        try:
            transport, _ = await loop.subprocess_exec(
                lambda: _Pipes(self, listener),
                self.command,
                *self.args,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                cwd=self.cwd,
                start_new_session=sys.platform != "win32",
            )
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            raise NotSent(f"could not start {self.command!r}: {exc}") from exc
        self.transport = transport
        # uvloop's pipe transports do not subclass asyncio's; they have the same methods.
        self.stdin = cast(asyncio.WriteTransport, transport.get_pipe_transport(0))

    @property
    def pid(self) -> int | None:
        return self.transport.get_pid() if self.transport is not None else None

    @property
    def returncode(self) -> int | None:
        return self.transport.get_returncode() if self.transport is not None else None

    def stderr_tail(self) -> str:
        """The last ``stderr_tail_bytes`` the process wrote to stderr (decoded leniently)."""
        return self._stderr.decode("utf-8", "replace")

    def stderr_received(self, data: bytes) -> None:
        tail = self._stderr
        tail += data
        if len(tail) > self.stderr_tail_bytes:
            del tail[: len(tail) - self.stderr_tail_bytes]
        if not log.isEnabledFor(logging.DEBUG):
            return
        partial = self._stderr_partial
        partial += data
        *lines, rest = partial.split(b"\n")
        for line in lines:
            log.debug(
                "stderr of %r: %s", self.command, line[:_STDERR_LOG_LINE].decode(errors="replace")
            )
        self._stderr_partial = rest[-_STDERR_LOG_LINE:]

    def ended_message(self, what: str) -> str:
        """``what``, with the exit status and the end of stderr when there are any."""
        parts = [f"{what} ({self.command!r}"]
        if (code := self.returncode) is not None:
            parts.append(f", exit status {code}")
        parts.append(")")
        stderr = self.stderr_tail().strip()
        if stderr:
            parts.append(f"; stderr ends with: {stderr[-1000:]}")
        return "".join(parts)

    async def stop(self) -> None:
        """Close stdin, wait ``close_grace_s`` for the exit, then SIGTERM, then SIGKILL."""
        transport = self.transport
        if transport is None:
            return
        assert self.exited is not None
        assert self.finished is not None
        if self.stdin is not None:
            self.stdin.close()  # EOF once what is buffered is written
        if not await _wait(self.exited, self.close_grace_s):
            self._signal(signal.SIGTERM)
            if not await _wait(self.exited, self.close_grace_s):
                self._signal(getattr(signal, "SIGKILL", signal.SIGTERM))
                await _wait(self.exited, 10.0)
        transport.close()
        await _wait(self.finished, self.close_grace_s)

    def _signal(self, signum: int) -> None:
        """Signal the process group (the process and what it started); else the process."""
        transport = self.transport
        if transport is None or transport.get_returncode() is not None:
            return
        pid = transport.get_pid()
        killpg = getattr(os, "killpg", None)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if killpg is not None:
                killpg(pid, signum)
                return
            transport.send_signal(signum)


def _resolve(future: asyncio.Future[None] | None) -> None:
    if future is not None and not future.done():
        future.set_result(None)


async def _wait(future: asyncio.Future[Any], seconds: float) -> bool:
    """Wait for ``future`` up to ``seconds`` without cancelling it."""
    if future.done():
        return True
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(future), seconds)
    return future.done()
