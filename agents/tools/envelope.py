"""The tool envelope (docs/design.md, "Tool envelope"): ``{tool_call_id, data: {..., source_refs},
source_refs}`` on success (``source_refs`` inside ``data``; the top-level copy is kept for
compatibility, see :meth:`ToolEnvelope.to_public`), ``{tool_call_id, error: {code, message},
retry_hint}`` on failure.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ErrorCode(StrEnum):
    """Error codes. The first six are the product's original codes; the rest name failures
    they left implicit (docs/design.md, "Error codes")."""

    RATE_LIMITED = "RATE_LIMITED"
    INVALID_SYMBOL = "INVALID_SYMBOL"
    INSUFFICIENT_FUNDS = "INSUFFICIENT_FUNDS"
    RISK_LIMIT_EXCEEDED = "RISK_LIMIT_EXCEEDED"
    MARKET_CLOSED = "MARKET_CLOSED"
    NETWORK_ERROR = "NETWORK_ERROR"
    INVALID_INPUT = "INVALID_INPUT"
    DATE_OUT_OF_RANGE = "DATE_OUT_OF_RANGE"
    NO_DATA = "NO_DATA"
    NOT_CONFIGURED = "NOT_CONFIGURED"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    #: Every order of the call was rejected for a reason without its own code (a limit not
    #: marketable at the close, a stop not triggered, no volume left); the reasons are listed.
    ORDER_REJECTED = "ORDER_REJECTED"
    #: A sandboxed script ran past its wall-clock limit (``FINAGENT_ANALYSIS_SANDBOX_TIMEOUT``).
    TIMEOUT = "TIMEOUT"
    #: A sandboxed script hit its memory cap (``FINAGENT_ANALYSIS_SANDBOX_MEMORY_MB``) or another
    #: resource limit, and was stopped by it.
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"


#: Retrying cannot help: the input or the request is wrong.
PERMANENT_CODES = frozenset(
    {
        ErrorCode.INVALID_SYMBOL,
        ErrorCode.INVALID_INPUT,
        ErrorCode.DATE_OUT_OF_RANGE,
        ErrorCode.INSUFFICIENT_FUNDS,
        ErrorCode.RISK_LIMIT_EXCEEDED,
        ErrorCode.NOT_CONFIGURED,
        ErrorCode.ORDER_REJECTED,
        # the same script on the same bars runs out of time or memory again
        ErrorCode.TIMEOUT,
        ErrorCode.RESOURCE_EXHAUSTED,
    }
)
#: Worth retrying later at task level (the tool already retried timeouts inside the call).
TRANSIENT_CODES = frozenset({ErrorCode.NETWORK_ERROR, ErrorCode.RATE_LIMITED})

#: Default retry hints: every error carries one (docs/design.md, "Error codes").
RETRY_HINTS: dict[ErrorCode, str] = {
    ErrorCode.RATE_LIMITED: "Rate limit hit; retry after a short wait.",
    ErrorCode.INVALID_SYMBOL: "Check the symbol: it is not known to the data provider.",
    ErrorCode.NETWORK_ERROR: "Check the network connection and retry.",
    ErrorCode.INVALID_INPUT: "Check the arguments.",
    ErrorCode.DATE_OUT_OF_RANGE: "Pick a date inside the provider's data range.",
    ErrorCode.NO_DATA: "The provider returned no data; retry later or use another provider.",
    ErrorCode.NOT_CONFIGURED: "Configure the provider (see docs/configuration.md).",
    ErrorCode.INTERNAL_ERROR: "An internal error occurred; see the logs.",
    ErrorCode.ORDER_REJECTED: "Change the order (limit/stop price, quantity) or the date.",
    ErrorCode.TIMEOUT: "Make the script cheaper or raise FINAGENT_ANALYSIS_SANDBOX_TIMEOUT.",
    ErrorCode.RESOURCE_EXHAUSTED: "Use less memory in the script or raise"
    " FINAGENT_ANALYSIS_SANDBOX_MEMORY_MB.",
}


class ToolErrorBody(BaseModel):
    """``{code, message}`` of a failed tool call."""

    model_config = ConfigDict(extra="forbid")

    code: ErrorCode
    message: str


class ToolEnvelope(BaseModel):
    """The result of one logical tool call.

    Exactly one of ``data`` and ``error`` is set. ``source_refs`` always contains
    ``tool_call_id`` itself plus the ids of the tool calls whose outputs this one used.
    """

    model_config = ConfigDict(extra="forbid")

    tool_call_id: str
    data: dict[str, Any] | None = None
    source_refs: list[str] = Field(default_factory=list)
    error: ToolErrorBody | None = None
    retry_hint: str | None = None

    @property
    def ok(self) -> bool:
        """True when the call succeeded."""
        return self.error is None

    def to_public(self) -> dict[str, Any]:
        """The public JSON shape: success → ``{tool_call_id, data: {..., source_refs},
        source_refs}``; failure → ``{tool_call_id, error: {code, message}, retry_hint}``.

        The public shape puts ``source_refs`` inside ``data`` (every tool's ``data: {...;
        source_refs: string[]}``), so the public JSON carries them there. The top-level
        ``source_refs`` stays as well (the same list): our citations, the report's and the LLM
        tool messages read it, and stored ``tool_calls`` rows and earlier outputs have it
        there. ``self.data`` itself is unchanged (the stages keep the tool's own payload; a tool
        that returns its own ``data.source_refs`` keeps that one).
        """
        if self.error is None:
            data = self.data
            if isinstance(data, dict) and "source_refs" not in data:
                data = {**data, "source_refs": list(self.source_refs)}
            return {"tool_call_id": self.tool_call_id, "data": data, "source_refs": self.source_refs}
        return {
            "tool_call_id": self.tool_call_id,
            "error": {"code": self.error.code.value, "message": self.error.message},
            "retry_hint": self.retry_hint,
        }
