"""Analysts with no tool offered (``FINAGENT_LLM_MAX_ITERATIONS=0``, the local-cpu preset) see
what research fetched as a short cited digest: the headlines (title, source, time) and the key
fundamentals, each under the ``tool_call_id`` they came from, so an answer can cite it. Their
system prompts name the answer's keys and allowed values, with no example answer. Against the
scripted OpenAI-compatible server with a model that answers valid, grounded JSON whose notes
write back the prompt's description of ``notes``: refused as no reading."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from agents.analysts.llm_agents import run_analysts
from agents.analysts.models import FundamentalView, SentimentView, SynthesisView, TechnicalView
from agents.analysts.prompts import (
    ANSWER_KEYS,
    ANSWER_SHAPE,
    DIGEST_HEADLINES,
    DIGEST_TITLE_MAX,
    FIELD_HINTS,
    FUNDAMENTAL_TOPIC,
    GRAMMAR_TEXT_MIN,
    QUOTE_SHOWN,
    READINGS_LINE,
    answer_keys,
    example_choice,
    finished,
    grammar_schema,
    news_topic,
    reading_problem,
)
from agents.data.market.embedded import EmbeddedProvider
from agents.llm.config import LLMConfig, Role
from agents.llm.session import LLMSession
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from core.settings import Settings
from tests.llm.responders import HintEcho
from tests.llm.server import ScriptedLLM

pytestmark = pytest.mark.usefixtures("clean_settings")

AS_OF = date(2012, 6, 29)
LONG = "Apple Inc " + "very long words " * 12  # beyond the digest's title length


def _news_dir(tmp_path: Path, day: str = "2012-06-28") -> Path:
    """Ten headlines naming Apple on ``day`` (New York time), the last one too long to show
    whole; two publishers."""
    folder = tmp_path / "news"
    folder.mkdir()
    rows = ["title,date,stock,publisher"]
    for i in range(10):
        title = LONG if i == 9 else f"Apple headline number {i} on iPhone sales"
        rows.append(
            f"{title},{day} {9 + i // 2:02d}:{10 + i:02d}:00-04:00,AAPL,{'Wire' if i % 2 else 'Desk'}"
        )
    (folder / "headlines.csv").write_text("\n".join(rows) + "\n")
    return folder


def _run(
    tmp_path: Path, server: ScriptedLLM, copier: HintEcho, *, news_day: str = "2012-06-28"
) -> tuple[dict[str, Any], dict[str, str], dict[str, Any]]:
    """The three analysts through ``run_analysts`` on AAPL as of :data:`AS_OF`, with research's
    outputs made by the real tools (the headlines of :func:`_news_dir` on ``news_day``, 72 h
    back): ``(records, {"news": ref, "fund": ref, "quote": ref}, fundamentals entry)``."""
    ctx = ToolContext(
        settings=Settings(
            _env_file=None, data_news_dir=_news_dir(tmp_path, news_day), data_news_provider="files"
        ),
        as_of=AS_OF,
        provider=EmbeddedProvider(),
    )
    news = run_tool(name="get_news", arguments={"symbols": ["AAPL"], "hours_back": 72}, ctx=ctx)
    fund = run_tool(
        name="get_fundamentals",
        arguments={"symbols": ["AAPL"], "metrics": ["pe_ratio", "eps_growth_yoy"]},
        ctx=ctx,
    )
    quote = run_tool(name="get_stock_data", arguments={"symbol": "AAPL"}, ctx=ctx)
    hist = run_tool(name="get_history", arguments={"symbol": "AAPL", "period": "1y"}, ctx=ctx)
    tech = run_tool(
        name="technical_indicators", arguments={"symbol": "AAPL", "history_ref": hist.tool_call_id}, ctx=ctx
    )
    assert news.ok and fund.ok and quote.ok and tech.ok, (news.error, fund.error, quote.error, tech.error)
    in_window = news_day >= (AS_OF - timedelta(days=2)).isoformat()
    assert news.data and len(news.data["news"]) == (10 if in_window else 0) and fund.data
    entry = fund.data["fundamentals"][0]
    server.responder = copier
    roles = {r: "openai/copier" for r in (Role.TECHNICAL, Role.FUNDAMENTAL, Role.SENTIMENT)}
    config = LLMConfig(models=roles, api_base=server.url, api_key="k", num_retries=0, max_iterations=0)
    session = LLMSession(config=config, analysis_id="a-1", stage="analysis")
    outcome = run_analysts(
        ctx=ctx,
        session=session,
        symbol="AAPL",
        as_of=AS_OF,
        user_query="AAPL",
        stock_data={
            "quote": quote.data,
            "quote_ref": quote.tool_call_id,
            "history_ref": "",
            "fundamentals": entry,
            "fundamentals_ref": fund.tool_call_id,
            "news_ref": news.tool_call_id,
        },
        analysis={"technical": tech.data, "technical_ref": tech.tool_call_id},
    )
    refs = {"news": news.tool_call_id, "fund": fund.tool_call_id, "quote": quote.tool_call_id}
    return outcome.value, refs, entry


def _messages(copier: HintEcho, analyst: str) -> tuple[str, str]:
    body = next(b for b in copier.bodies if f"You are a {analyst}" in b["messages"][0]["content"])
    assert not body.get("tools")  # max_iterations 0: no tool offered
    return str(body["messages"][0]["content"]), str(body["messages"][1]["content"])


def _user(copier: HintEcho, analyst: str) -> str:
    return _messages(copier, analyst)[1]


def test_the_headline_and_fundamentals_digests_reach_the_prompts_with_their_ids(
    tmp_path: Path, llm_server: ScriptedLLM
) -> None:
    copier = HintEcho()
    records, refs, entry = _run(tmp_path, llm_server, copier)

    sentiment = _user(copier, "news and sentiment analyst")
    line = next(x for x in sentiment.splitlines() if x.startswith("Headlines"))
    assert f"tool_call_id {refs['news']}" in line
    shown = json.loads(line.split(": ", 1)[1])
    assert len(shown) == DIGEST_HEADLINES  # ten fetched, eight shown
    assert {h["source"] for h in shown} == {"Wire", "Desk"}
    assert all(h["time"].startswith("2012-06-28T") and len(h["title"]) <= DIGEST_TITLE_MAX for h in shown)
    titles = " ".join(h["title"] for h in shown)
    assert "Apple headline number" in titles

    fundamental = _user(copier, "fundamental analyst")
    line = next(x for x in fundamental.splitlines() if x.startswith("Fundamentals"))
    assert f"tool_call_id {refs['fund']}" in line
    digest = json.loads(line.split(": ", 1)[1])
    assert digest["pe_ratio"] == pytest.approx(entry["pe_ratio"], abs=1e-4)

    # the system prompt names the keys and their allowed values; it shows no example answer
    system, _ = _messages(copier, "technical")
    assert answer_keys(TechnicalView) in system and ANSWER_SHAPE not in system
    assert 'recommendation: one of "bullish", "bearish", "neutral"' in system

    # the answers are valid and cite the digests' ids, but their notes are the description of
    # notes written back: refused as no reading, the deterministic result stands and the
    # model's answer is kept for the audit
    assert refs["news"] in records["sentiment"]["context_refs"]
    for name in ("technical", "fundamental", "sentiment"):
        assert records[name]["source"] == "deterministic", records[name]
        assert str(records[name]["error"]).startswith("LLM_NO_READING"), records[name]
        assert "description of notes" in str(records[name]["error"])
        assert records[name]["refused_answer"]["notes"] == FIELD_HINTS["notes"]
        assert "example" not in records[name]


def test_the_example_judgement_is_drawn_per_analysis_not_fixed() -> None:
    labels = ("positive", "negative", "neutral")
    drawn = {example_choice(labels, seed=f"sentiment|AAPL|2012-06-{d:02d}") for d in range(1, 29)}
    assert drawn == set(labels)  # every value is shown across analyses
    assert example_choice(labels, seed="x|AAPL|2012-06-29") == example_choice(
        labels, seed="x|AAPL|2012-06-29"
    )


@pytest.mark.parametrize("model", [TechnicalView, FundamentalView, SentimentView, SynthesisView])
def test_the_keys_line_lists_every_key_with_its_allowed_values(model: Any) -> None:
    line = answer_keys(model)
    assert line.startswith(ANSWER_KEYS)
    schema = grammar_schema(model)
    for key, node in schema["properties"].items():
        assert f"{key}: " in line, key
        for value in node.get("enum") or []:
            assert json.dumps(value) in line  # e.g. "bullish", "BUY"
    assert "{" not in line.replace('{"text"', "")  # no JSON example beside the rationale's shape


def test_prose_must_be_a_reading_of_the_data() -> None:
    assert reading_problem({"notes": ""}) == "it is empty"
    assert reading_problem({"notes": "Neutral."}) == "it has fewer than 4 words"
    assert "description of notes" in str(reading_problem({"notes": FIELD_HINTS["notes"]}))
    # near-identical (case, spacing) still the description
    assert reading_problem({"notes": FIELD_HINTS["notes"].upper() + " "}) is not None
    own = "Close 584.0 is above the two-hundred-day SMA 486.6, an uptrend."
    assert reading_problem({"notes": own}) is None
    statements = [{"text": own, "source_refs": ["t1"]}]
    assert reading_problem({"rationale": statements}) is None
    echoed = [{"text": FIELD_HINTS["rationale"], "source_refs": ["t1"]}]
    assert reading_problem({"rationale": echoed}) is not None


def test_an_earlier_analysts_notes_written_back_are_no_reading() -> None:
    """What the real 0.5B model did: the fundamental and sentiment analysts answered the
    technical analyst's notes (shown to them as an earlier result), whole or shortened."""
    technical = (
        "The stock price has decreased by 0.3 points, below the previous close of 23.31. "
        "The RSI is 41.2. The trend is weak."
    )
    shown = {"the technical analyst's notes": technical}
    assert (
        reading_problem({"notes": technical}, shown=shown) == "it writes back the technical analyst's notes"
    )
    shortened = (
        "The stock price has decreased by 0.3 points, below the previous close of 23.31. The trend is weak."
    )
    assert reading_problem({"notes": shortened}, shown=shown) is not None
    own = "The P/E ratio of 15.45 is modest for earnings growing 0.3444 a year."
    assert reading_problem({"notes": own}, shown=shown) is None
    assert reading_problem({"notes": own}, shown={"the technical analyst's notes": ""}) is None


