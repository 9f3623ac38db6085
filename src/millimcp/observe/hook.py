"""The one trace hook: the core reports requests and events here when someone listens.

When nobody listens, ``TRACE.active`` is False and every call site costs one ``if``::

    t0 = clock() if TRACE.active else 0

Listeners (Server-Timing, Prometheus, OpenTelemetry, your own) subclass :class:`Listener`
and are added with ``TRACE.add(listener)``. A request is reported twice: ``started`` once
the front knows the method and target (the handler has not run yet, so a listener may
set context variables such as the current span) and ``ended`` after the response headers
are sent. Events (``cache``, ``rejected``...) are small counters with labels.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable
from typing import Any, Final

from millimcp.observe.record import RequestRecord

__all__ = ["TRACE", "Listener", "TraceHook", "clock", "current_record"]

log: Final = logging.getLogger("millimcp.observe")

clock: Final = time.perf_counter_ns
"""The clock of every stage timestamp (integer nanoseconds)."""

_CURRENT: Final[contextvars.ContextVar[RequestRecord | None]] = contextvars.ContextVar(
    "millimcp_request_record", default=None
)

current_record: Final[Callable[[], RequestRecord | None]] = _CURRENT.get
"""The record of the request this task serves, when tracing is on (else None): the context
variable's own ``get``, so the hot path calls C, not a Python function."""


class Listener:
    """Base class of trace listeners: override what you need. Exceptions are logged."""

    def started(self, record: RequestRecord) -> None:
        """The handler is about to run."""

    def ended(self, record: RequestRecord) -> None:
        """The response went out (or the request was abandoned: ``record.status`` 499)."""

    def event(self, name: str, labels: tuple[str, ...], value: float) -> None:
        """A counted event: ``cache`` (tool, outcome), ``rejected`` (status), ..."""


class TraceHook:
    """The registry of listeners; ``active`` is the one flag the hot path reads."""

    __slots__ = ("_enders", "_starters", "active", "in_flight", "listeners")

    def __init__(self) -> None:
        self.active = False
        self.listeners: tuple[Listener, ...] = ()
        self.in_flight = 0
        """Requests begun and not yet ended (while tracing is on)."""
        self._starters: tuple[Callable[[RequestRecord], None], ...] = ()
        self._enders: tuple[Callable[[RequestRecord], None], ...] = ()

    def __repr__(self) -> str:
        return f"<TraceHook listeners={len(self.listeners)} in_flight={self.in_flight}>"

    def add(self, listener: Listener) -> None:
        if listener not in self.listeners:
            self._set((*self.listeners, listener))

    def remove(self, listener: Listener) -> None:
        self._set(tuple(item for item in self.listeners if item is not listener))

    def _set(self, listeners: tuple[Listener, ...]) -> None:
        # Only the methods a listener overrides are called on the request path.
        self.listeners = listeners
        self._starters = tuple(
            item.started for item in listeners if type(item).started is not Listener.started
        )
        self._enders = tuple(
            item.ended for item in reversed(listeners) if type(item).ended is not Listener.ended
        )
        self.active = bool(listeners)

    def begin(
        self, t0: int, method: str, params: Any, request_id: Any, headers: Any
    ) -> RequestRecord:
        """Open the record of a request whose first byte was handled at ``t0``."""
        record = RequestRecord(
            t0,
            method,
            params.name if method in _NAMED else None,
            request_id,
            getattr(params, "meta", None),
            headers,
            clock(),
        )
        record.token = _CURRENT.set(record)
        self.in_flight += 1
        if self._starters:
            for started in self._starters:
                try:
                    started(record)
                except Exception:
                    log.exception("trace listener %r failed", started)
        return record

    def end(self, record: RequestRecord) -> None:
        """Close a record (idempotent): tell the listeners, forget the current record."""
        token = record.token
        if token is None:
            return
        record.token = None
        self.in_flight -= 1
        if not (record.handled_at and record.encoded_at and record.sent_at):
            record.settle()  # ended early: an exception, a disconnect, a stream
        for ended in self._enders:
            try:
                ended(record)
            except Exception:
                log.exception("trace listener %r failed", ended)
        try:
            _CURRENT.reset(token)
        except ValueError:  # ended from another context: nothing to restore there
            _CURRENT.set(None)

    def event(self, name: str, labels: tuple[str, ...], value: float = 1.0) -> None:
        for listener in self.listeners:
            try:
                listener.event(name, labels, value)
            except Exception:
                log.exception("trace listener %r failed", listener)


_NAMED: Final = frozenset({"tools/call", "prompts/get"})

TRACE: Final = TraceHook()
"""The process's trace hook."""
