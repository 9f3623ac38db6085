"""Several worker processes on one listening socket, restarted one by one without a lost call.

``millimcp serve --workers N`` (uvicorn or the native front) and ``run_native(workers=N)`` run
a :class:`Supervisor`: the parent binds and listens on the port *once* and every worker
inherits that one socket. The kernel queues connections on it and whichever worker accepts
first takes one. That is what makes a restart lossless: a draining worker that closes its
copy of the listener leaves the queue to the others (with one listener per worker,
``SO_REUSEPORT``, a closed listener resets the connections queued on it).

Signals to the supervisor:

- **SIGHUP**: a rolling restart. For each worker in turn: start a new one, wait until it says
  it is ready (listening, its lifespan started), then SIGTERM the old one, which drains
  (new requests on its open connections get 503 + ``Retry-After`` + ``Connection: close``,
  calls in flight finish) and exits; then the next. A new worker that fails to become ready
  within ``ready_timeout_s`` is stopped and the old one kept (the restart stops there).
- **SIGTERM**, **SIGINT**: SIGTERM to every worker (each drains), wait for them, exit 0 when
  every worker exited 0 or, sent while a worker was still starting, ended it (else 1).

A worker that exits on its own (a crash) after it was ready is replaced, at most one a
second; one that exits before it was ready is not (at start, the supervisor then stops).
Workers run in their own process group, so a terminal's Ctrl-C reaches the supervisor
alone (which stops them once, not twice: a second signal would cut uvicorn's drain short).
Each worker holds the read end of a pipe the supervisor keeps open (:data:`LIFELINE_ENV`):
if the supervisor dies, even by SIGKILL, the pipe ends and the worker drains and exits.

How a worker is made is the caller's: :class:`Spawn` is a function of two descriptors (the
ready pipe's write end, the lifeline's read end) that starts one process and returns its
:class:`Worker` handle. :func:`exec_worker` runs ``python -m millimcp.server.worker`` (the
worker imports the app itself, so a restart picks up new code);
:func:`millimcp.transports.native.server.run_native` forks (the app built once, no reload).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Final, Protocol, TextIO

from millimcp.errors import ConfigurationError

__all__ = [
    "LIFELINE_ENV",
    "LISTEN_FD_ENV",
    "READY_ENV",
    "SPEC_ENV",
    "ForkedWorker",
    "Spawn",
    "Supervisor",
    "Worker",
    "exec_worker",
    "listen",
    "ready_signal",
]

LISTEN_FD_ENV: Final = "MILLIMCP_LISTEN_FD"
"""The inherited listening socket's descriptor (an exec'd worker)."""
READY_ENV: Final = "MILLIMCP_READY_FD"
"""The descriptor a worker writes one byte to once it is ready."""
LIFELINE_ENV: Final = "MILLIMCP_LIFELINE_FD"
"""A pipe's read end that ends (EOF) when the supervisor is gone."""
SPEC_ENV: Final = "MILLIMCP_WORKER"
"""What an exec'd worker serves, as JSON (:mod:`millimcp.server.worker`)."""

_HANDLED: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD)
_RESPAWN_S: Final = 1.0


class Worker(Protocol):
    """A started worker process: its pid, and its exit status once it ended (else None)."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...


Spawn = Callable[[int, int], Worker]
"""Start one worker given (ready pipe's write end, lifeline's read end); both inheritable."""


class ForkedWorker:
    """A worker made by :func:`os.fork` (its status read with ``waitpid``)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = 1
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def ready_signal(fd: int) -> Callable[[], None]:
    """Once called: one byte to the supervisor on ``fd``, which is then closed."""

    def ready() -> None:
        try:
            os.write(fd, b"r")
        finally:
            os.close(fd)

    return ready