def test_the_grammar_form_asks_for_prose_of_some_length() -> None:
    """An empty notes string is valid for the result model; under a llama.cpp grammar the
    server cannot produce one (minLength), and statements neither."""
    notes = grammar_schema(TechnicalView)["properties"]["notes"]
    assert notes["minLength"] == GRAMMAR_TEXT_MIN and notes["maxLength"] > GRAMMAR_TEXT_MIN
    text = grammar_schema(SynthesisView)["properties"]["rationale"]["items"]["properties"]["text"]
    assert text["minLength"] == GRAMMAR_TEXT_MIN
    risks = grammar_schema(SynthesisView)["properties"]["risks"]["items"]
    assert "minLength" not in risks  # a risk note may be short


def test_each_analyst_is_shown_its_readings_last_and_a_reading_copied_is_accepted(
    tmp_path: Path, llm_server: ScriptedLLM
) -> None:
    """The computed readings close the technical and fundamental contexts (after the data, the
    earlier judgements before it); a model that restates the last reading is grounded and
    accepted; what the real 0.5B model wrote of data it was shown ("does not provide any
    information") and of the prompt ("the tool call ID ...") is refused."""
    copier = HintEcho(
        notes={
            "technical": "READING",
            "fundamental": "The quote does not provide any information about AAPL's valuation.",
            "sentiment": "The analysis date provided matches the tool call ID of the quote.",
        }
    )
    records, _, entry = _run(tmp_path, llm_server, copier)
    for analyst in ("technical", "fundamental analyst"):
        lines = _user(copier, analyst).splitlines()
        assert lines[-1].startswith(READINGS_LINE), lines
        readings = json.loads(lines[-1].split(": ", 1)[1])
        assert readings and all(isinstance(r, str) and r.endswith(".") for r in readings)
    technical_lines = _user(copier, "technical").splitlines()
    assert any("50-day SMA" in r for r in json.loads(technical_lines[-1].split(": ", 1)[1]))
    fundamental_lines = _user(copier, "fundamental analyst").splitlines()
    assert fundamental_lines[1].startswith("Earlier analysts' judgements")
    assert fundamental_lines[-2].startswith("Fundamentals")
    pe = round(entry["pe_ratio"], 4)
    shown = f"{pe:,.2f}"  # as the report's Fundamentals table prints a P/E
    expected = (
        f"The P/E is {shown}: P/E above thirty"
        if pe > 30
        else f"The P/E is {shown}: P/E below fifteen"
        if pe < 15
        else f"No rule of thumb is crossed by the P/E {shown}"
    )
    assert expected in fundamental_lines[-1], fundamental_lines[-1]

    technical = records["technical"]
    assert technical["source"] == "llm", technical
    # the trend reading closes the list: close vs the 200-day SMA (periods in digits)
    assert technical["result"]["notes"].startswith("Close ")
    assert "200-day SMA" in technical["result"]["notes"]
    fundamental = records["fundamental"]
    assert fundamental["source"] == "deterministic"
    assert "it says the data is absent, but the fundamentals was shown" in str(fundamental["error"])
    sentiment = records["sentiment"]
    assert sentiment["source"] == "deterministic"
    assert "it speaks of the prompt, not the data" in str(sentiment["error"])


