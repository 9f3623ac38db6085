"""The service's configuration: one switch per S6.3 step, and the two presets.

``NAIVE`` is the service as the article first built it (S6.1), ``TUNED`` the one after its five
steps (S6.3). Every step is its own flag, so each can be A/B tested alone (S6.5)::

    config = with_settings(NAIVE, ["covering_index=true"])   # naive, plus the index only

Server-side flags change what ``orders.server`` does; ``pooled_client`` and ``client_cap`` are
read by whoever drives the service (the demo's agent client) and ignored by the server.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CLIENT_FLAGS",
    "FLAGS",
    "NAIVE",
    "PRESETS",
    "TUNED",
    "OrdersConfig",
    "data_dir",
    "default_db_url",
    "parse_setting",
    "with_settings",
]

DEFAULT_ORDERS = 200_000
"""Orders seeded into the embedded database on first run: 2,000 customers of 100 orders each;
seeded in 24-33 s on a loaded 2-core VM, so that ``make demo`` from a fresh clone stays within
its 4 minutes (1,000,000, a minute or more to seed, with ``--orders 1000000``). Without the
covering index each order lookup scans them all (naive's order query)."""


def data_dir() -> Path:
    """Where the embedded database and the logs live: ``$ORDERS_DATA_DIR``, else ``.demo/``
    at the repository root (git-ignored)."""
    given = os.environ.get("ORDERS_DATA_DIR")
    if given:
        return Path(given)
    return Path(__file__).resolve().parents[2] / ".demo"


def default_db_url() -> str:
    return f"sqlite:///{data_dir() / 'orders.db'}"


@dataclass(frozen=True, slots=True)
class OrdersConfig:
    """One configuration of the order-analysis service (flags: the S6.3 steps)."""

    # -- the steps of S6.3, each on or off -------------------------------------------------
    pooled_client: bool = False
    """Client side: a kept-alive connection pool (else a new connection per call)."""
    fast_codec: bool = False
    """msgspec encodes the response payload (else the standard library's ``json``)."""
    async_db: bool = False
    """Async SQLAlchemy (aiosqlite, psycopg async, aiomysql) selecting only the needed
    columns; else the sync ORM on the thread pool, loading whole entities."""
    covering_index: bool = False
    """The covering index ``orders(customer_id, created_at, status, total_cents, item_count)``
    exists (else the customer/date queries scan the table)."""
    async_recs: bool = False
    """The recommendation service is called with a pooled aiohttp session; else a blocking
    ``urllib`` call (a new connection each time) that holds a thread for its whole wait."""
    recs_cache: bool = False
    """Recommendations are cached for ``recs_ttl_s`` (millimcp's cache store, tagged
    ``customer:{id}``; ``create_order`` invalidates the tag)."""
    trimmed: bool = False
    """The response carries what the agent needs (~12 KB); else debug fields and long
    explanations as well (~60 KB)."""
    compression: bool = False
    """Responses of 1 KiB or more are compressed (zstd or gzip, as the client accepts)."""
    quiet_logging: bool = False
    """INFO, one line per call, written in batches by a thread (``orders.quietlog``); else
    DEBUG with the full request and response bodies, written synchronously to the log
    file."""
    client_cap: bool = False
    """Client side: at most 30 calls in flight (``Semaphore(30)``, S6.3); else unbounded."""

    # -- where things are ----------------------------------------------------------------
    db_url: str | None = None
    """SQLAlchemy URL (sync or async driver names both work); None: the embedded SQLite
    database in :func:`data_dir`."""
    recommender_url: str = "http://127.0.0.1:8790"
    """Base URL of the recommendation service (``orders.recommender``)."""
    recommender_latency_ms: float = 400.0
    """The recommendation service's latency (S6.2: 400 ms): what whoever starts
    ``orders.recommender`` passes as ``--latency-ms``; the server itself does not read it."""
    recs_ttl_s: float = 300.0
    """Time to live of a cached recommendation (S6.3: 300 s)."""
    orders: int = DEFAULT_ORDERS
    """Orders seeded on first run (reused afterwards while the count and seed match)."""
    seed: int = 42
    log_file: str | None = None
    """The service's log file; None: ``<data dir>/logs/orders-<pid>.log``."""
    auth_secret: str = "orders-demo-secret"
    """HMAC key of the bearer tokens (``orders.auth``). A demo value: set
    ``ORDERS_AUTH_SECRET`` or ``--auth-secret`` anywhere else."""
    sync_workers: int = 40
    """Threads for the sync handlers: anyio's default, the pool FastAPI's ``def``
    endpoints run on (the article's server)."""

    @property
    def name(self) -> str:
        """``naive``, ``tuned``, or the flags that differ from naive (``naive+trimmed``)."""
        on = [flag for flag in FLAGS if getattr(self, flag)]
        if not on:
            return "naive"
        if len(on) == len(FLAGS):
            return "tuned"
        return "naive+" + "+".join(on)

    def flags(self) -> dict[str, bool]:
        return {flag: bool(getattr(self, flag)) for flag in FLAGS}

    def resolved_db_url(self) -> str:
        return self.db_url or default_db_url()


FLAGS: tuple[str, ...] = (
    "pooled_client",
    "fast_codec",
    "async_db",
    "covering_index",
    "async_recs",
    "recs_cache",
    "trimmed",
    "compression",
    "quiet_logging",
    "client_cap",
)
"""The S6.3 steps, one switch each."""
CLIENT_FLAGS: tuple[str, ...] = ("pooled_client", "client_cap")
"""Steps the agents' client takes (the server ignores them)."""

NAIVE = OrdersConfig()
_EVERY_STEP: dict[str, Any] = dict.fromkeys(FLAGS, True)  # the keywords of the flags
TUNED = OrdersConfig(**_EVERY_STEP)
PRESETS: dict[str, OrdersConfig] = {"naive": NAIVE, "tuned": TUNED}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_setting(text: str) -> tuple[str, object]:
    """``"flag=value"`` -> ``(name, typed value)``; raises ValueError naming what is wrong."""
    name, sep, raw = text.partition("=")
    name = name.strip().replace("-", "_")
    if not sep:
        raise ValueError(f"expected name=value, got {text!r}")
    fields = {f.name: f for f in dataclasses.fields(OrdersConfig)}
    if name not in fields:
        raise ValueError(f"unknown setting {name!r}; known: {', '.join(fields)}")
    raw = raw.strip()
    default = getattr(NAIVE, name)
    if isinstance(default, bool):
        if raw.lower() in _TRUE:
            return name, True
        if raw.lower() in _FALSE:
            return name, False
        raise ValueError(f"{name} takes true or false, not {raw!r}")
    if isinstance(default, int):
        return name, int(raw.replace("_", ""))
    if isinstance(default, float):
        return name, float(raw)
    return name, (None if raw.lower() in ("", "none") else raw)


def with_settings(config: OrdersConfig, settings: Iterable[str]) -> OrdersConfig:
    """``config`` with each ``"name=value"`` of ``settings`` applied, in order."""
    changes = dict(parse_setting(text) for text in settings)
    return dataclasses.replace(config, **changes)  # type: ignore[arg-type]
