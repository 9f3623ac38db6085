"""The client core: the parts one client is made of, wired to one link.

::

    Client (application API)
      └─ Core
           ├─ Pipeline     call: deadline -> MRTR rounds -> gate -> retries -> attempt
           │                (millimcp.client.pipeline), and long-lived streams
           ├─ Negotiation  the era and version: probe, initialize, -32022 (millimcp.client.era)
           ├─ Inbound      progress, server logs, notifications, server-to-client requests,
           │                the unsolicited stream's pump (millimcp.client.inbound)
           ├─ Envelope     each request's era-dependent _meta and headers
           │                (millimcp.client.envelope)
           ├─ Catalog      the lists, cached by ttl, and what each tool's definition says
           │                (millimcp.client.catalog)
           └─ ClientTensors the tensor codec of call_tool (millimcp.client.tensors; None
                            without numpy)
      over a Link (millimcp.client.link): HTTP, stdio, or an ASGI app in-process.

A :class:`~millimcp.client.subscription.Subscription` sees the core only as a
:class:`~millimcp.client.subscription.SubscriptionHost` (era, sinks, stream,
open_unsolicited).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any, Literal

import msgspec

from millimcp.client.catalog import Catalog
from millimcp.client.envelope import Envelope, traceparent
from millimcp.client.era import Era, Negotiation
from millimcp.client.handlers import Handlers
from millimcp.client.inbound import Inbound, NotificationSink, OnProgress
from millimcp.client.link import Link
from millimcp.client.pipeline import MAX_ROUNDS, Pipeline
from millimcp.client.results import ClientStats
from millimcp.client.tensors import ClientTensors, TensorType
from millimcp.client.tensors import available as tensors_available
from millimcp.errors import ConfigurationError
from millimcp.protocol import Message
from millimcp.protocol.types import Implementation, LoggingLevel, ServerCapabilities
from millimcp.resilience.policy import Limits, Retry, Timeout

__all__ = ["MAX_ROUNDS", "Core", "OnProgress", "traceparent"]

_ERAS = ("auto", "modern", "handshake")


class Core:
    """One client's requests to one server through one
    :class:`~millimcp.client.link.Link`. ``era`` forces an era (``"auto"``: probe, and
    remember the answer under ``key``); ``tensors``: declare ``dev.millimcp/tensor`` (over
    an HTTP link, with numpy installed) in the client's capabilities (modern ``_meta`` and
    ``initialize`` alike); ``tensor_type``: what result tensors decode to by default.
    """

    def __init__(
        self,
        link: Link,
        key: str,
        *,
        limits: Limits,
        timeout: Timeout,
        retry: Retry | None,
        era: Literal["auto", "modern", "handshake"],
        handlers: Handlers,
        client_info: Implementation,
        tensors: bool = True,
        tensor_type: TensorType | None = None,
        shared_memory: bool = False,
        log_level: LoggingLevel | None = None,
    ) -> None:
        if era not in _ERAS:
            raise ConfigurationError(f"era must be 'auto', 'modern' or 'handshake', not {era!r}")
        self.link = link
        self.key = key
        self.http = link.kind == "http"
        self.timeout = timeout
        self.tensors = (
            ClientTensors(
                declare=tensors and self.http,
                tensor_type=tensor_type,
                shared_memory=shared_memory,
            )
            if tensors_available()
            else None
        )
        capabilities = handlers.capabilities()
        if self.tensors is not None and self.tensors.declare:
            extensions = self.tensors.capability()
            capabilities = msgspec.structs.replace(capabilities, extensions=extensions)
        self.capabilities = capabilities
        self.envelope = Envelope(
            http=self.http,
            capabilities=msgspec.to_builtins(capabilities),
            client_info=msgspec.to_builtins(client_info),
            log_level=log_level,
        )
        self.inbound = Inbound(link, self.envelope, handlers)
        self.negotiation = Negotiation(
            link,
            self.envelope,
            self.inbound,
            key=key,
            forced=era,
            timeout=timeout,
            answers_requests=(
                capabilities.roots is not None
                or capabilities.sampling is not None
                or capabilities.elicitation is not None
            ),
        )
        self.pipeline = Pipeline(
            link,
            self.envelope,
            self.inbound,
            self.negotiation,
            limits=limits,
            timeout=timeout,
            retry=retry,
            handlers=handlers,
        )
        self.catalog = Catalog(self.pipeline, self.envelope)
        self.inbound.on_notification = self._list_changed

    def __repr__(self) -> str:
        gate = self.pipeline.gate
        return (
            f"<Core {self.key} era={self.era} version={self.version} "
            f"in_flight={gate.in_flight} queued={gate.queued}>"
        )

    # -- lifecycle ----------------------------------------------------------------------

    async def open(self) -> None:
        """Open the link and find the server's era (probe, or the remembered answer)."""
        await self.link.open()
        try:
            if not self.http:
                self.inbound.start_pump()
            await self.negotiation.detect(self.pipeline)
        except BaseException:
            await self.close()
            raise
        self.pipeline.recovering = True

    async def close(self) -> None:
        """Close the subscriptions, stop reading, close the link."""
        self.pipeline.recovering = False
        for sink in tuple(self.inbound.sinks):
            await sink.aclose()
        await self.inbound.close()
        await self.link.close()
        if self.tensors is not None:
            self.tensors.close()

    # -- what the server told us --------------------------------------------------------

    @property
    def era(self) -> Era | None:
        return self.envelope.era

    @property
    def version(self) -> str | None:
        return self.envelope.version

    @property
    def server_info(self) -> Implementation | None:
        return self.negotiation.server_info

    @property
    def server_capabilities(self) -> ServerCapabilities:
        return self.negotiation.server_capabilities

    @property
    def instructions(self) -> str | None:
        return self.negotiation.instructions

    @property
    def stats(self) -> ClientStats:
        return self.pipeline.stats

    def use_modern(self, version: str) -> None:
        """Send modern-era requests at ``version`` from now on (the server may refuse it:
        the pipeline then switches to one it lists)."""
        self.envelope.use_modern(version)

    def _list_changed(self, method: str) -> None:
        self.catalog.lists.on_notification(method)

    # -- what a subscription uses (SubscriptionHost) ------------------------------------

    @property
    def sinks(self) -> set[NotificationSink]:
        return self.inbound.sinks

    def stream(self, method: str, params: dict[str, Any]) -> AsyncGenerator[Message, None]:
        return self.pipeline.stream(method, params)

    async def open_unsolicited(self) -> None:
        await self.inbound.open_stream(self.timeout.connect or 5.0)
