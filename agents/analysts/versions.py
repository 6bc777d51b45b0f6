"""Versions of what authors a recommendation, recorded in every report (``prompt_version``) so the
scorecard can compare results across prompt and rule changes (its breakdown by prompt version).

* **Prompts** (:func:`prompt_version`): a content hash of every instruction text the LLM agents
  are given (each analyst's instructions, the synthesis's, the csp analysts', the grounding
  rules, the line naming the answer's keys and their descriptions, the line that shows an
  options-plan example answer, the context keys shown, the digest sizes, the computed readings'
  line and the code of ``agents.analysts.readings``, and the code that puts the messages
  together: :func:`context_code`) and
  the JSON schemas of their answers (as validated, and the bounded forms sent as
  ``response_format``, the csp analysts' too). A content
  hash rather than a hand-kept number: a hand-kept number is forgotten on the edit that
  matters, a hash cannot be; any edit of a prompt, even a comma, is a new version. Written
  ``prompts-<10 hex>``; prompt versions already written into stored reports keep their label
  through a reorganisation of the code that changes no message (:data:`PROMPT_LABELS`).
* **Rules** (:func:`rules_version`): a hash of the deterministic scorer's code
  (``agents/quant/scorer.py``: its weights, thresholds and rule code), so a deterministic
  recommendation names the rule set that made it. Written ``rules-<10 hex>``. The hash is taken
  over the module's syntax tree without docstrings and import statements: editing the prose or
  moving a module is not a new rule set, changing a weight, threshold or rule is. Rule sets
  already written into stored reports keep their label (:data:`RULE_SET_LABELS`).

Both are stable across processes and machines (sha256 of UTF-8 text) and computed once per
process.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
from collections.abc import Callable
from functools import cache
from typing import Any

# Labels already written into stored reports, by rule-set fingerprint (:func:`rules_fingerprint`).
# Until the fingerprint was taken over the code alone, the label hashed the scorer's whole source
# text; this keeps that rule set's label on the reports it wrote (and on the regression
# snapshots) through edits of prose. A changed rule gets ``rules-<its fingerprint>``.
# ``rules-4dd7af96cf``: the trend rules voting once as a group; the calibration artifact
# (agents/quant/calibration/calibration.json) keys its rows by this label. ``9201880706``: the
# same rules with ``score_technical`` split into one function per rule and the aggregate (no
# weight, threshold or statement changed: the regression snapshots are byte-identical).
# ``698ca4e766``: the same rules with their statements printing numbers as the report's tables
# do (``core.display``: "SMA 483.20" for 483.1986); no weight, threshold or vote changed, so
# every score and signal is the one the calibration rows were measured on (the regression
# snapshots differ in the statements' number formats only).
RULE_SET_LABELS: dict[str, str] = {
    "f9569fafdd": "rules-3677c5fe86",
    "4dd7af96cf": "rules-4dd7af96cf",
    "9201880706": "rules-4dd7af96cf",
    "698ca4e766": "rules-4dd7af96cf",
}


# Prompt versions already written into stored reports, by the digest :func:`prompt_version`
# takes. The code that builds the messages was split into the ``agents.analysts.llm_agents``
# package (ask, check, correct, accept) without changing one message (the requests sent and the
# reports written, compared before and after on the scripted server's analyses); its reports,
# and the calibration rows keyed by them, keep the label they had. A changed message still
# gets ``prompts-<its digest>``.
PROMPT_LABELS: dict[str, str] = {
    "0cff37f3c9": "prompts-ed60c40ee4",
}


def _digest(parts: list[str]) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:10]


def _code_only(tree: ast.Module) -> ast.Module:
    """``tree`` without docstrings (module, class, function) and import statements."""

    def is_docstring(stmt: ast.stmt) -> bool:
        return (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        )

    def strip(body: list[ast.stmt]) -> list[ast.stmt]:
        kept = [stmt for stmt in body if not isinstance(stmt, ast.Import | ast.ImportFrom)]
        return kept[1:] if kept and is_docstring(kept[0]) else kept

    tree.body = strip(tree.body)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            node.body = strip(node.body) or [ast.Pass()]
    return tree


def rules_fingerprint(source: str) -> str:
    """10 hex digits of sha256 over the code of ``source`` (Python module text): its syntax tree
    without docstrings or imports (``ast.dump``, no line numbers), so comments, docstrings and
    import paths do not count. Raises SyntaxError when ``source`` is not Python."""
    return _digest([ast.dump(_code_only(ast.parse(source)))])


@cache
def prompt_version() -> str:
    """``prompts-<10 hex>``: the hash of the LLM agents' instructions and answer schemas.
    Imports the analysts' modules (the LLM path; not on the deterministic path). Raises nothing."""
    from agents.analysts import llm_agents, models, option_llm, prompts, readings, views

    parts = [
        llm_agents.GROUNDING_RULES,
        llm_agents.SYNTHESIS_INSTRUCTIONS,
        prompts.ANSWER_SHAPE,
        prompts.ANSWER_KEYS,
    ]
    parts += [spec.instructions for spec in llm_agents.ANALYSTS]
    parts += [
        option_llm.CHART_INSTRUCTIONS,
        option_llm.OPTIONS_INSTRUCTIONS,
        option_llm.RESEARCH_INSTRUCTIONS,
    ]
    answer_models: tuple[type[models.BaseModel], ...] = (
        *models.AGENT_MODELS.values(),
        models.ChartDecision,
        models.OptionsDecision,
        models.ResearchDecision,
    )
    parts += [json.dumps(m.model_json_schema(), sort_keys=True) for m in answer_models]
    # the bounded forms sent as response_format, and the context keys the analysts are shown
    parts += [json.dumps(prompts.grammar_schema(m), sort_keys=True) for m in answer_models]
    parts += [
        ",".join(prompts.TECHNICAL_KEYS),
        ",".join(prompts.QUOTE_KEYS),
        json.dumps(prompts.QUOTE_SHOWN, sort_keys=True),
        ",".join(prompts.FUNDAMENTAL_KEYS),
    ]
    parts += [f"headlines {prompts.DIGEST_HEADLINES} x {prompts.DIGEST_TITLE_MAX}"]
    parts += [json.dumps(prompts.FIELD_HINTS, sort_keys=True), str(prompts.MIN_READING_WORDS)]
    # the computed readings shown next to the numbers: their line and the code that words them
    parts += [prompts.READINGS_LINE, rules_fingerprint(inspect.getsource(readings))]
    # the rules of thumb whose texts the fundamental readings print
    parts += [json.dumps(views.FUNDAMENTAL_RULES)]
    # the code that puts the messages together (what each analyst is shown, in which order,
    # when one is not asked): a change there changes what the model reads as surely as a
    # changed instruction does
    parts += [rules_fingerprint(inspect.getsource(fn)) for fn in context_code()]
    digest = _digest(parts)
    return PROMPT_LABELS.get(digest, f"prompts-{digest}")