def test_the_sentiment_analyst_reads_the_headlines_and_their_readings_not_the_quote(
    tmp_path: Path, llm_server: ScriptedLLM
) -> None:
    """Shown the quote beside the headlines, the real 0.5B model wrote of the quote; the
    sentiment context now holds the headlines and their computed readings only, and a model
    that restates the last reading is grounded and accepted, citing the news output alone."""
    copier = HintEcho(notes={"sentiment": "READING"})
    records, refs, _ = _run(tmp_path, llm_server, copier)
    lines = _user(copier, "news and sentiment analyst").splitlines()
    assert not any(x.startswith("Quote (tool_call_id") for x in lines)
    assert refs["quote"] not in "\n".join(lines)
    assert lines[-2].startswith(f"Headlines (tool_call_id {refs['news']}")
    assert lines[-1].startswith(READINGS_LINE)
    readings = json.loads(lines[-1].split(": ", 1)[1])
    assert readings[0] == "10 headlines in the window name the company."
    assert "Some headlines are tagged product by their keywords." in readings  # "iPhone"
    assert any(r.startswith("The highest-impact headline reads ") for r in readings)
    assert readings[-1].startswith("By their VADER scores, ")
    sentiment = records["sentiment"]
    assert sentiment["source"] == "llm", sentiment
    assert sentiment["result"]["notes"] == readings[-1]
    assert sentiment["context_refs"] == [refs["news"]]

    # the technical analyst still reads the whole short quote, the fundamental analyst its
    # valuation values only (shown the day's change, the 0.5B model restated it)
    def quote_of(analyst: str) -> dict[str, Any]:
        line = next(x for x in _user(copier, analyst).splitlines() if x.startswith("Quote (tool_call_id"))
        return dict(json.loads(line.split(": ", 1)[1]))

    assert {"previous_close", "change"} <= set(quote_of("technical"))
    assert QUOTE_SHOWN["fundamental"] == ("current_price", "pe_ratio", "market_cap")
    # the embedded quote has no market cap: nulls are left out
    assert set(quote_of("fundamental analyst")) == {"current_price", "pe_ratio"}


