"""The keyword options every way of making a :class:`~millimcp.client.Client` shares."""

from __future__ import annotations

from typing import TypedDict

from millimcp.client.handlers import ElicitationHandler, RootsSource, SamplingHandler
from millimcp.client.tensors import TensorType
from millimcp.protocol.types import Implementation, LoggingLevel
from millimcp.resilience.policy import Limits, Retry, Timeout

__all__ = ["ClientOptions"]


class ClientOptions(TypedDict, total=False):
    """``Client.over_http``'s options that ``Client.over_stdio`` and
    ``millimcp.testing.connect`` take too (each is documented there)."""

    limits: Limits | None
    timeout: Timeout | float | None
    retry: Retry | None
    elicitation: ElicitationHandler | None
    sampling: SamplingHandler | None
    roots: RootsSource | None
    client_info: tuple[str, str] | Implementation
    tensors: bool
    tensor_type: TensorType | None
    log_level: LoggingLevel | None
