"""Transports move framed bytes, never MCP objects."""