def listen(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """The listening socket every worker inherits (``SO_REUSEADDR``, no ``SO_REUSEPORT``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise ConfigurationError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def exec_worker(sock: socket.socket, spec: Mapping[str, Any]) -> Spawn:
    """A :class:`Spawn` that runs ``python -m millimcp.server.worker`` serving ``spec`` on
    ``sock`` (both descriptors and the socket passed by number in the environment)."""

    def spawn(ready: int, lifeline: int) -> Worker:
        env = {
            **os.environ,
            SPEC_ENV: json.dumps(dict(spec)),
            LISTEN_FD_ENV: str(sock.fileno()),
            READY_ENV: str(ready),
            LIFELINE_ENV: str(lifeline),
        }
        return subprocess.Popen(
            [sys.executable, "-m", "millimcp.server.worker"],
            env=env,
            pass_fds=(sock.fileno(), ready, lifeline),
            process_group=0,
        )

    return spawn


@dataclass(eq=False)
class _Slot:
    """One worker and what the supervisor knows of it."""

    worker: Worker
    ready_fd: int
    ready: bool = False
    status: int | None = None
    stopping: bool = False
    """The supervisor sent it SIGTERM (its exit is expected)."""
    started: float = field(default_factory=time.monotonic)


class Supervisor:
    """See the module docstring. :meth:`run` blocks until stopped and returns the status."""

    def __init__(
        self,
        spawn: Spawn,
        workers: int,
        *,
        grace_s: float = 30.0,
        ready_timeout_s: float = 60.0,
        banner: str | None = None,
        out: TextIO | None = None,
    ) -> None:
        if workers < 1:
            raise ConfigurationError(f"workers must be >= 1, not {workers}")
        self.spawn = spawn
        self.count = workers
        self.grace_s = grace_s
        self.ready_timeout_s = ready_timeout_s
        self.banner = banner
        self.out = out if out is not None else sys.stderr
        self.slots: list[_Slot] = []
        """The serving workers (a restart swaps one for its successor)."""
        self.stopping = False
        self.restarts = 0
        """Rolling restarts completed."""
        self._restart = False
        self._extra: list[_Slot] = []
        """Workers started or stopped by a restart that are not in :attr:`slots`."""
        self._selector = selectors.DefaultSelector()
        self._wake_r = self._wake_w = -1
        self._life_r = self._life_w = -1
        self._last_respawn = 0.0

    # -- the public side ---------------------------------------------------------------------

    def run(self) -> int:
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._life_r, self._life_w = os.pipe()
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        previous = {sig: signal.signal(sig, self._on_signal) for sig in _HANDLED}
        old_wakeup = signal.set_wakeup_fd(self._wake_w)
        try:
            return self._run()
        finally:
            signal.set_wakeup_fd(old_wakeup)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._selector.close()
            for fd in (self._wake_r, self._wake_w, self._life_r, self._life_w):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def close_in_child(self) -> None:
        """What a forked worker calls first: drop the supervisor's signal handling and pipes
        (the lifeline's read end stays: the worker watches it)."""
        signal.set_wakeup_fd(-1)
        for sig in _HANDLED:
            signal.signal(sig, signal.SIG_DFL)
        for fd in (self._wake_r, self._wake_w, self._life_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        for slot in (*self.slots, *self._extra):
            with contextlib.suppress(OSError):
                os.close(slot.ready_fd)

    # -- inside ----------------------------------------------------------------------------

    def _run(self) -> int:
        # The first worker alone, then the others: a mistake in the target (a missing
        # attribute, a bad flag) is then said once, by one worker, not once per worker.
        first = self._start()
        self.slots = [first]
        self._wait(lambda: first.ready or first.status is not None, self.ready_timeout_s)
        if first.ready and not self.stopping:
            self.slots += [self._start() for _ in range(self.count - 1)]
            self._wait(
                lambda: all(slot.ready or slot.status is not None for slot in self.slots),
                self.ready_timeout_s,
            )
        if self.stopping and not all(slot.ready for slot in self.slots):
            self._say("stopped while the workers were starting")
        elif not all(slot.ready for slot in self.slots):
            failed = [slot.status for slot in self.slots if slot.status]
            if 2 not in failed:  # 2: the worker said its usage error in one line
                self._say("a worker did not start (its error is above); stopping")
            self._stop_all()
            return 2 if 2 in failed else 1
        if self.banner is not None and not self.stopping:
            print(self.banner, file=self.out, flush=True)
        while not self.stopping:
            if self._restart:
                self._restart = False
                self._roll()
                continue
            self._wait(lambda: self._restart, None)
        return self._stop_all()

    def _start(self) -> _Slot:
        ready_r, ready_w = os.pipe()
        os.set_inheritable(ready_w, True)
        os.set_inheritable(self._life_r, True)
        try:
            worker = self.spawn(ready_w, self._life_r)
        finally:
            os.close(ready_w)
            os.set_inheritable(self._life_r, False)
        os.set_blocking(ready_r, False)
        slot = _Slot(worker, ready_r)
        self._selector.register(ready_r, selectors.EVENT_READ, slot)
        return slot

    def _roll(self) -> None:
        """Replace each worker in turn (see the module docstring)."""
        for old in tuple(self.slots):
            if self.stopping or old not in self.slots or not self._replace(old):
                return
        self.restarts += 1
        self._say(f"restart done: {len(self.slots)} workers")

    def _replace(self, old: _Slot) -> bool:
        """Start ``old``'s successor, wait until it is ready, then stop ``old``; False (and
        ``old`` kept) when the successor did not start."""
        new = self._start()
        self._extra.append(new)
        self._wait(lambda: new.ready or new.status is not None, self.ready_timeout_s)
        if not new.ready:
            self._say(f"restart stopped: the new worker (pid {new.worker.pid}) did not start")
            self._terminate(new)
            self._wait(lambda: new.status is not None, self.grace_s + 5)
            self._extra.remove(new)
            return False
        self._extra.remove(new)
        self.slots[self.slots.index(old)] = new
        self._extra.append(old)
        self._terminate(old)
        self._wait(lambda: old.status is not None, self.grace_s + 5)
        self._extra.remove(old)
        if old.status is None:
            self._kill(old)
        self._say(f"worker pid {old.worker.pid} replaced by pid {new.worker.pid}")
        return True

    def _stop_all(self) -> int:
        self.stopping = True
        slots = [*self.slots, *self._extra]
        for slot in slots:
            self._terminate(slot)
        self._wait(lambda: all(slot.status is not None for slot in slots), self.grace_s + 5)
        for slot in slots:
            if slot.status is None:
                self._kill(slot)
        return 0 if all(map(_stopped_cleanly, slots)) else 1

    def _terminate(self, slot: _Slot) -> None:
        slot.stopping = True
        if slot.status is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(slot.worker.pid, signal.SIGTERM)

    def _kill(self, slot: _Slot) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(slot.worker.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while slot.worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        slot.status = slot.worker.poll()
        if slot.status is None:
            slot.status = -9

    def _wait(self, done: Callable[[], bool], timeout_s: float | None) -> None:
        """Serve signals, ready pipes and exits until ``done()``, a stop, or the timeout."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            self._reap()
            if done() or (self.stopping and not self._draining_all()):
                return
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            for key, _ in self._selector.select(1.0 if left is None else min(left, 1.0)):
                if key.fd == self._wake_r:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self._wake_r, 512)
                else:
                    self._read_ready(key.data)

    def _draining_all(self) -> bool:
        """In :meth:`_stop_all` the waits go on while stopping (each worker drains)."""
        return any(slot.stopping and slot.status is None for slot in (*self.slots, *self._extra))

    def _read_ready(self, slot: _Slot) -> None:
        try:
            data = os.read(slot.ready_fd, 16)
        except BlockingIOError:
            return
        except OSError as exc:
            if exc.errno != errno.EBADF:
                raise
            data = b""
        if data:
            slot.ready = True
        else:  # the worker closed it (it exited, or is exiting)
            self._forget(slot)

    def _forget(self, slot: _Slot) -> None:
        if slot.ready_fd >= 0:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(slot.ready_fd)
            os.close(slot.ready_fd)
            slot.ready_fd = -1

    def _reap(self) -> None:
        for slot in (*self.slots, *self._extra):
            if slot.status is not None:
                continue
            status = slot.worker.poll()
            if status is None:
                continue
            slot.status = status
            self._forget(slot)
            if slot.stopping or slot not in self.slots or self.stopping:
                continue
            if slot.ready:
                self._replace_crashed(slot)
            elif slot.status != 2:  # it never served: another would fail the same way
                self._say(
                    f"worker pid {slot.worker.pid} exited with status {slot.status} "
                    "before it was ready; not replaced"
                )

    def _replace_crashed(self, slot: _Slot) -> None:
        self._say(f"worker pid {slot.worker.pid} exited with status {slot.status}; replacing it")
        pause = self._last_respawn + _RESPAWN_S - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        self._last_respawn = time.monotonic()
        self.slots[self.slots.index(slot)] = self._start()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGHUP:
            self._restart = True
        elif signum in (signal.SIGTERM, signal.SIGINT):
            self.stopping = True

    def _say(self, line: str) -> None:
        print(f"millimcp: {line}", file=self.out, flush=True)


def _stopped_cleanly(slot: _Slot) -> bool:
    """Whether a worker stopped as asked: it drained and exited 0, or SIGTERM ended it while it
    was still starting (before its handler was set: an expected end, not a failure)."""
    return slot.status == 0 or (not slot.ready and slot.status == -signal.SIGTERM)
