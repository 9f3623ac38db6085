"""The order service's responses: what each tool returns, trimmed or not, and its encoding.

Trimmed (S6.3 ``trimmed``) is the core a caller needs; untrimmed adds debug fields and long
explanations (the ~60 KB of S6.1). ``fast_codec`` encodes with msgspec instead of ``json``.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable
from typing import Any

import msgspec

from orders.config import OrdersConfig
from orders.queries import SUMMARY_COLUMNS

__all__ = ["Views", "analysis", "analysis_text"]

SUMMARY_KEYS = SUMMARY_COLUMNS  # a trimmed summary carries what the covering index holds
DETAIL_KEYS = (
    *SUMMARY_KEYS,
    "customer_id",
    "channel",
    "currency",
    "subtotal_cents",
    "shipping_cents",
    "tax_cents",
)
LINE_KEYS = ("product_id", "name", "category", "quantity", "unit_price_cents", "discount_cents")
PROFILE_KEYS = (
    "id",
    "name",
    "email",
    "region",
    "segment",
    "created_at",
    "tier",
    "preferred_categories",
    "marketing_opt_in",
    "orders",
)


def _pick(item: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: item[key] for key in keys}


class Views:
    """Builds the responses: the trimmed core, or the core with debug fields and long
    explanations (the untrimmed ~60 KB of S6.1); encodes them with ``json`` or msgspec."""

    def __init__(self, config: OrdersConfig, db_url: str) -> None:
        self.trimmed = config.trimmed
        self._encode: Callable[[Any], str] = (
            (lambda value: msgspec.json.encode(value).decode()) if config.fast_codec else json.dumps
        )
        self.server_info = {
            "pid": os.getpid(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "database": db_url,
            "config": config.name,
            "flags": config.flags(),
        }

    def render(self, payload: dict[str, Any]) -> str:
        return self._encode(payload)

    def summary(self, order: dict[str, Any]) -> dict[str, Any]:
        return _pick(order, SUMMARY_KEYS) if self.trimmed else order

    def detail(self, order: dict[str, Any]) -> dict[str, Any]:
        if not self.trimmed:
            return order
        out = _pick(order, DETAIL_KEYS)
        out["lines"] = [_pick(line, LINE_KEYS) for line in order["lines"]]
        return out

    def profile(self, profile: dict[str, Any]) -> dict[str, Any]:
        out = _pick(profile, PROFILE_KEYS)
        out["preferred_categories"] = profile["preferred_categories"].split(",")
        out["marketing_opt_in"] = bool(profile["marketing_opt_in"])
        if not self.trimmed:
            out["credit_limit_cents"] = profile["credit_limit_cents"]
            out["notes"] = profile["notes"]
            out["explanation"] = _profile_text(out)
        return out

    def suggestions(
        self, answer: dict[str, Any], products: dict[int, dict[str, Any]]
    ) -> list[dict[str, Any]]:
        out = []
        for item in answer["items"]:
            product = products.get(item["product_id"])
            if product is None:  # not sold any more
                continue
            suggestion = {
                "product_id": item["product_id"],
                "name": product["name"],
                "category": product["category"],
                "price_cents": product["price_cents"],
                "score": item["score"],
                "reason": item["reason"],
            }
            if not self.trimmed:
                suggestion["description"] = product.get("description")
                suggestion["features"] = item["features"]
                suggestion["explanation"] = _suggestion_text(suggestion)
            out.append(suggestion)
        return out

    def finish(
        self,
        payload: dict[str, Any],
        tool: str,
        arguments: dict[str, Any],
        timings: dict[str, float],
        extra: dict[str, Any] | None = None,
    ) -> str:
        if not self.trimmed:
            payload["debug"] = {
                "tool": tool,
                "arguments": arguments,
                "timings_ms": {k: round(v * 1000, 3) for k, v in timings.items()},
                "server": self.server_info,
                "generated_at": time.time(),
                **(extra or {}),
            }
        return self.render(payload)


def _suggestion_text(s: dict[str, Any]) -> str:
    return (
        f"Why {s['name']}: the recommendation model ranked it with a score of {s['score']} "
        f"because it was {s['reason']}. It belongs to the {s['category']} category, which "
        "customers with a similar purchase history buy again within ninety days more often "
        "than the average customer does. The price of "
        f"{s['price_cents'] / 100:.2f} EUR sits inside the range this customer usually pays "
        "for items of this category, and the item is in stock in the customer's nearest "
        "warehouse, so it can ship within two working days. Similar customers who bought it "
        "rated it 4.4 out of 5 on average and returned it less often than other items of the "
        "category. Consider mentioning it together with the customer's most recent order; "
        "bundled suggestions are accepted about twice as often as standalone ones. "
    ) * 2


def _profile_text(p: dict[str, Any]) -> str:
    orders = p["orders"]
    return (
        f"{p['name']} is a {p['tier']} {p['segment']} customer in {p['region']} since "
        f"{p['created_at'][:10]}, with {orders['count']} orders worth "
        f"{orders['spend_cents'] / 100:.2f} EUR in total; the last one on "
        f"{(orders['last_order_at'] or 'never')[:10]}. They prefer "
        f"{', '.join(p['preferred_categories'])}. Marketing consent is "
        f"{'given' if p['marketing_opt_in'] else 'not given'}: only service messages may be "
        "sent otherwise. The profile was last reviewed by the segment team; tier changes "
        "are evaluated monthly from the trailing twelve months of spend. "
    ) * 3


def analysis_text(totals: dict[str, Any], months: list[dict[str, Any]], days: int) -> str:
    busiest = max(months, key=lambda m: m["spend_cents"])["month"] if months else "none"
    return (
        f"Over the last {days} days of the history the customer placed {totals['orders']} "
        f"orders for {totals['spend_cents'] / 100:.2f} EUR, {totals['avg_order_cents'] / 100:.2f}"
        f" EUR per order on average, with {totals['items']} items in all. The busiest month "
        f"was {busiest}. Spend is compared with the customer's own history rather than with "
        "the segment average, because segment averages hide seasonal buyers. Cancelled and "
        "returned orders count in the order total but are reported apart below, so that a "
        "high return rate stands out. Suggestions come from the recommendation service and "
        "are filtered to products still on sale; each carries the model's score and the "
        "reason it gave. "
    ) * 4


def analysis(
    orders: list[dict[str, Any]], categories: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, int], list[dict[str, Any]]]:
    spend = sum(o["total_cents"] for o in orders)
    items = sum(o["item_count"] for o in orders)
    totals = {
        "orders": len(orders),
        "spend_cents": spend,
        "items": items,
        "avg_order_cents": spend // len(orders) if orders else 0,
    }
    by_status: dict[str, int] = {}
    months: dict[str, dict[str, Any]] = {}
    for order in orders:
        by_status[order["status"]] = by_status.get(order["status"], 0) + 1
        month = order["created_at"][:7]
        entry = months.setdefault(month, {"month": month, "orders": 0, "spend_cents": 0})
        entry["orders"] += 1
        entry["spend_cents"] += order["total_cents"]
    return (
        totals,
        dict(sorted(by_status.items())),
        sorted(months.values(), key=lambda m: m["month"]),
    )
