"""minipipe: a small tool-execution pipeline for AI agents, in asyncio.

Ordered pre-execute, approval and guards; `tools/execute` wrappers around a body with
cooperative cancellation; post-execute, normalization and finalizeContent; a frozen
`tools/result` notification; a session log; parallel pools whose results commit in model order;
an in-memory workspace with read-before-edit; and Code Mode programs whose tool calls re-enter
the pipeline one at a time.
"""

from .code_mode import Bindings, ProgramOutput, Runner
from .fs import Intent, IntentRefused, Workspace
from .pipeline import (
    RUN_CODE,
    Accept,
    Allow,
    ApprovalRequest,
    Ask,
    Block,
    Deny,
    Dispatch,
    ModelCall,
    Pipeline,
    Planned,
    Presenter,
    Telemetry,
    Tool,
    ToolCall,
    ToolContext,
)
from .results import (
    AbortError,
    Context,
    Failure,
    TextBlock,
    ToolCallError,
    ToolError,
    ToolResult,
    ToolTimeoutError,
    render,
    text,
)
from .session import SessionEvent, SessionLog

__all__ = [
    "RUN_CODE",
    "AbortError",
    "Accept",
    "Allow",
    "ApprovalRequest",
    "Ask",
    "Bindings",
    "Block",
    "Context",
    "Deny",
    "Dispatch",
    "Failure",
    "Intent",
    "IntentRefused",
    "ModelCall",
    "Pipeline",
    "Planned",
    "Presenter",
    "ProgramOutput",
    "Runner",
    "SessionEvent",
    "SessionLog",
    "Telemetry",
    "TextBlock",
    "Tool",
    "ToolCall",
    "ToolCallError",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "ToolTimeoutError",
    "Workspace",
    "render",
    "text",
]