def test_with_no_headline_in_the_window_the_sentiment_analyst_is_not_asked(
    tmp_path: Path, llm_server: ScriptedLLM
) -> None:
    """Nothing to judge: no model call, the deterministic "unknown" with the reason, citing the
    empty news output; the other analysts are asked as before."""
    copier = HintEcho(notes={"sentiment": "READING"})
    records, refs, _ = _run(tmp_path, llm_server, copier, news_day="2012-06-01")
    systems = [str(b["messages"][0]["content"]) for b in copier.bodies]
    assert not any("news and sentiment analyst" in x for x in systems)
    assert any("technical" in x for x in systems) and any("fundamental analyst" in x for x in systems)
    sentiment = records["sentiment"]
    assert sentiment["source"] == "skipped" and not sentiment["llm_call_ids"]
    assert sentiment["error"] == f"no headline names the company in the news window ({refs['news']})"
    assert sentiment["result"]["label"] == "unknown"
    assert sentiment["result"]["source_refs"] == [refs["news"]]
    assert "no headline names the company" in sentiment["result"]["notes"]


def test_html_character_references_in_an_answer_are_decoded_before_the_checks(
    tmp_path: Path, llm_server: ScriptedLLM
) -> None:
    """The real 0.5B model wrote "the analyst&#39;s" and "(&#34;golden-cross&#34;)": read
    as numbers, "39" and "34" got the statement dropped as ungrounded."""
    copier = HintEcho(notes={"technical": "The chart&#39;s last reading: READING", "sentiment": "READING"})
    records, _, _ = _run(tmp_path, llm_server, copier)
    technical = records["technical"]
    assert technical["source"] == "llm", technical
    assert technical["result"]["notes"].startswith("The chart's last reading: Close ")
    assert not technical["grounding"].get("dropped"), technical["grounding"]
    assert "&#" not in json.dumps(records)


