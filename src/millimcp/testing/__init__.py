"""Helpers for testing millimcp servers (yours and ours): in-process ASGI requests, hand-built
modern requests, servers in subprocesses."""

from millimcp.testing.asgi import http_scope
from millimcp.testing.processes import (
    ServedProcess,
    free_port,
    serve_subprocess,
    start_subprocess,
    stop_process,
    wait_for_port,
)
from millimcp.testing.requests import MODERN_VERSION, modern_meta, modern_request

__all__ = [
    "MODERN_VERSION",
    "ServedProcess",
    "free_port",
    "http_scope",
    "modern_meta",
    "modern_request",
    "serve_subprocess",
    "start_subprocess",
    "stop_process",
    "wait_for_port",
]
