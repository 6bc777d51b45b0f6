"""What LLM calls cost and used: the totals of ``llm_calls`` rows, and the USD price of one
answer (LiteLLM's local price map as shipped, else the per-token prices of the settings, else
unknown: never a guessed 0)."""

from __future__ import annotations

import logging
from typing import Any

from agents.llm.config import LLMConfig

logger = logging.getLogger("finagent.llm")


def usage_of_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals of ``llm_calls`` rows (one per attempt).

    Returns ``{calls, failed_calls, attempts, failed_attempts, prompt_tokens, completion_tokens,
    cost_usd}``: ``calls`` = logical calls answered (a success row), ``failed_calls`` = logical
    calls without one, ``attempts`` = rows, ``failed_attempts`` = error rows; tokens of every row
    the provider reported; ``cost_usd`` the sum of the answered calls' costs, ``None``
    ("unknown", never a guessed 0) when one of them has no price or when attempts failed and
    nothing was answered (a provider may bill a timed-out request; we cannot know).
    """
    ok = [r for r in rows if r["status"] == "success"]
    answered = {r["llm_call_id"] for r in ok}
    all_calls = {r["llm_call_id"] for r in rows}
    costs = [r["cost_usd"] for r in ok]
    unknown = any(c is None for c in costs) or (not ok and len(rows) > 0)
    return {
        "calls": len(answered),
        "failed_calls": len(all_calls - answered),
        "attempts": len(rows),
        "failed_attempts": len(rows) - len(ok),
        "prompt_tokens": sum(r["prompt_tokens"] or 0 for r in rows),
        "completion_tokens": sum(r["completion_tokens"] or 0 for r in rows),
        "cost_usd": None if unknown else round(sum(c or 0.0 for c in costs), 6),
    }


def combine_usage(*parts: dict[str, Any]) -> dict[str, Any]:
    """Sum usage dicts (:func:`usage_of_rows` keys; missing counters count 0); ``cost_usd`` is
    ``None`` when any part's is."""
    keys = ("calls", "failed_calls", "attempts", "failed_attempts", "prompt_tokens", "completion_tokens")
    out: dict[str, Any] = {k: sum(int(p.get(k) or 0) for p in parts) for k in keys}
    costs = [p.get("cost_usd", 0.0) for p in parts]
    out["cost_usd"] = None if any(c is None for c in costs) else round(sum(c or 0.0 for c in costs), 6)
    return out


def prices(config: LLMConfig, model: str) -> tuple[float, float] | None:
    """(USD per prompt token, per completion token) from LiteLLM's local map, else settings."""
    import litellm  # lazy (see module docstring)

    if known_model(litellm, model):
        prices = price_map(litellm)
        info = prices.get(model) or prices[model.split("/", 1)[-1]]
        return float(info["input_cost_per_token"]), float(info.get("output_cost_per_token") or 0.0)
    if config.input_cost_per_token is not None and config.output_cost_per_token is not None:
        return config.input_cost_per_token, config.output_cost_per_token
    return None


_PRICE_MAP: dict[str, Any] | None = None


def price_map(litellm: Any) -> dict[str, Any]:
    """LiteLLM's local price map as shipped, copied before any Router exists: a Router registers
    its deployments in ``litellm.model_cost`` (with zero prices for unknown models), which would
    turn an unknown price into a wrong 0.0."""
    global _PRICE_MAP
    if _PRICE_MAP is None:
        _PRICE_MAP = dict(getattr(litellm, "model_cost", {}) or {})
    return _PRICE_MAP


def known_model(litellm: Any, model: str) -> bool:
    """True when LiteLLM's shipped price map has a per-token input price for ``model``."""
    cost_map = price_map(litellm)
    info = cost_map.get(model) or cost_map.get(model.split("/", 1)[-1]) or {}
    return info.get("input_cost_per_token") is not None


def cost_of(
    litellm: Any, config: LLMConfig, *, response: Any, model: str, prompt: int | None, out: int | None
) -> float | None:
    """The USD cost of ``response`` from ``model`` (``prompt``/``out``: its prompt and completion
    tokens): LiteLLM's figure for a model of its shipped price map, else the per-token prices
    of ``config``, else ``None`` (unknown). Raises nothing."""
    # completion_cost raises for some unknown models and returns 0.0 for others (an unknown
    # "openai/<local>" model): only a model present in the price map gets LiteLLM's figure.
    if known_model(litellm, model):
        try:
            value = litellm.completion_cost(completion_response=response, model=model)
            if value is not None:
                return round(float(value), 8)
        except Exception:  # unknown model prices raise: record NULL, never crash on pricing
            logger.debug("completion_cost failed for %s", model, exc_info=True)
    if config.input_cost_per_token is None or config.output_cost_per_token is None or prompt is None:
        return None
    return round(prompt * config.input_cost_per_token + (out or 0) * config.output_cost_per_token, 8)