def test_prose_about_the_prompt_or_about_absent_data_is_no_reading() -> None:
    """Sentences the real 0.5B model wrote (docs/benchmarks.md), and true ones beside them."""
    talk = [
        "The analyst's results do not contradict the data provided.",
        "The fundamental notes do not match any tool output you were shown, nor does it measure",
        "The analysis date provided matches the tool call ID `get_stock_data_4ae3a52a61fa`, which is a L",
        "The readings do not contradict these claims.",
        "The RSI is neutral, see get_stock_data_6c949fdf138b.",
    ]
    for notes in talk:
        assert reading_problem({"notes": notes}) == "it speaks of the prompt, not the data", notes
    absent = [
        "The quote does not provide any information about the stock's current price.",
        "The quote provided does not contain any relevant data on IBM's performance.",
        "No earnings data is given here, so nothing can be said.",
    ]
    for notes in absent:
        assert reading_problem({"notes": notes}, data="the fundamentals") == (
            "it says the data is absent, but the fundamentals was shown"
        ), notes
        # with nothing shown, saying so is true
        assert reading_problem({"notes": notes}) is None, notes
    own = "The P/E ratio of 15.45 is modest, and the gross margin of 0.4371 is above forty percent."
    assert reading_problem({"notes": own}, data="the fundamentals") is None


def test_prose_about_other_data_than_the_analysts_own_is_no_reading() -> None:
    """The 0.5B model's fundamental answers restating the quote, and its sentiment answer on
    the price's range with headlines shown (docs/benchmarks.md), against true readings."""
    quote_only = "The current price is 57.12, and the previous close is 57.0."
    assert reading_problem({"notes": quote_only}, data="the fundamentals", topic=FUNDAMENTAL_TOPIC) == (
        "it speaks of none of the fundamentals"
    )
    for own in (
        "The P/E ratio of 15.45 is modest.",
        "pe_ratio 35.2 is above thirty, a rich valuation.",
        "Debt is high against EBITDA, a leverage risk.",
    ):
        assert reading_problem({"notes": own}, data="the fundamentals", topic=FUNDAMENTAL_TOPIC) is None, own
    headlines = [
        {"title": "AbbVie wins Humira patent ruling"},
        {"title": "Pharma stocks slide on pricing fears"},
    ]
    topic = news_topic(headlines)
    price_talk = "The change in price is 0.9, indicating a positive trend."
    assert reading_problem({"notes": price_talk}, data="the headlines", topic=topic) == (
        "it speaks of none of the headlines"
    )
    for own in (
        "The Humira ruling is good for AbbVie.",  # a headline's words
        "The headlines are mixed: a patent win against sector pricing fears.",
        "News flow is negative for pharma.",
    ):
        assert reading_problem({"notes": own}, data="the headlines", topic=topic) is None, own
    # "no headlines" is false with headlines shown, true with none (the quote alone)
    none = "The price is 125.43. There are no other news headlines in the window that match."
    assert reading_problem({"notes": none}, data="the headlines", topic=topic) == (
        "it says the data is absent, but the headlines was shown"
    )
    assert reading_problem({"notes": none}, data="the quote") is None
    judged = "There is no negative news in the headlines about AbbVie."
    assert reading_problem({"notes": judged}, data="the headlines", topic=topic) is None
    # without a topic nothing is required
    assert reading_problem({"notes": price_talk}, data="the headlines") is None
    assert news_topic([]).search("no headlines in the window")


