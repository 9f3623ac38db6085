"""``official_echo.py``, unmodified, on millimcp: the import hook of ``millimcp.compat`` (what
``python -m millimcp.compat run`` installs) serves its imports from the shims."""

from __future__ import annotations

from millimcp.compat.hook import install

install()

from official_echo import app  # noqa: E402 - after the hook, as ``compat run`` imports it

__all__ = ["app"]
