"""Option plan analyses through a real worker: csv provider on the stocknet bars, the Lean GOOG
chain of 2015-12-24, Redis broker, PostgreSQL."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from db import repo
from db.engine import get_engine
from tests.conftest import SHARED_DATA
from tests.integration.conftest import Service
from tests.llm.responders import INVENTED
from tests.llm.server import Reply, ScriptedLLM, chat


def test_goog_csp_through_a_worker_ends_in_a_cited_rejection(
    service: Service, start_worker, stocknet_dir: Path
) -> None:
    options = SHARED_DATA / "options"
    extra = {
        "FINAGENT_DATA_PROVIDER": "csv",
        "FINAGENT_DATA_DIR": str(stocknet_dir),
        "FINAGENT_OPTIONS_DIR": str(options),
    }
    service.env.update(extra)
    start_worker()
    report = service.analyze_json("GOOG", "--type", "csp", "--as-of", "2015-12-24")
    assert report["status"] == "done"
    csp = report["csp"]
    # the screen's pick is the liquid 725 put; one contract secures 72,500 USD, over the 20 %
    # per-name cap of the default 100,000 USD paper account
    assert csp["status"] == "rejected" and csp["rejected_by"] == "sizing"
    assert csp["suggestion"]["contract"] == "GOOG160115P00725000"
    reason = csp["reasons"][0]
    assert "over the 20 % per-name cap" in reason["text"]
    ref = reason["source_refs"][0]
    assert ref.startswith("get_portfolio_") and ref in report["source_refs"]
    engine = create_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"])
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT tool, stage, status FROM tool_calls WHERE tool_call_id = :id"), {"id": ref}
            ).all()
    finally:
        engine.dispose()
    assert [tuple(r) for r in rows] == [("get_portfolio", "analysis", "success")]
    proc = service.cli("show", report["analysis_id"])
    assert proc.returncode == 0 and "## Cash-secured put" in proc.stdout
    assert "Rejected by the sizing analyst." in proc.stdout
    assert "The screen's pick, which does not fit the account: GOOG160115P00725000" in proc.stdout


def test_spy_with_a_chain_but_no_history_through_a_worker_is_a_cited_chart_rejection(
    service: Service, start_worker, stocknet_dir: Path
) -> None:
    # the CBOE SPY chain of 2025-05-16 exists; the stocknet folder has no SPY.csv (docs/design.md,
    # "Option plan": no price history to measure HV and support → the chart analyst refuses, NO_DATA)
    service.env.update(
        {
            "FINAGENT_DATA_PROVIDER": "csv",
            "FINAGENT_DATA_DIR": str(stocknet_dir),
            "FINAGENT_OPTIONS_DIR": str(SHARED_DATA / "options"),
        }
    )
    start_worker()
    report = service.analyze_json("SPY", "--type", "csp", "--as-of", "2025-05-16")
    assert report["status"] == "done"
    csp = report["csp"]
    assert (csp["status"], csp["rejected_by"]) == ("rejected", "chart")
    (reason,) = csp["reasons"]
    assert reason["text"].startswith("NO_DATA: no price history") and "SPY" in reason["text"]
    chain_ref, ref = reason["source_refs"]
    engine = create_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"])
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT tool, tool_call_id, status FROM tool_calls WHERE analysis_id = :id"),
                {"id": report["analysis_id"]},
            ).all()
    finally:
        engine.dispose()
    # two calls, both cited: the failed quote and the chain of that day (its parity spot is stated)
    assert sorted(tuple(r) for r in rows) == [
        ("get_option_chain", chain_ref, "success"),
        ("get_stock_data", ref, "error"),
    ]


# -- the LLM chart and research analysts through a real worker ---------------------------------


_CONTEXT_RE = re.compile(r"tool_call_ids (\[[^\]]*\])\): (\{.*\})\s*$", re.S)


@dataclass
class CspPlayer:
    """Plays the csp chart and research analysts from their prompts (the context refs and the
    computed view are in the user message). ``chart``: ``pass_invent`` (a statement copying the
    close and the nearest support, plus one with an invented number) or ``reject`` (citing the
    support/resistance output); the research analyst rejects, citing the earnings entry."""

    chart: str = "pass_invent"
    agents: list[str] = field(default_factory=list)

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        last = str(messages[-1].get("content") or "")
        if last.startswith("These numbers match no tool output"):
            return chat(str(messages[-2]["content"]))  # keeps the invented number: dropped
        system, user = str(messages[0]["content"]), str(messages[1]["content"])
        refs_text, view_text = _CONTEXT_RE.search(user).groups()  # type: ignore[union-attr]
        refs = json.loads(refs_text.replace("'", '"'))
        if "chart analyst of a cash-secured put" in system:
            self.agents.append("chart")
            view = json.loads(view_text)
            tech = next(r for r in refs if r.startswith("technical_indicators_"))
            sr = next(r for r in refs if r.startswith("find_support_resistance_"))
            if self.chart == "reject":
                answer = {
                    "recommendation": "reject",
                    "trend_direction": "sideways",
                    "trend_quality": "weak",
                    "extension_risk": "high",
                    "rationale": [
                        {"text": "The price is stretched far above its support.", "source_refs": [sr]}
                    ],
                }
            else:
                close, support = view["close"], view["nearest_support"]["price"]
                answer = {"recommendation": "pass", "trend_direction": "up", "trend_quality": "strong",
                          "extension_risk": "low",
                          "rationale": [
                              {"text": f"The close {close} holds above the nearest support {support}.",
                               "source_refs": [tech, sr]},
                              {"text": f"A bounce to {INVENTED} is due.", "source_refs": [tech]},
                          ]}  # fmt: skip
        else:
            self.agents.append("research")
            earnings = next(r for r in refs if r.startswith("get_earnings_dates_"))
            answer = {"recommendation": "reject", "earnings_risk": "high", "news_risk": "unknown",
                      "rationale": [{"text": "The report season makes a gap before expiry likely.",
                                     "source_refs": [earnings]}]}  # fmt: skip
        return chat(json.dumps(answer))


def test_llm_chart_and_research_analysts_through_a_worker(
    service: Service, start_worker, stocknet_dir: Path, llm_server: ScriptedLLM
) -> None:
    player = CspPlayer()
    llm_server.responder = player
    service.env.update(
        {
            "FINAGENT_DATA_PROVIDER": "csv",
            "FINAGENT_DATA_DIR": str(stocknet_dir),
            # the rules' screen picks a put on AAPL 2014-06-06 with the default floors
            "FINAGENT_OPTIONS_DIR": str(SHARED_DATA / "options"),
        }
    )
    start_worker(
        FINAGENT_LLM_MODEL_CHART="openai/scripted",
        FINAGENT_LLM_MODEL_RESEARCH="openai/scripted",
        FINAGENT_LLM_API_BASE=llm_server.url,
        FINAGENT_LLM_NUM_RETRIES="0",
    )

    report = service.analyze_json("AAPL", "--type", "csp", "--as-of", "2014-06-06")
    assert report["status"] == "done"
    csp = report["csp"]
    # chart: the model's pass stands with its grounded statement, the invented one dropped;
    # options: the rules (no model for the role); research: the model's cited reject ends it
    assert csp["decided_by"] == {"chart": "llm", "options": "deterministic", "research": "llm"}
    assert (csp["status"], csp["rejected_by"]) == ("rejected", "research")
    grounding = csp["chart"]["llm"]["grounding"]
    assert [d["numbers"] for d in grounding["dropped"]] == [[INVENTED]]
    assert INVENTED not in json.dumps(csp["chart"]["reasons"]) and INVENTED not in json.dumps(csp["reasons"])
    (reason,) = csp["reasons"]
    assert (
        reason["source_refs"][0].startswith("get_earnings_dates_")
        and reason["source_refs"][0] in report["source_refs"]
    )
    assert player.agents == ["chart", "research"]
    engine = get_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"])
    rows = repo.get_llm_calls(engine=engine, analysis_id=report["analysis_id"])
    assert [r["agent"] for r in rows] == ["chart", "chart.correction", "research"]
    assert all(r["stage"] == "analysis" and r["status"] == "success" for r in rows)

    markdown = service.cli("show", report["analysis_id"]).stdout
    assert "- Decided by: chart: llm (" in markdown and "options: deterministic, research: llm (" in markdown
    assert (
        f"- Dropped from the chart analyst (numbers matching no cited tool output): 'A bounce to {INVENTED}"
        in markdown
    )

    player.chart = "reject"
    report = service.analyze_json("GOOG", "--type", "csp", "--as-of", "2015-12-24")
    csp = report["csp"]
    assert report["status"] == "done" and (csp["status"], csp["rejected_by"]) == ("rejected", "chart")
    assert csp["decided_by"]["chart"] == "llm" and "options" not in csp
    assert csp["reasons"][0]["source_refs"][0].startswith("find_support_resistance_")
    assert player.agents == ["chart", "research", "chart"]  # no research after a chart reject
    proc = service.cli("show", report["analysis_id"])
    assert "Rejected by the chart analyst." in proc.stdout


def test_covered_call_with_a_given_cost_basis_replays_byte_identical(
    service: Service, start_worker, stocknet_dir: Path
) -> None:
    """A covered call's cost basis is an input of the plan (the strike floor): a replay must run
    with the basis the analysis ran with, or its report would differ."""
    from tests.integration.test_replay import NO_SERVICES

    service.env.update(
        {
            "FINAGENT_DATA_PROVIDER": "csv",
            "FINAGENT_DATA_DIR": str(stocknet_dir),
            "FINAGENT_OPTIONS_DIR": str(SHARED_DATA / "options"),
            "FINAGENT_OPTIONS_DIVIDENDS_DIR": str(SHARED_DATA / "ohlcv" / "lean" / "factor_files"),
        }
    )
    start_worker()
    report = service.analyze_json(
        "AAPL", "--type", "covered_call", "--cost-basis", "600", "--as-of", "2014-06-06"
    )
    assert report["status"] == "done"
    proc = service.cli("replay", report["analysis_id"], extra_env=NO_SERVICES)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.startswith("identical sha256=")


def test_put_spread_end_to_end_through_a_worker(service: Service, start_worker, stocknet_dir: Path) -> None:
    """``finagent analyze AAPL --type put_spread --plan-option width=10``: the plan registered by
    its own package runs through the worker; its record is under ``put_spread`` in the JSON, its
    section and verdict in the report, and its chart draws both strikes."""
    service.env.update(
        {
            "FINAGENT_DATA_PROVIDER": "csv",
            "FINAGENT_DATA_DIR": str(stocknet_dir),
            "FINAGENT_OPTIONS_DIR": str(SHARED_DATA / "options"),
        }
    )
    start_worker()
    report = service.analyze_json(
        "AAPL", "--type", "put_spread", "--as-of", "2014-06-06", "--plan-option", "width=10"
    )
    assert report["status"] == "done"
    spread = report["put_spread"]
    assert spread["status"] == "suggested", spread["reasons"]
    assert spread["spread"]["width"] == 10 and spread["sizing"]["contracts"] >= 1
    assert "csp" in report and report["csp"] is None  # the other plans' keys as before
    shown = service.cli("show", report["analysis_id"])
    assert "**Put credit spread: sell " in shown.stdout and "## Put credit spread" in shown.stdout
    chart = service.cli("chart", report["analysis_id"])
    assert chart.returncode == 0 and chart.stdout.strip().endswith(".png")