def test_an_unfinished_last_sentence_is_cut_and_recorded(tmp_path: Path, llm_server: ScriptedLLM) -> None:
    """What the 0.5B model left after a correction round ("The fifty-day SMA 185.3011 is above
    the"): the fragment is cut from the notes and kept in the record's grounding; notes that
    are only a fragment are no reading."""
    copier = HintEcho(
        notes={
            "technical": "READING The fifty-day SMA is above the",
            "fundamental": "The P/E ratio of the company is below the",
        }
    )
    records, _, _ = _run(tmp_path, llm_server, copier)
    technical = records["technical"]
    assert technical["source"] == "llm", technical
    reading = json.loads(_user(copier, "technical").splitlines()[-1].split(": ", 1)[1])[-1]
    assert technical["result"]["notes"] == reading
    assert technical["grounding"]["unfinished"] == [
        {"part": "technical.notes", "text": "The fifty-day SMA is above the"}
    ]
    fundamental = records["fundamental"]
    assert fundamental["source"] == "deterministic"
    assert "it is empty" in str(fundamental["error"])
    assert fundamental["refused_answer"]["notes"] == ""


def test_a_fundamental_answer_that_copies_its_readings_is_grounded_and_accepted(
    tmp_path: Path, llm_server: ScriptedLLM
) -> None:
    """Shown the readings as sentences naming each measure before its number (fractions as
    percentages), the real 0.5B model copied them whole; such a copy must pass every check
    (numbers, attribution, comparisons, verdicts), on the real embedded AAPL fundamentals."""
    copier = HintEcho(notes={"fundamental": "READINGS"})
    records, refs, entry = _run(tmp_path, llm_server, copier)
    readings = json.loads(_user(copier, "fundamental analyst").splitlines()[-1].split(": ", 1)[1])
    assert readings[0].startswith("The P/E is ") and any("EPS growth is " in r for r in readings)
    growth = next(r for r in readings if "EPS growth is " in r)
    # a signed percentage to two decimals, as the report prints a change ("+93.42 %")
    assert f"{100 * entry['eps_growth_yoy']:+.2f} %" in growth, growth
    fundamental = records["fundamental"]
    assert fundamental["source"] == "llm", fundamental
    assert fundamental["result"]["notes"] == " ".join(readings)
    assert fundamental["grounding"]["dropped"] == [] and fundamental["grounding"]["corrected"] is None
    assert refs["fund"] in fundamental["context_refs"]


def test_a_refused_correction_reply_leaves_the_first_answer_checked(
    tmp_path: Path, llm_server: ScriptedLLM
) -> None:
    """The real 0.5B model answered a good note with a wrong trend label; asked to correct the
    label, it replied with a broken note ("... (&#34;, &#34;source_refs&#34;: [technical.tre")
    that was refused, and the whole answer with it. The first answer, checked the same way (its
    label replaced by the data's, listed), now stands; the refused reply is recorded."""
    copier = HintEcho(
        notes={"technical": "READING"},
        labels={"technical": {"trend_direction": "down"}},  # the close is above both SMAs
        corrections={"technical": "It is ("},
    )
    records, _, _ = _run(tmp_path, llm_server, copier)
    technical = records["technical"]
    assert technical["source"] == "llm", technical
    reading = json.loads(_user(copier, "technical").splitlines()[-1].split(": ", 1)[1])[-1]
    assert technical["result"]["notes"] == reading
    assert technical["result"]["trend_direction"] == "up"  # the data's label, listed
    grounding = technical["grounding"]
    assert grounding["corrected"] == "refused" and "no reading" in grounding["refused_reply"]
    assert [d["part"] for d in grounding["dropped"]] == ["technical.trend_direction"]
    assert any("Rewrite your answer" in str(b["messages"][-1]["content"]) for b in copier.bodies)
    # a first answer that fails too is not kept: the deterministic result stands
    copier = HintEcho(
        notes={"technical": "RSI"},
        labels={"technical": {"trend_direction": "down"}},
        corrections={"technical": "("},
    )
    (tmp_path / "again").mkdir()
    records, _, _ = _run(tmp_path / "again", llm_server, copier)
    assert records["technical"]["source"] == "deterministic"
    assert str(records["technical"]["error"]).startswith("LLM_NO_READING")


