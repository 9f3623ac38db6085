"""The order-analysis MCP service of the case study (SEEDS S6), naive or tuned, flag by flag.

Run it from ``examples/`` (or with ``examples`` on ``PYTHONPATH``)::

    python -m orders.recommender --port 8790 &                  # the external service (400 ms)
    python -m orders.server --preset naive --port 8780 \\
        [--set trimmed=true --set compression=true ...]         # any S6.3 step on or off
        [--db sqlite:///path.db | postgresql://... | mysql://...]
        [--recommender http://127.0.0.1:8790] [--orders 200000] [--log-file PATH]

It seeds the database first if needed (``orders.db``), then serves Streamable HTTP at
``http://127.0.0.1:PORT/mcp`` and prints one line saying so on stderr. Every call needs
``Authorization: Bearer <token>`` (``orders.auth.mint(secret, "agent")``; the secret is
``--auth-secret``, else ``$ORDERS_AUTH_SECRET``, else the demo's).

Tools: ``get_order``, ``list_orders``, ``analyze_orders`` (analysis plus suggestions),
``get_recommendations``, ``get_profile`` and ``create_order`` (a write: it invalidates the
customer's cached recommendations). Each returns its answer as JSON text.

What each flag of ``orders.config.OrdersConfig`` changes here:

- ``async_db`` / ``covering_index``: ``orders.queries`` (sync ORM on threads vs async Core;
  on SQLite, ``orders.sqlite_queries``: sqlite3 on two threads instead of aiosqlite's
  thread per connection; the index lives in its own SQLite file, see ``orders.db``);
- ``async_recs`` / ``recs_cache``: ``orders.recs`` (a blocking ``urllib`` call, new connection
  each time, vs a pooled aiohttp session; millimcp's cache store in front, tagged
  ``customer:{id}``);
- ``trimmed`` / ``fast_codec``: ``orders.views`` (debug fields and long explanations or not;
  ``json`` or msgspec);
- ``compression``: millimcp's response compression (zstd/gzip as the client accepts) or none;
- ``quiet_logging``: DEBUG of full bodies written synchronously, or INFO lines that a thread
  writes in batches (``orders.quietlog``).

With none of ``async_db``, ``async_recs``, ``recs_cache`` on, the tools are plain ``def``
functions that millimcp runs on its thread pool (40 threads, like FastAPI's), blocking it
for the whole call, as the article's first version did.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import logging
import logging.handlers
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec

from millimcp import Context, HttpConfig, Server, ServerConfig, ToolError
from millimcp.observe import trace_headers
from orders.auth import WRITE, Verifier
from orders.config import FLAGS, PRESETS, OrdersConfig, data_dir, with_settings
from orders.db import async_engine, ensure_database, ignores_index, sync_engine
from orders.queries import CoreQueries, Offload, OrmQueries, Queries, since_for
from orders.recs import BlockingRecommender, CachedRecommender, PooledRecommender, Recommender
from orders.schema import HISTORY_DAYS
from orders.sqlite_queries import SqliteQueries, sqlite_path
from orders.views import Views, analysis, analysis_text

__all__ = ["build_server", "main"]

T = TypeVar("T")
log = logging.getLogger("orders")

READ_ONLY = {"readOnlyHint": True, "idempotentHint": True}


class LineItem(msgspec.Struct, forbid_unknown_fields=True):
    """One line of a new order."""

    product_id: Annotated[int, msgspec.Meta(ge=1)]
    quantity: Annotated[int, msgspec.Meta(ge=1, le=20)] = 1


CustomerId = Annotated[int, msgspec.Meta(ge=1)]
Days = Annotated[int, msgspec.Meta(ge=1, le=HISTORY_DAYS + 3650)]


# -- the tools and the app -------------------------------------------------------------------------


def _drive(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (every blocking step runs inline) to its end."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a blocking tool awaited something that suspends")


@dataclasses.dataclass
class _Parts:
    queries: Queries | None = None
    recommender: Recommender | None = None


def _log_setup(config: OrdersConfig) -> Callable[[], None]:
    path = Path(config.log_file or data_dir() / "logs" / f"orders-{os.getpid()}.log")
    path.parent.mkdir(parents=True, exist_ok=True)
    formatter = logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s")
    log.propagate = False
    if config.quiet_logging:  # INFO, written in batches by a thread (orders.quietlog)
        from orders.quietlog import BatchedLogging

        log.setLevel(logging.INFO)
        return BatchedLogging(log, path, formatter).stop
    # synchronous: every record is formatted and written by the thread that logs it
    handler = logging.handlers.RotatingFileHandler(path, maxBytes=64 << 20, backupCount=1)
    handler.setFormatter(formatter)
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)

    def stop() -> None:
        log.removeHandler(handler)
        handler.close()

    return stop


def _log_call(tool: str, arguments: dict[str, Any], body: str, started: float) -> None:
    if log.isEnabledFor(logging.DEBUG):
        log.debug("request tool=%s arguments=%s", tool, json.dumps(arguments))
        log.debug("response tool=%s body=%s", tool, body)
    log.info("tool=%s bytes=%d ms=%.2f", tool, len(body), (time.perf_counter() - started) * 1000)


def build_server(config: OrdersConfig, *, server_timing: bool = True) -> Server:
    """The service for ``config``. The database is seeded and opened when it starts."""
    blocking = not (config.async_db or config.async_recs or config.recs_cache)
    parts = _Parts()
    verifier = Verifier(os.environ.get("ORDERS_AUTH_SECRET") or config.auth_secret)
    decode: Callable[[bytes], Any] = msgspec.json.decode if config.fast_codec else json.loads

    @contextlib.asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[None]:
        import asyncio

        seeded = await asyncio.to_thread(
            ensure_database,
            config.resolved_db_url(),
            orders=config.orders,
            seed=config.seed,
            covering=config.covering_index,
        )
        offload = Offload(None if blocking else server.executor)
        ignore = await asyncio.to_thread(ignores_index, seeded.url, config.covering_index)
        views.server_info["database"] = seeded.url
        path = sqlite_path(seeded.url) if config.async_db else None
        if path is not None:  # SQLite: sqlite3 on two threads (orders.sqlite_queries)
            parts.queries = SqliteQueries(path, full=not config.trimmed)
        elif config.async_db:
            parts.queries = CoreQueries(
                async_engine(seeded.url),
                full=not config.trimmed,
                ignore_index=ignore,
            )
        else:
            parts.queries = OrmQueries(sync_engine(seeded.url), offload, ignore_index=ignore)
        recommender: Recommender
        if config.async_recs:
            recommender = PooledRecommender(config.recommender_url, decode)
        else:
            recommender = BlockingRecommender(config.recommender_url, offload, decode)
        if config.recs_cache:
            recommender = CachedRecommender(recommender, server, config.recs_ttl_s)
        parts.recommender = recommender
        stop_logging = _log_setup(config)
        try:
            yield
        finally:
            stop_logging()
            await recommender.close()
            await parts.queries.close()

    server = Server(
        "orders",
        version="1.0.0",
        instructions="Look up, list and analyse a customer's orders; suggest products.",
        config=ServerConfig(sync_workers=config.sync_workers, server_timing=server_timing),
        lifespan=lifespan,
    )
    views = Views(config, config.resolved_db_url())

    def tool(**options: Any) -> Callable[[Callable[..., Coroutine[Any, Any, str]]], None]:
        """Register an async tool body as is, or, in the blocking configuration, as a sync
        function that runs it inline on millimcp's thread pool."""

        def register(body: Callable[..., Coroutine[Any, Any, str]]) -> None:
            if not blocking:
                server.tool(**options)(body)
                return

            @functools.wraps(body)
            def blocking_tool(*args: Any, **kwargs: Any) -> str:
                return _drive(body(*args, **kwargs))

            server.tool(**options)(blocking_tool)

        return register

    def queries() -> Queries:
        assert parts.queries is not None, "the server has not started"
        return parts.queries

    def recommender() -> Recommender:
        assert parts.recommender is not None, "the server has not started"
        return parts.recommender

    async def suggestions(customer_id: int, limit: int) -> tuple[list[dict[str, Any]], Any]:
        answer = await recommender().get(customer_id, limit, dict(trace_headers()))
        products = await queries().products([item["product_id"] for item in answer["items"]])
        return views.suggestions(answer, products), answer

    @tool(annotations=READ_ONLY)
    async def get_order(order_id: Annotated[int, msgspec.Meta(ge=1)], ctx: Context) -> str:
        """One order with its lines, and the customer's 20 most recent orders."""
        started = time.perf_counter()
        caller = verifier.caller(ctx)
        order = await queries().order(order_id)
        if order is None:
            raise ToolError(f"no order {order_id}")
        caller.check(order["customer_id"])
        recent = await queries().orders(order["customer_id"], since_for(HISTORY_DAYS), None, 20)
        db = time.perf_counter()
        payload = {
            "order": views.detail(order),
            "recent_orders": [views.summary(o) for o in recent],
        }
        body = views.finish(payload, "get_order", {"order_id": order_id}, {"db": db - started})
        _log_call("get_order", {"order_id": order_id}, body, started)
        return body

    @tool(annotations=READ_ONLY)
    async def list_orders(
        customer_id: CustomerId,
        ctx: Context,
        days: Days = 365,
        status: str | None = None,
        limit: Annotated[int, msgspec.Meta(ge=1, le=200)] = 50,
    ) -> str:
        """The customer's orders of the last ``days`` days, newest first."""
        started = time.perf_counter()
        verifier.caller(ctx).check(customer_id)
        orders = await queries().orders(customer_id, since_for(days), status, limit)
        db = time.perf_counter()
        arguments = {"customer_id": customer_id, "days": days, "status": status, "limit": limit}
        payload = {
            "customer_id": customer_id,
            "since": since_for(days).isoformat(),
            "orders": [views.summary(o) for o in orders],
        }
        body = views.finish(payload, "list_orders", arguments, {"db": db - started})
        _log_call("list_orders", arguments, body, started)
        return body

    @tool(annotations=READ_ONLY, task="optional")  # a task for clients that ask (docs/tasks.md)
    async def analyze_orders(
        customer_id: CustomerId, ctx: Context, days: Days = HISTORY_DAYS
    ) -> str:
        """Spend, statuses, months and categories of the customer's last ``days`` days of
        orders, with product suggestions from the recommendation service."""
        started = time.perf_counter()
        verifier.caller(ctx).check(customer_id)
        since = since_for(days)
        orders = await queries().orders(customer_id, since, None, 1000)
        categories = await queries().categories(customer_id, since)
        db = time.perf_counter()
        suggested, answer = await suggestions(customer_id, 10)
        recs = time.perf_counter()
        totals, by_status, months = analysis(orders, categories)
        payload: dict[str, Any] = {
            "customer_id": customer_id,
            "since": since.isoformat(),
            "totals": totals,
            "by_status": by_status,
            "by_month": months,
            "top_categories": categories,
            "orders": [views.summary(o) for o in orders[:100]],
            "suggestions": suggested,
        }
        if not views.trimmed:
            payload["narrative"] = analysis_text(totals, months, days)
        arguments = {"customer_id": customer_id, "days": days}
        body = views.finish(
            payload,
            "analyze_orders",
            arguments,
            {"db": db - started, "recommender": recs - db},
            {"recommender_answer": answer},
        )
        _log_call("analyze_orders", arguments, body, started)
        return body

    @tool(annotations=READ_ONLY)
    async def get_recommendations(
        customer_id: CustomerId,
        ctx: Context,
        limit: Annotated[int, msgspec.Meta(ge=1, le=50)] = 10,
    ) -> str:
        """Products to suggest to the customer, best first, with the model's reasons."""
        started = time.perf_counter()
        verifier.caller(ctx).check(customer_id)
        suggested, answer = await suggestions(customer_id, limit)
        arguments = {"customer_id": customer_id, "limit": limit}
        body = views.finish(
            {"customer_id": customer_id, "suggestions": suggested},
            "get_recommendations",
            arguments,
            {"recommender": time.perf_counter() - started},
            {"recommender_answer": answer},
        )
        _log_call("get_recommendations", arguments, body, started)
        return body

    @tool(annotations=READ_ONLY)
    async def get_profile(customer_id: CustomerId, ctx: Context) -> str:
        """The customer's profile with their order count, spend and last order."""
        started = time.perf_counter()
        verifier.caller(ctx).check(customer_id)
        found = await queries().profile(customer_id)
        if found is None:
            raise ToolError(f"no customer {customer_id}")
        arguments = {"customer_id": customer_id}
        body = views.finish(
            {"profile": views.profile(found)},
            "get_profile",
            arguments,
            {"db": time.perf_counter() - started},
        )
        _log_call("get_profile", arguments, body, started)
        return body

    @tool(invalidates=["customer:{customer_id}"])
    async def create_order(
        customer_id: CustomerId, items: list[LineItem], ctx: Context, channel: str = "agent"
    ) -> str:
        """Place an order; the customer's cached analysis and suggestions are dropped."""
        started = time.perf_counter()
        verifier.caller(ctx).check(customer_id, WRITE)
        if not 1 <= len(items) <= 50:
            raise ToolError("an order has 1 to 50 items")
        wanted = [(item.product_id, item.quantity) for item in items]
        known = await queries().products(sorted({p for p, _ in wanted}))
        missing = sorted({p for p, _ in wanted} - set(known))
        if missing:
            raise ToolError(f"unknown products: {missing}")
        created = await queries().create(customer_id, wanted, channel[:12])
        arguments = {
            "customer_id": customer_id,
            "items": [msgspec.to_builtins(i) for i in items],
            "channel": channel,
        }
        body = views.render({"order": created, "customer_id": customer_id})
        _log_call("create_order", arguments, body, started)
        return body

    return server


