"""millimcp.transports.verdicts: what a request's head alone decides, judged once per head."""

from __future__ import annotations

import pytest

from millimcp.transports.verdicts import LOOPBACK_HOSTS, HeadVerdicts

JSON = b"application/json"


def verdicts(origins: tuple[str, ...] | None = None) -> HeadVerdicts:
    return HeadVerdicts(LOOPBACK_HOSTS, origins)


@pytest.mark.parametrize(
    ("head", "status"),
    [
        ((b"127.0.0.1:8000", None, JSON, "POST"), None),
        ((b"[::1]:8000", b"http://localhost:3000", JSON, "POST"), None),
        ((b"localhost", None, b"application/vnd.x+json; charset=utf-8", "POST"), None),
        ((b"localhost", None, None, "GET"), None),
        ((b"localhost", None, None, "DELETE"), None),
        ((None, None, JSON, "POST"), 403),
        ((b"evil.example", None, JSON, "POST"), 403),
        ((b"localhost", b"https://evil.example", JSON, "POST"), 403),
        ((b"localhost", b"null", JSON, "POST"), 403),
        ((b"localhost", None, JSON, "PUT"), 405),
        ((b"localhost", None, b"text/plain", "POST"), 415),
        ((b"localhost", None, None, "POST"), 415),
    ],
)
def test_each_head_gets_its_verdict(head: tuple[bytes | None, ...], status: int | None) -> None:
    verdict = verdicts()[head]  # type: ignore[index]
    assert (None if verdict is None else verdict[0]) == status


def test_allowed_origins_and_any_host() -> None:
    head = (b"localhost", b"https://app.example", JSON, "POST")
    assert verdicts()[head] is not None
    assert verdicts(("https://app.example",))[head] is None
    assert verdicts(("*",))[head] is None
    anywhere = HeadVerdicts(None, None)
    assert anywhere[(b"any.example", None, JSON, "POST")] is None


def test_a_head_is_judged_once_and_the_memory_is_bounded() -> None:
    judged: list[object] = []

    class Counting(HeadVerdicts):
        def judge(self, head):  # type: ignore[no-untyped-def]
            judged.append(head)
            return super().judge(head)

    memo = Counting(LOOPBACK_HOSTS, None)
    head = (b"localhost", None, JSON, "POST")
    assert memo[head] is None
    assert memo[head] is None
    assert judged == [head]
    for port in range(300):
        assert memo[(b"localhost:%d" % port, None, JSON, "POST")] is None
    assert len(memo) <= 256
