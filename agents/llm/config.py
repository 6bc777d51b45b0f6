"""Settings-driven LLM configuration: one model string per agent role, fallbacks, limits, prices.

``FINAGENT_LLM_MODEL`` is the default of every role; ``FINAGENT_LLM_MODEL_<ROLE>`` overrides one
role (roles: query, technical, fundamental, sentiment, synthesis). A per-analysis override (the
CLI's ``--llm MODEL``) travels as ``FinancialAgentState.llm_model``, so a worker in another
process uses the model the producer asked for. No model for a role → that role runs
deterministically.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pipeline.core.settings import Settings


class Role(StrEnum):
    """Agent roles with their own model setting."""

    QUERY = "query"
    TECHNICAL = "technical"
    FUNDAMENTAL = "fundamental"
    SENTIMENT = "sentiment"
    SYNTHESIS = "synthesis"


@dataclass(frozen=True)
class LLMConfig:
    """The resolved configuration of the LLM agents for one analysis.

    Attributes:
        models: role → primary LiteLLM model string (roles without a model are absent).
        fallbacks: models tried in order after a role's primary fails (deduplicated).
        api_base / api_key: for OpenAI-compatible servers; ``api_key`` is the secret value and
            is only ever handed to LiteLLM (never logged, never in a row).
        num_retries / retry_backoff: retries of one model on 429, 5xx, timeouts and connection
            errors, waiting ``retry_backoff * 2**(n-1)`` s (or the server's Retry-After if shorter).
        timeout: seconds per request. max_tokens: completion tokens per request.
        max_iterations: tool-calling rounds per agent before the final answer is forced.
        input_cost_per_token / output_cost_per_token: USD prices used when LiteLLM's price map
            does not know a model (``None``: cost unknown, recorded as NULL).
        budget_tokens / budget_usd: per-analysis limits over all passes and stages.
    """

    models: dict[Role, str]
    fallbacks: tuple[str, ...] = ()
    api_base: str | None = None
    api_key: str | None = None
    num_retries: int = 2
    retry_backoff: float = 1.0
    timeout: float = 60.0
    max_tokens: int = 1024
    max_iterations: int = 3
    input_cost_per_token: float | None = None
    output_cost_per_token: float | None = None
    budget_tokens: int = 60_000
    budget_usd: float = 1.0

    def model_for(self, role: Role) -> str | None:
        """The primary model of ``role``, or ``None`` when that role runs deterministically."""
        return self.models.get(role)

    def chain_for(self, role: Role) -> list[str]:
        """``[primary, *fallbacks]`` for ``role`` without repeats; empty when no model."""
        primary = self.model_for(role)
        if primary is None:
            return []
        out = [primary]
        out += [m for m in self.fallbacks if m not in out]
        return out

    def public(self) -> dict[str, Any]:
        """A loggable description (no key)."""
        return {
            "models": {role.value: model for role, model in self.models.items()},
            "fallbacks": list(self.fallbacks),
            "api_base": self.api_base,
            "api_key_set": self.api_key is not None,
        }


def llm_config(*, settings: Settings, override: str | None = None) -> LLMConfig | None:
    """The LLM configuration from ``settings`` (and an optional model ``override`` for all roles).

    Returns ``None`` when no role has a model: the pipeline then runs the deterministic analysts.
    """
    default = override or settings.llm_model
    per_role = {
        Role.QUERY: settings.llm_model_query,
        Role.TECHNICAL: settings.llm_model_technical,
        Role.FUNDAMENTAL: settings.llm_model_fundamental,
        Role.SENTIMENT: settings.llm_model_sentiment,
        Role.SYNTHESIS: settings.llm_model_synthesis,
    }
    models: dict[Role, str] = {}
    for role, specific in per_role.items():
        chosen = override or specific or default
        if chosen and chosen.strip():
            models[role] = chosen.strip()
    if not models:
        return None
    fallbacks = tuple(dict.fromkeys(m.strip() for m in settings.llm_fallbacks.split(",") if m.strip()))
    return LLMConfig(
        models=models,
        fallbacks=fallbacks,
        api_base=settings.llm_api_base,
        api_key=settings.llm_api_key.get_secret_value() if settings.llm_api_key else None,
        num_retries=settings.llm_num_retries,
        retry_backoff=settings.llm_retry_backoff,
        timeout=settings.llm_timeout,
        max_tokens=settings.llm_max_tokens,
        max_iterations=settings.llm_max_iterations,
        input_cost_per_token=settings.llm_input_cost_per_token,
        output_cost_per_token=settings.llm_output_cost_per_token,
        budget_tokens=settings.llm_budget_tokens,
        budget_usd=settings.llm_budget_usd,
    )
