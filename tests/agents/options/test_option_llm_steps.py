"""The option plan's LLM chart and research analysts against the scripted OpenAI-compatible server,
on the real AAPL chain of 2014-06-06 (where the deterministic plan picks a put, see
test_option_plan.py): a cited reject of each ends the plan early, a pass adds
the model's checked reading, an uncited reject and an invented number change nothing, and a
rule's reject is never put to a model."""

from __future__ import annotations

import json
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
from tests.llm.server import Reply, ScriptedLLM, chat

INVENTED = "987.65"
TECH, SR, EARN = "technical_indicators_x", "find_support_resistance_x", "get_earnings_dates_x"


@dataclass
class StepPlayer:
    """Plays the chart and research analysts (by their system prompt) with a fixed answer each:
    ``pass`` | ``reject`` | ``uncited`` (a reject citing no output of its context) | ``invent``."""

    chart: str = "pass"
    research: str = "pass"
    asked: list[str] = field(default_factory=list)

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        system = str(messages[0]["content"])
        last = str(messages[-1].get("content") or "")
        if last.startswith("These numbers match no tool output"):
            return chat(str(messages[-2]["content"]))  # a model that does not fix it
        step = "chart" if "chart analyst of a cash-secured put" in system else "research"
        self.asked.append(step)
        mode = getattr(self, step)
        ref = TECH if step == "chart" else EARN
        if step == "chart":
            answer: dict[str, Any] = {
                "recommendation": "pass",
                "trend_direction": "up",
                "trend_quality": "strong",
                "extension_risk": "low",
                "rationale": [
                    {"text": "The trend is up and the price holds above support.", "source_refs": [TECH, SR]}
                ],
            }
            if mode in ("reject", "uncited"):
                answer["recommendation"] = "reject"
                answer["rationale"] = [{"text": "Price is stretched far above support.", "source_refs": [SR]}]
        else:
            answer = {
                "recommendation": "pass",
                "earnings_risk": "low",
                "news_risk": "unknown",
                "rationale": [{"text": "No report is scheduled before the expiry.", "source_refs": [EARN]}],
            }
            if mode in ("reject", "uncited"):
                answer["recommendation"] = "reject"
                answer["earnings_risk"] = "high"
                answer["rationale"] = [{"text": "Earnings season makes a gap likely.", "source_refs": [EARN]}]
        if mode == "uncited":
            answer["rationale"][0]["source_refs"] = ["get_news_never_made"]
        if mode == "invent":
            answer["recommendation"] = "reject"
            answer["rationale"] = [{"text": f"A gap to {INVENTED} is likely.", "source_refs": [ref]}]
        return chat(json.dumps(answer))


def _plan(
    tmp_path: Path,
    stocknet: Path,
    options: Path,
    server: ScriptedLLM,
    *,
    technical: dict[str, Any] | None = None,
) -> Any:
    ctx = ToolContext(
        settings=Settings(service_state_dir=tmp_path / "state", options_dir=options),
        as_of=date(2014, 6, 6),
        provider=CsvFolderProvider(data_dir=stocknet),
    )
    config = LLMConfig(
        models={Role.CHART: "openai/scripted", Role.RESEARCH: "openai/scripted"},
        api_base=server.url,
        api_key="k",
        num_retries=0,
    )
    session = LLMSession(config=config, analysis_id="a-1", stage="analysis")
    inputs = OptionPlanInputs(
        symbol="AAPL",
        as_of=ctx.as_of,
        right="put",
        technical=technical if technical is not None else AAPL_0606,
        technical_ref=TECH,
        chart=_zones(support=[(622.5, 628.9)]),
        earnings=AAPL_EARNINGS_0606,
        earnings_ref=EARN,
        run=lambda name, args: run_tool(name=name, arguments=args, ctx=ctx),
        min_iv_forecast=ctx.settings.options.min_iv_hv,
    )
    return run_option_plan_llm(inputs=inputs, ctx=ctx, session=session)


