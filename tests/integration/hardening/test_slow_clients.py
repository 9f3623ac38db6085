"""Slow and lying clients: deadlines close them, and they hold no memory they did not send.

The server (tests/servers/hardening_server.py) gives headers and idle connections 2 s and a
body 3 s (or 16 KiB/s).
"""

from __future__ import annotations

import socket
import time

from millimcp.codec import ATTACHMENT_MEDIA_TYPE
from tests.integration.hardening.conftest import Front

MB = 1024 * 1024
FORGED = 60 * MB
"""The size a forged tensor-framing request declares."""


def head(front: Front, content_type: str, length: int) -> bytes:
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{front.port}\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def answer(sock: socket.socket) -> bytes:
    """What the server sends until it closes the connection."""
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except ConnectionResetError:
        pass
    return b"".join(chunks)


def test_forged_framing_holds_no_memory_it_was_not_sent(front: Front) -> None:
    """Five requests declare 60 MB bodies with the tensor framing and send 1 KiB each: the
    server's memory does not grow by what they declared; the body deadline ends them."""
    before = front.rss()
    socks = [front.connect() for _ in range(5)]
    try:
        for sock in socks:
            sock.sendall(head(front, ATTACHMENT_MEDIA_TYPE, FORGED) + b"\0" * 1024)
        time.sleep(1.0)  # the server has read them (and, before the fix, allocated 300 MB)
        grown = front.rss() - before
        assert grown < 30 * MB, f"RSS grew by {grown / MB:.0f} MB"
        for sock in socks:
            assert answer(sock).startswith(b"HTTP/1.1 408 "), "a stalled body is timed out"
    finally:
        for sock in socks:
            sock.close()
    front.works()


def test_slow_headers_and_idle_connections_are_closed(front: Front) -> None:
    """Headers sent one byte at a time and a connection that sends nothing: both closed by
    the deadlines while a normal call is served."""
    trickle = [front.connect() for _ in range(10)]
    idle = [front.connect() for _ in range(5)]
    request = head(front, "application/json", 2)
    try:
        started = time.monotonic()
        closed: set[int] = set()
        answers: dict[int, bytes] = {}
        sent = 0
        while len(closed) < len(trickle) and time.monotonic() - started < 10:
            for i, sock in enumerate(trickle):
                if i in closed:
                    continue
                try:
                    sock.sendall(request[sent : sent + 1])
                except (BrokenPipeError, ConnectionResetError):
                    closed.add(i)
            sent += 1
            front.works()
            time.sleep(0.25)
            for i, sock in enumerate(trickle):
                sock.setblocking(False)
                try:
                    answers[i] = sock.recv(4096)  # the 408, or the end: the server is done
                    closed.add(i)
                except BlockingIOError:
                    pass
                except ConnectionResetError:
                    closed.add(i)
                finally:
                    sock.setblocking(True)
        assert len(closed) == len(trickle), "slow headers were cut by the header deadline"
        assert sent < len(request), "the deadline came before the headers were complete"
        assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers.values()), answers
        for sock in idle:
            assert answer(sock) == b"", "an idle new connection is closed without a word"
    finally:
        for sock in [*trickle, *idle]:
            sock.close()
