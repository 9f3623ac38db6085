"""MCP message types as msgspec structs, one module per spec chapter.

2026-07-28 throughout, plus the handshake era's own messages in ``legacy`` and the tasks
extension's in ``tasks``.
"""

from millimcp.protocol.types.base import *  # noqa: F403
from millimcp.protocol.types.client_features import *  # noqa: F403
from millimcp.protocol.types.completion import *  # noqa: F403
from millimcp.protocol.types.content import *  # noqa: F403
from millimcp.protocol.types.legacy import *  # noqa: F403
from millimcp.protocol.types.lifecycle import *  # noqa: F403
from millimcp.protocol.types.prompts import *  # noqa: F403
from millimcp.protocol.types.resources import *  # noqa: F403
from millimcp.protocol.types.results import *  # noqa: F403
from millimcp.protocol.types.tasks import *  # noqa: F403
from millimcp.protocol.types.tools import *  # noqa: F403