def test_passes_of_both_add_their_reading_and_keep_the_suggestion(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path, llm_server: ScriptedLLM
) -> None:
    player = StepPlayer()
    llm_server.responder = player
    outcome = _plan(tmp_path, stocknet_dir, options_dir, llm_server)
    record = outcome.value
    assert player.asked == ["chart", "research"]
    assert record["status"] == "suggested"
    assert record["decided_by"] == {"chart": "llm", "options": "deterministic", "research": "llm"}
    texts = [r["text"] for r in record["reasons"]]
    assert texts[0] == "The trend is up and the price holds above support."
    assert texts[-1] == "No report is scheduled before the expiry."
    assert record["chart"]["llm"]["source"] == "llm" and record["research"]["llm"]["source"] == "llm"
    assert outcome.errors == ()


def test_a_cited_chart_reject_ends_the_plan_before_options(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path, llm_server: ScriptedLLM
) -> None:
    player = StepPlayer(chart="reject")
    llm_server.responder = player
    record = _plan(tmp_path, stocknet_dir, options_dir, llm_server).value
    assert player.asked == ["chart"]  # the research analyst is never asked
    assert (record["status"], record["rejected_by"]) == ("rejected", "chart")
    assert record["decided_by"]["chart"] == "llm"
    assert record["reasons"] == [{"text": "Price is stretched far above support.", "source_refs": [SR]}]
    assert not {"options", "research", "suggestion", "alternatives"} & set(record)


def test_a_cited_research_reject_ends_the_plan(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path, llm_server: ScriptedLLM
) -> None:
    llm_server.responder = StepPlayer(research="reject")
    record = _plan(tmp_path, stocknet_dir, options_dir, llm_server).value
    assert (record["status"], record["rejected_by"]) == ("rejected", "research")
    assert record["decided_by"] == {"chart": "llm", "options": "deterministic", "research": "llm"}
    assert record["reasons"][0]["source_refs"] == [EARN]
    assert "suggestion" not in record and "alternatives" not in record


def test_a_reject_citing_nothing_of_its_context_is_not_followed(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path, llm_server: ScriptedLLM
) -> None:
    llm_server.responder = StepPlayer(chart="uncited", research="uncited")
    outcome = _plan(tmp_path, stocknet_dir, options_dir, llm_server)
    record = outcome.value
    assert record["status"] == "suggested"
    assert record["decided_by"] == {
        "chart": "deterministic",
        "options": "deterministic",
        "research": "deterministic",
    }
    assert [e.code for e in outcome.errors] == ["LLM_DECISION_UNSUPPORTED", "LLM_DECISION_UNSUPPORTED"]
    assert record["chart"]["llm"]["source"] == "rejected"


def test_an_invented_number_is_dropped_and_the_rules_decide(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path, llm_server: ScriptedLLM
) -> None:
    llm_server.responder = StepPlayer(chart="invent")
    outcome = _plan(tmp_path, stocknet_dir, options_dir, llm_server)
    record = outcome.value
    grounding = record["chart"]["llm"]["grounding"]
    assert grounding["corrected"] == "unfixed" and [d["numbers"] for d in grounding["dropped"]] == [
        [INVENTED]
    ]
    # nothing verifiable left: the chart step is the rules' (pass), the plan goes on
    assert record["decided_by"]["chart"] == "deterministic" and record["status"] == "suggested"
    assert "LLM_UNGROUNDED" in [e.code for e in outcome.errors]
    assert all(INVENTED not in r["text"] for r in record["reasons"])


def test_a_rules_reject_is_never_put_to_a_model(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path, llm_server: ScriptedLLM
) -> None:
    player = StepPlayer()
    llm_server.responder = player
    # no indicators (no price history): the chart rule rejects NO_DATA, no model is asked
    record = _plan(tmp_path, stocknet_dir, options_dir, llm_server, technical={}).value
    assert (record["status"], record["rejected_by"]) == ("rejected", "chart")
    assert record["decided_by"]["chart"] == "deterministic" and player.asked == []
