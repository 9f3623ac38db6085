"""The tuned service's logging (``quiet_logging``): INFO lines, written off the request path
in batches.

A profile of the tuned service under the agents' load put a quarter of its CPU in logging
through the standard queue handler and its listener thread (:mod:`millimcp.observe.logs`):
each record's ``Queue.put`` notifies the listener's condition variable, which wakes the
thread (a futex, a context switch, the GIL handed over and back) to write one line, and the
rotating file handler checks the file (two ``stat`` calls) before each line.

:class:`BatchedLogging` keeps the request path's part to appending the record to a deque (no
lock, no wake-up; formatting is left to the writer too) and has one thread wake every
``interval_s`` to format and write what has gathered, through a plain file handler, then
flush once. A record reaches the file at most ``interval_s`` after it was logged; when more
than ``max_queued`` are waiting, new ones are dropped and counted rather than let the deque
grow.
"""

from __future__ import annotations

import collections
import logging
import threading
from pathlib import Path

__all__ = ["BatchedLogging"]


class _Append(logging.Handler):
    """The request path's handler: the record onto the deque, nothing else."""

    def __init__(self, records: collections.deque[logging.LogRecord], max_queued: int) -> None:
        super().__init__()
        self.records = records
        self.max_queued = max_queued
        self.dropped = 0

    def handle(self, record: logging.LogRecord) -> bool:  # no lock, no filters: append only
        if len(self.records) >= self.max_queued:
            self.dropped += 1
        else:
            self.records.append(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:  # pragma: no cover - handle() does it
        self.handle(record)


class BatchedLogging:
    """``logger``'s records written to ``path`` by a thread, a batch every ``interval_s``."""

    def __init__(
        self,
        logger: logging.Logger,
        path: Path,
        formatter: logging.Formatter,
        *,
        interval_s: float = 0.2,
        max_queued: int = 100_000,
    ) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self.records: collections.deque[logging.LogRecord] = collections.deque()
        self.handler = _Append(self.records, max_queued)
        self.file = logging.FileHandler(path, encoding="utf-8", delay=False)
        self.file.setFormatter(formatter)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drain, name="orders-log", daemon=True)
        logger.addHandler(self.handler)
        self._thread.start()

    def __repr__(self) -> str:
        return f"<BatchedLogging queued={len(self.records)} dropped={self.handler.dropped}>"

    def _write(self) -> None:
        records, fmt = self.records, self.file.format
        stream = self.file.stream
        assert stream is not None  # opened at once (delay=False), until stop()
        wrote = False
        while records:
            record = records.popleft()
            try:
                stream.write(fmt(record) + "\n")
            except Exception:  # a bad record: reported as logging reports it, not fatal
                self.file.handleError(record)
            wrote = True
        if wrote:
            stream.flush()

    def _drain(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._write()
        self._write()

    def stop(self) -> None:
        """Write what is left, stop the thread, close the file."""
        self.logger.removeHandler(self.handler)
        self._stop.set()
        self._thread.join()
        self.file.close()
