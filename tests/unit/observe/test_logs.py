"""Queue logging: records are formatted in the listener thread, never in the caller."""

from __future__ import annotations

import logging
import threading

from millimcp.observe.logs import install_queue_logging


class Body:
    """A request body whose formatting we watch."""

    def __init__(self) -> None:
        self.formatted_in: list[str] = []

    def __str__(self) -> str:
        self.formatted_in.append(threading.current_thread().name)
        return "<body>"


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.threads: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))
        self.threads.append(threading.current_thread().name)


def test_records_are_formatted_in_the_listener_thread() -> None:
    logger = logging.getLogger("millimcp.test.queue")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    sink = Collect()
    logger.addHandler(sink)
    queued = install_queue_logging(logger)
    body = Body()
    try:
        assert sink not in logger.handlers  # moved behind the queue
        logger.info("request %s", body)
        logger.debug("dropped by level %s", body)
    finally:
        queued.stop()
    caller = threading.current_thread().name
    assert sink.lines == ["request <body>"]
    assert body.formatted_in == sink.threads
    assert caller not in body.formatted_in
    assert sink in logger.handlers  # given back on stop
    logger.removeHandler(sink)


def test_a_full_queue_drops_instead_of_blocking() -> None:
    logger = logging.getLogger("millimcp.test.full")
    logger.propagate = False
    sink = Collect()
    queued = install_queue_logging(logger, [sink], max_queued=1)
    queued.listener.stop()  # nobody drains the queue now
    try:
        logger.warning("one")
        logger.warning("two")
        logger.warning("three")
        assert queued.dropped == 2
    finally:
        logger.removeHandler(queued.handler)
