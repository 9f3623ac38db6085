"""millimcp with one ``report`` tool returning about 50 KB of JSON text (compression bench).

``BENCH_NO_ISAL=1`` hides the isal package, so gzip falls back to the standard zlib.
"""

import os
import sys

if os.environ.get("BENCH_NO_ISAL"):
    sys.modules["isal"] = None  # type: ignore[assignment]
    sys.modules["isal.isal_zlib"] = None  # type: ignore[assignment]

import msgspec

from millimcp import Server

ROWS = [
    {
        "id": 100_000 + i,
        "sku": f"SKU-{i * 7919 % 100_000:05d}",
        "name": f"Widget model {i % 37} ({['red', 'green', 'blue', 'black'][i % 4]})",
        "price": round(9.99 + (i * 13 % 500) / 7, 2),
        "stock": i * 31 % 250,
        "updated": f"2026-11-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z",
        "tags": ["sale", "new"][: i % 3],
    }
    for i in range(360)
]
PAYLOAD = msgspec.json.encode(ROWS).decode()  # about 50 KB

server = Server("bench", version="1.0.0")


@server.tool()
async def report() -> str:
    return PAYLOAD


app = server.asgi()
