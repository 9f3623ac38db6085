"""``millimcp serve --http native``: SIGTERM drains in-flight calls, then the process exits 0."""

from __future__ import annotations

import signal
import threading
import time

import httpx

from tests.conftest import serve_python
from tests.integration.http.conftest import Rpc


def test_sigterm_answers_the_calls_in_flight_then_exits_0() -> None:
    command = ["-m", "millimcp", "serve", "tests.servers.basic_server:server"]
    with serve_python([*command, "--port", "{port}", "--http", "native"]) as served:
        url = served.url()
        answers: list[str] = []
        connected = threading.Barrier(11)

        def call(n: int) -> None:
            with httpx.Client(timeout=30) as client:
                rpc = Rpc(client, url)
                rpc.works()  # connected and kept alive
                connected.wait()
                result = rpc.tool("slow", {"seconds": 1.5, "tag": f"term{n}"})
                answers.append(result["content"][0]["text"])

        threads = [threading.Thread(target=call, args=(n,)) for n in range(10)]
        for thread in threads:
            thread.start()
        connected.wait(30)
        time.sleep(0.75)  # all ten calls are in flight
        served.process.send_signal(signal.SIGTERM)
        for thread in threads:
            thread.join(30)
        assert answers == ["done"] * 10
        assert served.process.wait(10) == 0
        try:
            httpx.get(url, timeout=2)
        except httpx.ConnectError:
            pass  # nothing listens any more
        else:
            raise AssertionError("the server still accepts connections after SIGTERM")
