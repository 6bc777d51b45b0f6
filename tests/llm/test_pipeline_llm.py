"""The whole chain in embedded mode (in-process worker, SQLite) with the scripted model: the CLI
as a subprocess, like a user runs it. Assertions are on structure, flow and bookkeeping, never on
a BUY/SELL opinion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from db import repo
from db.engine import get_engine
from tests.conftest import REPO_ROOT
from tests.llm.responders import INVENTED, AgentPlayer
from tests.llm.server import ScriptedLLM

FINAGENT = str(Path(sys.executable).with_name("finagent"))


def _run(tmp: Path, server: ScriptedLLM | None, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    base.update(
        PYTHONPATH=str(REPO_ROOT),
        FINAGENT_SERVICE_STATE_DIR=str(tmp / "state"),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
    )
    if server is not None:
        base.update(
            FINAGENT_LLM_MODEL="openai/scripted",
            FINAGENT_LLM_API_BASE=server.url,
            FINAGENT_LLM_API_KEY="sk-x1",
        )
    base.update(env)
    return subprocess.run(
        [FINAGENT, "analyze", *args],
        env=base,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def _json(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _llm_rows(tmp: Path, analysis_id: str) -> list[dict[str, Any]]:
    engine = get_engine(f"sqlite:///{tmp / 'state' / 'finagent.sqlite3'}")
    return repo.get_llm_calls(engine=engine, analysis_id=analysis_id)


def test_llm_chain_records_calls_tokens_and_a_clean_grounding(
    tmp_path: Path, llm_server: ScriptedLLM
) -> None:
    player = AgentPlayer()
    llm_server.responder = player

    out = _json(_run(tmp_path, llm_server, "AAPL", "--as-of", "2012-06-29", "--json"))

    assert out["status"] == "done" and out["author"] == {"kind": "llm", "model": "openai/scripted"}
    assert out["analysts"]["technical"]["source"] == "llm"
    assert out["analysts"]["sentiment"]["source"] == "skipped"  # no news source configured
    assert out["grounding"]["unverified"] == [] and out["grounding"]["numbers_checked"] >= 2
    assert "correction" not in out["grounding"]
    rows = _llm_rows(tmp_path, out["analysis_id"])
    # technical: tool call + answer; fundamental (the earnings calendar is a fundamentals source
    # with no configuration): one answer without numbers; synthesis
    assert out["analysts"]["fundamental"]["source"] == "llm"
    assert player.calls == {"technical": 2, "fundamental": 1, "synthesis": 1}
    assert out["llm_calls"] == len(rows) == 4
    assert {r["stage"] for r in rows} == {"analysis", "recommendation"}
    assert out["tokens"]["total"] == sum(r["prompt_tokens"] + r["completion_tokens"] for r in rows)
    assert out["cost_usd"] is None  # a local model: price unknown, never guessed
    assert all(r["status"] == "success" and r["latency_ms"] >= 0 for r in rows)
    assert "sk-x1" not in json.dumps(rows, default=str)


def _show(tmp: Path, analysis_id: str) -> str:
    """The Markdown report of ``analysis_id`` (``finagent show``), as a user reads it."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    base.update(PYTHONPATH=str(REPO_ROOT), FINAGENT_SERVICE_STATE_DIR=str(tmp / "state"))
    proc = subprocess.run(
        [FINAGENT, "show", analysis_id], env=base, cwd=tmp, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_an_invented_number_gets_one_correction_round(tmp_path: Path, llm_server: ScriptedLLM) -> None:
    llm_server.responder = AgentPlayer(invent_number=True)

    out = _json(_run(tmp_path, llm_server, "AAPL", "--as-of", "2012-06-29", "--json"))

    assert out["grounding"]["corrections"] == {"synthesis": "fixed"}
    assert "dropped" not in out["grounding"] and out["grounding"]["unverified"] == []
    assert out["author"]["kind"] == "llm" and INVENTED not in json.dumps(out["rationale"])
    agents = [r["agent"] for r in _llm_rows(tmp_path, out["analysis_id"])]
    assert agents.count("synthesis.correction") == 1 and "grounding_correction" not in agents


def test_a_number_still_invented_after_correction_is_dropped_and_listed(
    tmp_path: Path, llm_server: ScriptedLLM
) -> None:
    llm_server.responder = AgentPlayer(invent_number=True, fix_in_correction=False)

    out = _json(_run(tmp_path, llm_server, "AAPL", "--as-of", "2012-06-29", "--json"))

    # the only statement held the number: dropped, nothing left, so the scorer's result stands
    assert out["status"] == "done" and out["author"] == {"kind": "deterministic"}
    assert out["grounding"]["corrections"] == {"synthesis": "unfixed"}
    assert [d["numbers"] for d in out["grounding"]["dropped"]] == [[INVENTED]]
    assert out["grounding"]["unverified"] == [] and INVENTED not in json.dumps(out["rationale"])
    assert any(e["code"] == "LLM_UNGROUNDED" for e in out["errors"])
    report = _show(tmp_path, out["analysis_id"])
    headline = next(line for line in report.splitlines() if line.startswith("**Signal"))
    assert headline.startswith(f"**Signal: {out['signal']}**") and INVENTED not in headline
    assert f"dropped from synthesis.rationale: {INVENTED} match no cited tool output" in report


def test_a_trend_label_against_the_indicators_is_corrected_once_then_replaced_and_reported(
    tmp_path: Path, llm_server: ScriptedLLM
) -> None:
    # AAPL 2012-06-29 (embedded): the close 584.0 is above both the fifty- and the
    # two-hundred-day SMA, so a trend "down" and a support above the close say the opposite
    player = AgentPlayer(technical_labels={"trend_direction": "down", "support_levels": [600.0]})
    llm_server.responder = player

    out = _json(_run(tmp_path, llm_server, "AAPL", "--as-of", "2012-06-29", "--json"))

    technical = out["analysts"]["technical"]
    assert technical["source"] == "llm" and technical["result"]["trend_direction"] == "up"
    assert technical["result"]["support_levels"] == []
    assert out["grounding"]["corrections"]["technical"] == "unfixed"
    request = player.bodies["correction"][0]["messages"][-1]["content"]
    assert "technical.trend_direction: trend_direction down (the close 584" in request
    parts = {d["part"]: d for d in out["grounding"]["dropped"]}
    assert parts["technical.trend_direction"]["text"] == "down"
    assert parts["technical.trend_direction"]["numbers"][0].endswith("; the data's up is used")
    assert parts["technical.support_levels"]["numbers"] == ["600 above the close 584: no support"]
    report = _show(tmp_path, out["analysis_id"])
    assert "dropped from technical.trend_direction: trend_direction down (the close 584" in report
    assert "the data's up is used: the cited tool outputs say otherwise" in report


def test_the_issue_case_an_invented_fair_value_over_a_scorer_sell_never_heads_the_report(
    tmp_path: Path, llm_server: ScriptedLLM
) -> None:
    # 2012-12-14: the scorer says SELL (score -0.5714, hand-checked with `finagent analyze`)
    player = AgentPlayer(
        synthesis_signal="BUY",
        synthesis_statements=(f"Fair value is {INVENTED} per share.",),
        bearish_correction=True,
    )
    llm_server.responder = player

    out = _json(_run(tmp_path, llm_server, "AAPL", "--as-of", "2012-12-14", "--json"))

    # the scorer's SELL stands as the author's signal; with no calibration evidence before 2013
    # the published signal abstains to HOLD, and never to the invented BUY
    assert out["details"]["raw_signal"] == "SELL" and out["author"] == {"kind": "deterministic"}
    assert "raw_signal" not in out and "confidence" not in out
    assert out["signal"] == "HOLD" and out["probability"]["abstained"] is True
    check = out["grounding"]["signal_check"]
    assert check["signal"] == "BUY" and check["accepted"] is False and check["support"] < 0
    assert all(vote < 0 for vote in check["restated"].values()) and check["restated"]
    assert out["analysts"]["synthesis"]["source"] == "rejected"
    assert [e["code"] for e in out["errors"]] == ["LLM_SIGNAL_UNSUPPORTED"]
    # the correction round answered BUY with only the scorer's bearish statements
    correction = json.loads(player.bodies["correction"][0]["messages"][-2]["content"])
    assert correction["signal"] == "BUY" and INVENTED in json.dumps(correction)
    report = _show(tmp_path, out["analysis_id"])
    headline = next(line for line in report.splitlines() if line.startswith("**Signal"))
    assert headline.startswith("**Signal: HOLD**: No evidence that any signal here predicts AAPL")
    assert "BUY" not in headline and "SELL" not in headline and "confidence" not in headline
    details = report.split("## Details of the direction call")[1].split("## Sources")[0]
    assert "- Raw rule score -0.57 (SELL, rule set" in details
    assert "- The LLM synthesis's BUY was not accepted" in details
    assert INVENTED not in report


def test_an_invented_number_never_reaches_a_later_prompt(tmp_path: Path, llm_server: ScriptedLLM) -> None:
    player = AgentPlayer(invent_in_technical=True, fix_in_correction=False)
    llm_server.responder = player

    out = _json(_run(tmp_path, llm_server, "AAPL", "--as-of", "2012-06-29", "--json"))

    assert out["analysts"]["technical"]["source"] == "llm"
    assert INVENTED not in out["analysts"]["technical"]["result"]["notes"]
    assert out["grounding"]["dropped"] == [
        {"part": "technical.notes", "text": f"Price target {INVENTED}.", "numbers": [INVENTED]}
    ]
    assert player.calls["correction"] == 1  # the technical analyst's one correction round
    synthesis_prompts = json.dumps(player.bodies["synthesis"])
    assert INVENTED not in synthesis_prompts and "RSI(14) is" in synthesis_prompts


def test_a_correction_skipped_for_the_budget_says_what_really_happened(
    tmp_path: Path, llm_server: ScriptedLLM
) -> None:
    # the synthesis reply reports 59,000 prompt tokens: the correction would exceed 60,000
    llm_server.responder = AgentPlayer(
        synthesis_statements=("RSI(14) stands at {rsi}.", f"Fair value is {INVENTED} per share."),
        synthesis_prompt_tokens=59_000,
    )

    out = _json(_run(tmp_path, llm_server, "AAPL", "--as-of", "2012-06-29", "--json"))

    assert out["grounding"]["corrections"] == {"synthesis": "skipped"}
    assert [d["numbers"] for d in out["grounding"]["dropped"]] == [[INVENTED]]
    assert out["author"]["kind"] == "llm" and len(out["rationale"]) == 1  # the verified statement
    (error,) = [e for e in out["errors"] if e["code"] == "LLM_BUDGET_EXHAUSTED"]
    assert "correction skipped; 1 statement(s) with unverified numbers dropped" in error["message"]
    assert "the deterministic result was used" not in error["message"]


def test_malformed_json_after_repair_falls_back_to_the_deterministic_analyst(
    tmp_path: Path, llm_server: ScriptedLLM
) -> None:
    llm_server.responder = AgentPlayer(malformed_technical=True)

    proc = _run(tmp_path, llm_server, "AAPL", "--as-of", "2012-06-29")

    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "LLM_INVALID_OUTPUT" in proc.stdout and "technical** (deterministic)" in proc.stdout
    out = _json(_run(tmp_path, llm_server, "AAPL", "--as-of", "2012-06-29", "--json"))
    assert out["analysts"]["technical"]["source"] == "deterministic"
    assert any(e["code"] == "LLM_INVALID_OUTPUT" for e in out["errors"])


def test_an_exhausted_budget_finishes_with_what_it_has(tmp_path: Path, llm_server: ScriptedLLM) -> None:
    llm_server.responder = AgentPlayer()

    out = _json(
        _run(
            tmp_path, llm_server, "AAPL", "--as-of", "2012-06-29", "--json", FINAGENT_LLM_BUDGET_TOKENS="1500"
        )
    )

    assert out["status"] == "done" and out["signal"] in {"BUY", "HOLD", "SELL"}
    assert any(e["code"] == "LLM_BUDGET_EXHAUSTED" for e in out["errors"])
    assert out["author"]["kind"] == "deterministic" and out["tokens"]["total"] <= 1500


def test_free_text_is_resolved_and_an_unresolvable_query_exits_2(
    tmp_path: Path, llm_server: ScriptedLLM
) -> None:
    llm_server.responder = AgentPlayer()

    out = _json(_run(tmp_path, None, "should I buy Apple after its split?", "--json"))
    assert out["symbol"] == "AAPL" and out["llm_calls"] == 0

    bad = _run(tmp_path, None, "tell me about bananas")
    assert bad.returncode == 2 and "no known ticker" in bad.stderr and bad.stdout == ""


def test_llm_flag_sets_the_model_for_the_analysis(tmp_path: Path, llm_server: ScriptedLLM) -> None:
    llm_server.responder = AgentPlayer()

    out = _json(
        _run(
            tmp_path,
            None,
            "what about Microsoft?",
            "--llm",
            "openai/flagged",
            "--json",
            FINAGENT_LLM_API_BASE=llm_server.url,
        )
    )

    # the scripted query model always answers AAPL; the text names Microsoft, so AAPL is refused
    assert out["symbol"] == "MSFT" and out["analysis_type"] == "composite"
    assert set(llm_server.models_called()) == {"flagged"}
    rows = _llm_rows(tmp_path, out["analysis_id"])
    assert rows[0]["agent"] == "parse_query" and rows[0]["analysis_id"] == out["analysis_id"]