def context_code() -> tuple[Callable[..., Any], ...]:
    """The functions whose code builds the analysts', the synthesis's and the correction
    round's messages (``agents.analysts.llm_agents``: the analysts' and the synthesis's runs, their
    contexts, the correction request; and the digests, keys line and schemas of
    ``agents.analysts.prompts``), hashed into :func:`prompt_version`. The options plan's
    agents (``option_llm``) are covered by their instructions only. Raises nothing."""
    from agents.analysts import prompts
    from agents.analysts.llm_agents import analysts, ask, context, correct, synthesis

    return (
        analysts.run_analysts,
        context.analyst_inputs,
        context.analyst_context,
        synthesis.run_synthesis,
        context.synthesis_context,
        context.scorer_digest,
        context.checked_refs,
        context.judgement,
        ask.compact_for_llm,
        correct.correction_request,
        prompts.short_quote,
        prompts.short_technical,
        prompts.headline_digest,
        prompts.fundamentals_digest,
        prompts.answer_keys,
        prompts._describe,
        prompts.system_prompt,
        prompts.grammar_schema,
        prompts._bound,
        prompts._inline,
    )


@cache
def rules_version() -> str:
    """``rules-<10 hex>``: the hash of the deterministic scorer's source. Raises nothing."""
    from agents.quant import scorer

    fingerprint = rules_fingerprint(inspect.getsource(scorer))
    return RULE_SET_LABELS.get(fingerprint, f"rules-{fingerprint}")
