"""Logging off the critical path: a queue handler and a listener thread (S5.5).

:func:`install_queue_logging` moves a logger's handlers behind a ``QueueListener`` thread.
The request path only appends the record to a bounded queue: the message is *not*
formatted there (the standard ``QueueHandler`` formats it in the caller), so arguments such
as a request body cost nothing unless a handler really writes them, and then in the
listener thread. When the queue is full, records are dropped and counted rather than
blocking the event loop. The arguments are formatted later, so pass values that are not
mutated afterwards (the usual case: ids, names, sizes).
"""

from __future__ import annotations

import logging
import logging.handlers
import queue
import sys
from collections.abc import Sequence

__all__ = ["DeferredQueueHandler", "QueueLogging", "install_queue_logging"]


class DeferredQueueHandler(logging.handlers.QueueHandler):
    """A ``QueueHandler`` that neither formats nor blocks: formatting happens in the thread."""

    def __init__(self, target: queue.Queue[logging.LogRecord]) -> None:
        super().__init__(target)
        self.dropped = 0

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record  # same process: no pickling, so no need to format here

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1


class QueueLogging:
    """The installed queue: its handler on the logger and the listener thread."""

    def __init__(
        self, logger: logging.Logger, handlers: Sequence[logging.Handler], max_queued: int
    ) -> None:
        self.logger = logger
        self.handlers = tuple(handlers)
        self._detached = tuple(h for h in self.handlers if h in logger.handlers)
        self.queue: queue.Queue[logging.LogRecord] = queue.Queue(max_queued)
        self.handler = DeferredQueueHandler(self.queue)
        self.listener = logging.handlers.QueueListener(
            self.queue, *self.handlers, respect_handler_level=True
        )

    def __repr__(self) -> str:
        return (
            f"<QueueLogging {self.logger.name} queued={self.queue.qsize()} "
            f"dropped={self.handler.dropped}>"
        )

    @property
    def dropped(self) -> int:
        return self.handler.dropped

    def start(self) -> None:
        for handler in self._detached:
            self.logger.removeHandler(handler)
        self.logger.addHandler(self.handler)
        self.listener.start()

    def stop(self) -> None:
        """Write what is queued, stop the thread and give the handlers back to the logger."""
        self.logger.removeHandler(self.handler)
        self.listener.stop()
        for handler in self._detached:
            self.logger.addHandler(handler)


def install_queue_logging(
    logger: str | logging.Logger = "",
    handlers: Sequence[logging.Handler] | None = None,
    *,
    max_queued: int = 10_000,
) -> QueueLogging:
    """Put ``logger``'s handlers (or ``handlers``; default: stderr) behind a queue thread.

    Returns the running :class:`QueueLogging`; call ``stop()`` at shutdown to flush it.
    """
    target = logging.getLogger(logger) if isinstance(logger, str) else logger
    if handlers is None:
        handlers = list(target.handlers) or [logging.StreamHandler(sys.stderr)]
    installed = QueueLogging(target, handlers, max_queued)
    installed.start()
    return installed
