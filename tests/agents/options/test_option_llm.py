"""The option plan's LLM options analyst against the scripted OpenAI-compatible server, on the real
AAPL chain of 2014-06-06 (the deterministic plan picks the 2014-06-21 620 put there, see
test_option_plan.py): an accepted selection and rejection with citations, an invented number
dropped, unsupported selections (no screen passed it; it fails the plan's own floors after a
screen with looser arguments) and a model failure falling back to the deterministic decision."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from agents.analysts.option_llm import run_option_plan_llm
from agents.analysts.option_plan import OptionPlanInputs
from agents.data.market.csv_folder import CsvFolderProvider
from agents.llm.config import LLMConfig, Role
from agents.llm.session import LLMSession
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from core.settings import Settings
from tests.agents.options.test_option_plan import AAPL_0606, AAPL_EARNINGS_0606, _zones
from tests.llm.server import Reply, ScriptedLLM, chat, error

INVENTED = "987.65"
#: the low of the support zone 622.50-628.90: the max strike a model passes
MAX_STRIKE = 622.5


@dataclass
class OptionsPlayer:
    """Plays the options analyst: asks for calculate_iv_hv and filter_options, then answers
    from their outputs. ``mode``: select | reject | invent | foreign (a contract no screen passed)
    | nocap (screens without ``max_strike`` and picks the highest passing strike) | loose (screens
    with every liquidity floor off, |delta| 0.24-0.30 and DTE up to 21, and picks the 2014-06-27
    622.5 put: 7.1 %
    spread, OI 136, delta −0.251)."""

    mode: str = "select"
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, body: dict[str, Any]) -> Reply:
        self.requests.append(body)
        messages = body["messages"]
        last = str(messages[-1].get("content") or "")
        if last.startswith("These numbers match no tool output"):
            return chat(str(messages[-2]["content"]))  # a model that does not fix it
        tools = [json.loads(m["content"]) for m in messages if m.get("role") == "tool"]
        if not tools:
            screen: dict[str, Any] = {"symbol": "AAPL", "max_strike": MAX_STRIKE, "limit": 4}
            if self.mode == "nocap":  # screens without the support cap
                screen = {"symbol": "AAPL", "limit": 20}
            if self.mode == "loose":  # screens with the floors off
                screen = {
                    "symbol": "AAPL",
                    "max_strike": MAX_STRIKE,
                    "limit": 50,
                    "min_open_interest": 0,
                    "min_volume": 0,
                    "max_spread_pct": 1.0,
                    "min_excess_yield": 0,
                    "delta_min": 0.24,
                    "delta_max": 0.3,
                    "dte_max": 21,
                }
            return chat(
                tool_calls=[
                    ("calculate_iv_hv", {"symbol": "AAPL", "hv_period": 20}),
                    ("filter_options", screen),
                ]
            )
        ivhv = next(t for t in tools if "iv_hv_ratio" in (t.get("data") or {}))
        flt = next(t for t in tools if "passing" in (t.get("data") or {}))
        best = flt["data"]["passing"][0]
        if self.mode == "nocap":  # and picks the highest strike that passed
            best = max(flt["data"]["passing"], key=lambda p: p["strike"])
        if self.mode == "loose":
            best = next(p for p in flt["data"]["passing"] if p["contract"] == "AAPL140627P00622500")
        d = ivhv["data"]
        iv_text = {"text": f"IV {d['iv']} against HV {d['hv']}.", "source_refs": [ivhv["tool_call_id"]]}
        pick = {
            "text": f"Strike {best['strike']} with delta {best['delta']}, weekly ROC {best['weekly_roc']}.",
            "source_refs": [flt["tool_call_id"]],
        }
        answer: dict[str, Any] = {"recommendation": "select", "contract": best["contract"]}
        if self.mode == "reject":
            answer = {"recommendation": "reject", "contract": None, "rationale": [iv_text]}
        else:
            answer["rationale"] = [pick, iv_text]
        if self.mode == "invent":
            answer["rationale"].append(
                {"text": f"Assignment would cost {INVENTED} per share.", "source_refs": [flt["tool_call_id"]]}
            )
        if self.mode == "foreign":
            answer["contract"] = "AAPL140606P00500000"
        return chat(json.dumps(answer))


def _plan(
    tmp_path: Path,
    stocknet: Path,
    options: Path,
    server: ScriptedLLM,
    deadline: float | None = None,
    max_iterations: int = 3,
) -> tuple[Any, LLMSession]:
    ctx = ToolContext(
        settings=Settings(service_state_dir=tmp_path / "state", options_dir=options),
        as_of=date(2014, 6, 6),
        provider=CsvFolderProvider(data_dir=stocknet),
    )
    config = LLMConfig(
        models={Role.OPTIONS: "openai/scripted"},
        api_base=server.url,
        api_key="k",
        num_retries=0,
        max_iterations=max_iterations,
    )
    session = LLMSession(config=config, analysis_id="a-1", stage="analysis", deadline=deadline)
    inputs = OptionPlanInputs(
        symbol="AAPL",
        as_of=ctx.as_of,
        right="put",
        technical=AAPL_0606,
        technical_ref="technical_indicators_x",
        chart=_zones(support=[(622.5, 628.9)]),
        earnings=AAPL_EARNINGS_0606,
        earnings_ref="get_earnings_dates_x",
        run=lambda name, args: run_tool(name=name, arguments=args, ctx=ctx),
        min_iv_forecast=ctx.settings.options.min_iv_hv,
    )
    outcome = run_option_plan_llm(inputs=inputs, ctx=ctx, session=session)
    return outcome, session


def test_an_llm_selection_with_citations_is_used(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path, llm_server: ScriptedLLM
) -> None:
    player = OptionsPlayer()
    llm_server.responder = player
    outcome, _ = _plan(tmp_path, stocknet_dir, options_dir, llm_server)
    record = outcome.value
    assert record["decided_by"] == {"chart": "deterministic", "options": "llm", "research": "deterministic"}
    assert record["status"] == "suggested", record["reasons"]
    llm = record["options"]["llm"]
    assert llm["source"] == "llm" and llm["grounding"]["dropped"] == []
    assert record["suggestion"]["contract"] == llm["result"]["contract"]
    assert record["suggestion"]["strike"] <= MAX_STRIKE
    # the model's own tool calls are recorded and cited by its reasons
    own = [c.envelope.tool_call_id for c in outcome.tool_calls if c.name == "filter_options"]
    assert len(own) == 2  # the deterministic screen's and the model's
    assert any(own[1] in r["source_refs"] for r in record["reasons"])
    assert outcome.errors == ()


def test_an_llm_rejection_with_citations_is_used(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path, llm_server: ScriptedLLM
) -> None:
    llm_server.responder = OptionsPlayer(mode="reject")
    outcome, _ = _plan(tmp_path, stocknet_dir, options_dir, llm_server)
    record = outcome.value
    # the deterministic plan suggests a put that day; the model's cited rejection decides
    assert record["status"] == "rejected" and record["rejected_by"] == "options"
    assert record["decided_by"]["options"] == "llm"
    assert record["reasons"][0]["text"].startswith("IV ")
    assert record["reasons"][0]["source_refs"][0].startswith("calculate_iv_hv_")
    assert "suggestion" not in record


def test_an_invented_number_is_dropped_after_one_correction(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path, llm_server: ScriptedLLM
) -> None:
    player = OptionsPlayer(mode="invent")
    llm_server.responder = player
    outcome, _ = _plan(tmp_path, stocknet_dir, options_dir, llm_server)
    record = outcome.value
    grounding = record["options"]["llm"]["grounding"]
    assert grounding["corrected"] == "unfixed"
    assert [d["numbers"] for d in grounding["dropped"]] == [[INVENTED]]
    assert all(INVENTED not in r["text"] for r in record["reasons"])
    assert record["status"] == "suggested" and record["decided_by"]["options"] == "llm"
    corrections = [r for r in player.requests if "These numbers match" in str(r["messages"][-1]["content"])]
    assert len(corrections) == 1


def test_a_contract_no_screen_passed_keeps_the_deterministic_decision(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path, llm_server: ScriptedLLM
) -> None:
    llm_server.responder = OptionsPlayer(mode="foreign")
    outcome, _ = _plan(tmp_path, stocknet_dir, options_dir, llm_server)
    record = outcome.value
    assert record["decided_by"]["options"] == "deterministic"
    assert record["options"]["llm"]["source"] == "rejected"
    assert record["suggestion"]["contract"] != "AAPL140606P00500000"
    assert [e.code for e in outcome.errors] == ["LLM_DECISION_UNSUPPORTED"]


def test_a_model_failure_falls_back_to_the_deterministic_decision(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path, llm_server: ScriptedLLM
) -> None:
    llm_server.responder = lambda body: error(500, "model down")
    outcome, _ = _plan(tmp_path, stocknet_dir, options_dir, llm_server)
    record = outcome.value
    assert record["status"] == "suggested" and record["decided_by"]["options"] == "deterministic"
    assert record["options"]["llm"]["source"] == "deterministic"
    assert [e.code for e in outcome.errors] == ["LLM_ERROR"]
    assert "the deterministic result was used" in outcome.errors[0].message


def test_a_spent_time_budget_asks_no_model(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path, llm_server: ScriptedLLM
) -> None:
    llm_server.responder = OptionsPlayer()
    outcome, _ = _plan(tmp_path, stocknet_dir, options_dir, llm_server, deadline=time.monotonic() - 1.0)
    record = outcome.value
    assert record["options"]["llm"]["source"] == "skipped"
    assert record["options"]["llm"]["error"] == "the LLM time budget of this stage ran out"
    assert record["decided_by"]["options"] == "deterministic" and record["status"] == "suggested"
    assert llm_server.requests == []


def test_a_pick_above_the_support_cap_keeps_the_deterministic_decision(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path, llm_server: ScriptedLLM
) -> None:
    llm_server.responder = OptionsPlayer(mode="nocap")
    outcome, _ = _plan(tmp_path, stocknet_dir, options_dir, llm_server)
    record = outcome.value
    picked = record["options"]["llm"]["result"]["contract"]
    # the screen without a cap passes strikes above 622.5 (the support zone's low); the pick must
    # not exceed it, so the rules' pick stands
    assert record["decided_by"]["options"] == "deterministic"
    assert "fails the plan's floors: strike_above_cap" in record["options"]["llm"]["error"]
    assert [e.code for e in outcome.errors] == ["LLM_DECISION_UNSUPPORTED"]
    assert record["suggestion"]["contract"] != picked and record["suggestion"]["strike"] <= MAX_STRIKE


def test_the_options_analyst_is_shown_an_example_answer_and_sent_the_bounded_schema(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path, llm_server: ScriptedLLM
) -> None:
    from agents.analysts.models import OptionsDecision
    from agents.analysts.prompts import ANSWER_SHAPE, grammar_schema
    from tests.llm.responders import ExampleCopier

    copier = ExampleCopier()  # a model that copies the example it is shown
    llm_server.responder = copier
    # no tool round (FINAGENT_LLM_MAX_ITERATIONS=0, the local-cpu preset): the answer call itself
    # carries the schema (with tools offered it travels on the forced final answer)
    outcome, _ = _plan(tmp_path, stocknet_dir, options_dir, llm_server, max_iterations=0)
    system = str(copier.bodies[0]["messages"][0]["content"])
    assert "JSON schema of your answer" not in system and '"$defs"' not in system
    _, example = system.split(ANSWER_SHAPE, 1)
    shown = OptionsDecision.model_validate(json.loads(example))  # a filled answer, not a schema
    assert shown.rationale and all(s.source_refs for s in shown.rationale)
    # the bounded form travels as response_format: every string capped, refs inlined
    formats = [r.get("response_format") or {} for r in copier.bodies]
    sent = [f.get("json_schema", {}).get("schema") or f.get("schema") for f in formats]
    bounded = grammar_schema(OptionsDecision)
    assert bounded in sent
    assert bounded["properties"]["contract"]["anyOf"][0]["maxLength"] <= 48
    # the copied example decides nothing: it names no passing put and cites no option output
    # (refused by the support check), or its statement is not grounded (dropped)
    record = outcome.value
    assert record["options"]["llm"]["source"] in ("rejected", "deterministic")
    assert record["decided_by"]["options"] == "deterministic"
    assert record["options"]["llm"]["example"] == json.loads(example)


def test_a_pick_from_a_looser_screen_is_refused_naming_the_floors(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path, llm_server: ScriptedLLM
) -> None:
    """The model screens with the liquidity and yield floors off and a wider delta band, and picks
    the 2014-06-27 622.5 put (5.45/5.85: a 7.1 % spread; OI 136; delta −0.251): it is in that
    screen's passing list, cited, grounded, and still refused: the plan's own floors (|delta| ≤ 0.25,
    spread within 5 % or 0.10, volume ≥ 10, OI ≥ 500) stand."""
    llm_server.responder = OptionsPlayer(mode="loose")
    outcome, _ = _plan(tmp_path, stocknet_dir, options_dir, llm_server)
    record = outcome.value
    assert record["options"]["llm"]["result"] is not None, record["options"]["llm"]
    assert record["options"]["llm"]["result"]["contract"] == "AAPL140627P00622500"
    assert record["decided_by"]["options"] == "deterministic"
    error = record["options"]["llm"]["error"]
    assert "AAPL140627P00622500 fails the plan's floors: delta, spread, volume, open_interest" in error
    assert record["suggestion"]["contract"] == "AAPL140621P00620000"
    assert [e.code for e in outcome.errors] == ["LLM_DECISION_UNSUPPORTED"]