# -- command line -----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m orders.server",
        description="The order-analysis MCP service (naive or tuned, flag by flag).",
    )
    parser.add_argument("--preset", choices=sorted(PRESETS), default="naive")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FLAG=VALUE",
        help=f"override a setting; flags: {', '.join(FLAGS)}",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8780)
    parser.add_argument("--db", help="SQLAlchemy URL (default: SQLite in .demo/)")
    parser.add_argument("--recommender", help="base URL of orders.recommender")
    parser.add_argument("--orders", type=int, help="orders to seed (default 200,000)")
    parser.add_argument("--log-file", help="the service's log (default: .demo/logs/)")
    parser.add_argument("--auth-secret", help="HMAC secret of the bearer tokens")
    parser.add_argument(
        "--no-server-timing", action="store_true", help="do not send Server-Timing headers"
    )
    parser.add_argument("--certfile", help="TLS: the certificate chain (PEM); needs --keyfile")
    parser.add_argument("--keyfile", help="TLS: the private key (PEM)")
    args = parser.parse_args(argv)
    settings = list(args.set)
    for name, value in (
        ("db_url", args.db),
        ("recommender_url", args.recommender),
        ("orders", args.orders),
        ("log_file", args.log_file),
        ("auth_secret", args.auth_secret),
    ):
        if value is not None:
            settings.append(f"{name}={value}")
    try:
        config = with_settings(PRESETS[args.preset], settings)
    except ValueError as exc:
        parser.error(str(exc))
    started = time.perf_counter()
    seeded = ensure_database(
        config.resolved_db_url(),
        orders=config.orders,
        seed=config.seed,
        covering=config.covering_index,
    )
    print(
        f"orders: {config.name} database {seeded.url} "
        + (f"seeded in {seeded.seconds:.1f} s" if seeded.seeded_now else "reused")
        + f" ({time.perf_counter() - started:.1f} s)",
        file=sys.stderr,
        flush=True,
    )
    server = build_server(config, server_timing=not args.no_server_timing)
    http = HttpConfig() if config.compression else HttpConfig(compression=())
    print(
        f"orders: {config.name} serving http{'s' if args.certfile else ''}://"
        f"{args.host}:{args.port}/mcp",
        file=sys.stderr,
        flush=True,
    )
    from millimcp.server.serve import run_app

    run_app(
        server.asgi(path="/mcp", http=http),
        host=args.host,
        port=args.port,
        certfile=args.certfile,
        keyfile=args.keyfile,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
