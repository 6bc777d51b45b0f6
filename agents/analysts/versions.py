"""Versions of what authors a recommendation, recorded in every report (``prompt_version``) so the
scorecard can compare results across prompt and rule changes (its breakdown by prompt version).

* **Prompts** (:func:`prompt_version`): a content hash of every instruction text the LLM agents
  are given (each analyst's instructions, the synthesis's, the csp analysts', the grounding
  rules) and the JSON schemas of their answers. A content hash rather than a hand-kept number:
  a hand-kept number is forgotten on the edit that matters, a hash cannot be; any edit of a
  prompt, even a comma, is a new version. Written ``prompts-<10 hex>``.
* **Rules** (:func:`rules_version`): a hash of the deterministic scorer's source
  (``agents/quant/scorer.py``: its weights, thresholds and rule code), so a deterministic
  recommendation names the rule set that made it. Written ``rules-<10 hex>``.

Both are stable across processes and machines (sha256 of UTF-8 text) and computed once per
process.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from functools import cache


def _digest(parts: list[str]) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:10]


@cache
def prompt_version() -> str:
    """``prompts-<10 hex>``: the hash of the LLM agents' instructions and answer schemas.
    Imports the analysts' modules (the LLM path; not on the deterministic path). Raises nothing."""
    from agents.analysts import csp_llm, llm_agents, models

    parts = [llm_agents.GROUNDING_RULES, llm_agents.SYNTHESIS_INSTRUCTIONS]
    parts += [spec.instructions for spec in llm_agents.ANALYSTS]
    parts += [csp_llm.CHART_INSTRUCTIONS, csp_llm.OPTIONS_INSTRUCTIONS, csp_llm.RESEARCH_INSTRUCTIONS]
    answer_models: tuple[type[models.BaseModel], ...] = (
        *models.AGENT_MODELS.values(),
        models.ChartDecision,
        models.OptionsDecision,
        models.ResearchDecision,
    )
    parts += [json.dumps(m.model_json_schema(), sort_keys=True) for m in answer_models]
    return f"prompts-{_digest(parts)}"


@cache
def rules_version() -> str:
    """``rules-<10 hex>``: the hash of the deterministic scorer's source. Raises nothing."""
    from agents.quant import scorer

    return f"rules-{_digest([inspect.getsource(scorer)])}"