def test_a_sentence_cut_by_the_length_bound_is_cut_before_the_checks(
    tmp_path: Path, llm_server: ScriptedLLM
) -> None:
    """The server's length bound cut the real 0.5B model's note inside a number ("the 200-day
    SMA 486.5" for 486.5971): checked, the fragment's number was unverified and its correction
    round wrecked the whole note. The fragment is cut first: the finished reading stands and
    no correction is asked."""
    fragment = "The 200-day SMA stood at 12345.6 " + "and kept rising for months " * 7
    copier = HintEcho(notes={"technical": f"READING {fragment.strip()}"})
    records, _, _ = _run(tmp_path, llm_server, copier)
    technical = records["technical"]
    assert technical["source"] == "llm", technical
    reading = json.loads(_user(copier, "technical").splitlines()[-1].split(": ", 1)[1])[-1]
    assert technical["result"]["notes"] == reading
    assert technical["grounding"]["unfinished"] == [{"part": "technical.notes", "text": fragment.strip()}]
    assert technical["grounding"]["corrected"] is None and technical["grounding"]["dropped"] == []
    assert not any("rewrite your answer" in str(b["messages"][-1]["content"]).lower() for b in copier.bodies)


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("The fifty-day SMA 185.3011 is above the", ""),
        ("Close 1 is up. The fifty-day SMA 185.3011 is above the", "Close 1 is up."),
        ("RSI 55.2 is neutral", "RSI 55.2 is neutral"),  # only its full stop is missing
        ("The fifty-day SMA 27.3418 is not a five-year,", ""),
        ("RSI is 55.2 (neutral).", "RSI is 55.2 (neutral)."),
        ("Close is up. " + "and more words " * 15, "Close is up."),  # cut at the length bound
        # a word cut inside, as the real 0.5B model ended a note
        ("The fifty-day SMA 27.3418 is below the two-h0", ""),
        ("RSI 41 is neutral. The fifty-day SMA is below the two-h", "RSI 41 is neutral."),
        ("Close 23.01 is below the 50-day", "Close 23.01 is below the 50-day"),  # whole words
        ("Earnings are due in Q4", "Earnings are due in Q4"),
        ("It reported on the 14th", "It reported on the 14th"),
        # a preposition or auxiliary left open (the real 0.5B model, MSFT 2010-06-30)
        (
            "The P/E is 11.8. The analyst also mentioned that the stock's EPS growth over",
            "The P/E is 11.8.",
        ),
        ("The P/E is 11.8. Earnings have", "The P/E is 11.8."),
        ("The EPS grew on the four quarters before", "The EPS grew on the four quarters before"),
        # pieces glued by the cut (the real 0.5B model, IBM and MSFT)
        ("The P/E is 14.19. Reported earnings beat the估算", "The P/E is 14.19."),
        ("The P/E is 11.8. Reported earnings beat theEst", "The P/E is 11.8."),
        ("Its ads run on YouTube", "Its ads run on YouTube"),
    ],
)
def test_finished_cuts_only_an_unfinished_last_sentence(text: str, kept: str) -> None:
    assert finished(text) == kept


def test_the_correction_request_written_back_is_no_reading() -> None:
    """After a correction round the 0.5B model answered "The fifty-day SMA 571.9649 is not a
    five-day": the words of the request's "571.9649 (not a five-day SMA: the fifty-day SMA)",
    no reading. A real correction, with words of its own, passes."""
    listed = {"the correction request": "571.9649 (not a five-day SMA: the fifty-day SMA)"}
    echo = {"notes": "The fifty-day SMA 571.9649 is not a five-day"}
    assert reading_problem(echo, shown=listed) == "it writes back the correction request"
    fixed = {"notes": "The fifty-day SMA 571.9649 is above the two-hundred-day SMA 486.5971."}
    assert reading_problem(fixed, shown=listed) is None
