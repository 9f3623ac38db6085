"""Helpers for testing millimcp servers (yours and ours) without a network."""

from millimcp.testing.asgi import http_scope

__all__ = ["http_scope"]
