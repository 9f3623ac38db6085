"""The external recommendation service (S6.2): a real HTTP process on 127.0.0.1.

It stands for the downstream the article called synchronously: every answer takes
``--latency-ms`` (default 400 ms, S6.2), spent in ``asyncio.sleep`` so the process serves
any number of callers at once and the latency is the service's, not a queue's.

    python -m orders.recommender --port 8790 [--latency-ms 400] [--host 127.0.0.1]

Endpoints:

- ``GET /recommendations?customer_id=N&limit=K`` -> ``{"customer_id", "items": [{"product_id",
  "score", "reason", "features": {...}}], "model", "generated_ms"}``; the items are a
  deterministic function of the customer (the same question gets the same answer).
- ``GET /stats`` -> ``{"requests": n, "by_customer": {"N": n}, "connections": n}``: how often
  it was asked (tests check that a cache hit never reaches it); ``POST /stats/reset``.
- ``GET /health`` -> ``ok``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
from collections import Counter
from typing import Any

from aiohttp import web

__all__ = ["make_app", "recommend"]

PRODUCTS = 500
REASONS = (
    "bought together with your recent orders",
    "popular in your region this month",
    "matches a category you prefer",
    "restocked since you last viewed it",
    "customers like you rated it highly",
)


def recommend(customer_id: int, limit: int) -> list[dict[str, Any]]:
    """The recommendations of one customer: deterministic, distinct products."""
    items: list[dict[str, Any]] = []
    seen: set[int] = set()
    counter = 0
    while len(items) < limit:
        digest = hashlib.blake2b(f"{customer_id}:{counter}".encode(), digest_size=8).digest()
        counter += 1
        product = int.from_bytes(digest[:4], "big") % PRODUCTS + 1
        if product in seen:
            continue
        seen.add(product)
        score = round(0.99 - 0.04 * len(items) - digest[4] / 25_500, 4)
        items.append(
            {
                "product_id": product,
                "score": score,
                "reason": REASONS[digest[5] % len(REASONS)],
                "features": {
                    "affinity": digest[6] / 255,
                    "recency_days": digest[7] % 90,
                    "model_rank": len(items) + 1,
                    "candidates_considered": 500,
                    "embedding_norm": round(1 + digest[4] / 100, 3),
                },
            }
        )
    return items


def make_app(latency_s: float) -> web.Application:
    requests: Counter[int] = Counter()
    connections: set[int] = set()

    async def recommendations(request: web.Request) -> web.Response:
        try:
            customer_id = int(request.query["customer_id"])
            limit = min(50, max(1, int(request.query.get("limit", "10"))))
        except (KeyError, ValueError):
            return web.json_response({"error": "customer_id (int) is required"}, status=400)
        requests[customer_id] += 1
        transport = request.transport
        if transport is not None:
            connections.add(id(transport))
        await asyncio.sleep(latency_s)
        body = {
            "customer_id": customer_id,
            "items": recommend(customer_id, limit),
            "model": "orders-recs-v3",
            "generated_ms": round(latency_s * 1000, 1),
            "trace": request.headers.get("traceparent"),
        }
        return web.Response(body=json.dumps(body), content_type="application/json")

    async def stats(_request: web.Request) -> web.Response:
        return web.json_response(
            {
                "requests": sum(requests.values()),
                "by_customer": {str(k): v for k, v in requests.items()},
                "connections": len(connections),
            }
        )

    async def reset(_request: web.Request) -> web.Response:
        requests.clear()
        connections.clear()
        return web.json_response({"reset": True})

    async def health(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/recommendations", recommendations)
    app.router.add_get("/stats", stats)
    app.router.add_post("/stats/reset", reset)
    app.router.add_get("/health", health)
    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m orders.recommender", description="The recommendation service."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8790)
    parser.add_argument("--latency-ms", type=float, default=400.0)
    args = parser.parse_args(argv)
    app = make_app(args.latency_ms / 1000)
    # backlog: the naive service opens a connection per call, hundreds at once under load
    web.run_app(app, host=args.host, port=args.port, backlog=1024, print=None, access_log=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
