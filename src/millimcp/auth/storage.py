"""Where a client keeps what it got from authorization servers.

A :class:`Credentials` record per protected resource: the authorization server it came from
(``issuer``), the registered client, the token response and the scopes last asked for.
Credentials are bound to their issuer: the flow never shows them to another server.

:class:`TokenStorage` is the protocol; :class:`MemoryTokenStorage` (the default) keeps them
for the life of the process, :class:`FileTokenStorage` in a JSON file only its owner may read
(mode 0600).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol, runtime_checkable

import msgspec

from millimcp.auth.metadata import ClientInformation, TokenResponse

__all__ = ["Credentials", "FileTokenStorage", "MemoryTokenStorage", "TokenStorage"]


class Credentials(msgspec.Struct, omit_defaults=True, kw_only=True):
    issuer: str
    client: ClientInformation | None = None
    token: TokenResponse | None = None
    scopes: list[str] = msgspec.field(default_factory=list)


@runtime_checkable
class TokenStorage(Protocol):
    """Keyed by the canonical URI of the protected resource."""

    async def load(self, resource: str) -> Credentials | None: ...

    async def save(self, resource: str, credentials: Credentials | None) -> None: ...


class MemoryTokenStorage:
    def __init__(self) -> None:
        self._items: dict[str, Credentials] = {}

    def __repr__(self) -> str:
        return f"<MemoryTokenStorage {len(self._items)} resources>"

    async def load(self, resource: str) -> Credentials | None:
        return self._items.get(resource)

    async def save(self, resource: str, credentials: Credentials | None) -> None:
        if credentials is None:
            self._items.pop(resource, None)
        else:
            self._items[resource] = credentials


_FILE_DECODER = msgspec.json.Decoder(dict[str, Credentials])


class FileTokenStorage:
    """A JSON file (created with mode 0600, written atomically, re-read on each load)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"<FileTokenStorage {self.path}>"

    def _read(self) -> dict[str, Credentials]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        try:
            return _FILE_DECODER.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return {}

    async def load(self, resource: str) -> Credentials | None:
        return self._read().get(resource)

    async def save(self, resource: str, credentials: Credentials | None) -> None:
        items = self._read()
        if credentials is None:
            items.pop(resource, None)
        else:
            items[resource] = credentials
        data = msgspec.json.encode(items)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.path)
