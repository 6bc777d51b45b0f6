"""parse_query: deterministic resolution, the LLM path and its fallback; no litellm without a model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents.data.market.embedded import EmbeddedProvider
from agents.data.symbols import SymbolDirectory, read_table, shipped_listings
from core.settings import Settings
from pipeline.query import UnresolvedQueryError, analysis_type_of, parse_query
from tests.conftest import REPO_ROOT
from tests.llm.server import ScriptedLLM, chat, error


def _settings(**kw: object) -> Settings:
    return Settings(_env_file=None, **kw)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("text", "ticker", "kind"),
    [
        ("should I buy Apple after its split?", "AAPL", "composite"),
        ("what does the news say about $MSFT", "MSFT", "sentiment"),
        ("Is IBM overbought on the chart?", "IBM", "technical"),
        ("google earnings", "GOOG", "fundamental"),
        ("aapl", "AAPL", "composite"),
    ],
)
def test_rules_resolve_tickers_and_company_names(text: str, ticker: str, kind: str) -> None:
    parsed = parse_query(text=text, provider=EmbeddedProvider(), settings=_settings())
    assert (parsed.ticker, parsed.analysis_type) == (ticker, kind) and parsed.llm_rows == []


def test_an_unresolvable_query_is_a_clear_error() -> None:
    with pytest.raises(UnresolvedQueryError, match="no known ticker or company name"):
        parse_query(text="tell me about bananas", provider=EmbeddedProvider(), settings=_settings())
    with pytest.raises(UnresolvedQueryError, match="Invalid ticker format: 'AAPL1'"):
        parse_query(text="AAPL1", provider=EmbeddedProvider(), settings=_settings())
    with pytest.raises(UnresolvedQueryError):  # a ticker glued to digits is not a mention
        parse_query(text="what about AAPL1 today", provider=EmbeddedProvider(), settings=_settings())
    # a ticker with junk is refused, naming the characters, not resolved to the ticker in it
    with pytest.raises(UnresolvedQueryError, match="contains ';'"):
        parse_query(text="AAPL;DROP TABLE", provider=EmbeddedProvider(), settings=_settings())


def test_the_llm_resolves_and_an_unknown_or_failed_answer_falls_back(llm_server: ScriptedLLM) -> None:
    settings = _settings(llm_model="openai/q", llm_api_base=llm_server.url, llm_num_retries=0)
    llm_server.script("q", [chat('{"ticker": "msft", "analysis_type": "technical"}')])
    parsed = parse_query(text="how is microsoft doing", provider=EmbeddedProvider(), settings=settings)
    assert (parsed.ticker, parsed.analysis_type, parsed.method) == ("MSFT", "technical", "llm")
    assert len(parsed.llm_rows) == 1 and parsed.llm_rows[0]["agent"] == "parse_query"
    sent = llm_server.requests[-1]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["schema"]["required"] == [
        "ticker",
        "analysis_type",
    ]

    llm_server.script("q", [chat('{"ticker": "ZZZZ"}')])
    parsed = parse_query(text="thoughts on Apple?", provider=EmbeddedProvider(), settings=settings)
    assert parsed.method == "rules" and parsed.ticker == "AAPL" and "does not name" in parsed.notes[0]

    llm_server.script("q", [error(500)])
    parsed = parse_query(text="thoughts on Apple?", provider=EmbeddedProvider(), settings=settings)
    assert parsed.method == "rules" and parsed.llm_rows[0]["status"] == "error"


def test_a_model_that_always_answers_aapl_cannot_move_the_analysis(llm_server: ScriptedLLM) -> None:
    llm_server.responder = lambda body: chat('{"ticker": "AAPL", "analysis_type": "technical"}')
    settings = _settings(llm_model="openai/q", llm_api_base=llm_server.url, llm_num_retries=0)

    microsoft = parse_query(text="what about microsoft stock", provider=EmbeddedProvider(), settings=settings)
    assert (microsoft.ticker, microsoft.method) == ("MSFT", "rules")
    assert microsoft.notes == ["the model proposed AAPL, which the text does not name"]

    with pytest.raises(UnresolvedQueryError) as info:  # the embedded data has no TSLA bars
        parse_query(text="is tesla a buy?", provider=EmbeddedProvider(), settings=settings)
    assert info.value.candidates == [("TSLA", "Tesla, Inc.")]
    assert "names TSLA (Tesla, Inc.), but the data source has no data for it" in str(info.value)

    # the text does name Apple: the model's answer and its analysis type are used
    apple = parse_query(text="is apple overbought?", provider=EmbeddedProvider(), settings=settings)
    assert (apple.ticker, apple.analysis_type, apple.method) == ("AAPL", "technical", "llm")
    # a lower-case ticker confirms the model's proposal
    lower = parse_query(text="thoughts on aapl today", provider=EmbeddedProvider(), settings=settings)
    assert (lower.ticker, lower.method) == ("AAPL", "llm")


def test_several_companies_without_a_model_are_unresolved_with_candidates() -> None:
    with pytest.raises(UnresolvedQueryError, match="names several companies") as info:
        parse_query(text="apple or microsoft?", provider=EmbeddedProvider(), settings=_settings())
    assert [c[0] for c in info.value.candidates] == ["AAPL", "MSFT"]


@pytest.mark.parametrize(
    ("text", "ticker"),
    [
        ("is tesla a buy?", "TSLA"),
        ("what about microsoft stock", "MSFT"),
        ("Berkshire Hathaway outlook", "BRK.B"),
        ("how is 3M doing", "MMM"),
        ("news about American Express", "AXP"),
        ("what is the price target for apple", "AAPL"),
    ],
)
def test_the_sp500_constituents_list_names_companies(text: str, ticker: str, stocknet_dir: Path) -> None:
    """The S&P 500 constituents of ../shared/data as the directory file; a provider without a
    symbol list (as yfinance) accepts any named company."""
    constituents = stocknet_dir.parents[1] / "fundamentals" / "sp500" / "constituents-financials.csv"
    directory = SymbolDirectory(read_table(constituents))
    assert directory.mentions(text) == [ticker]
    parsed = parse_query(
        text=text, provider=_NoListProvider(), settings=_settings(data_symbol_directory_file=constituents)
    )
    assert parsed.ticker == ticker


def test_words_that_are_tickers_or_names_are_not_mentions() -> None:
    directory = SymbolDirectory(shipped_listings())
    assert directory.mentions("is it a buy now, all in?") == []
    assert directory.mentions("my price target is low") == []  # Target (TGT) only capitalised
    assert directory.mentions("what does the news say") == []  # News Corp only capitalised
    assert directory.mentions("Target stock") == ["TGT"]


def test_the_shipped_table_is_the_sp500_snapshot(stocknet_dir: Path) -> None:
    constituents = stocknet_dir.parents[1] / "fundamentals" / "sp500" / "constituents-financials.csv"
    shipped = {(x.symbol, x.name) for x in shipped_listings()}
    source = {(x.symbol, x.name) for x in read_table(constituents)}
    assert shipped == source and len(shipped) == 503


class _NoListProvider(EmbeddedProvider):
    """An online-style provider: no symbol list, no company names."""

    def symbols(self) -> list[str]:
        return []


def test_the_cli_exits_2_listing_the_candidates(tmp_path: Path, llm_server: ScriptedLLM) -> None:
    llm_server.responder = lambda body: chat('{"ticker": "AAPL", "analysis_type": "composite"}')
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env.update(
        PYTHONPATH=str(REPO_ROOT),
        FINAGENT_SERVICE_STATE_DIR=str(tmp_path / "state"),
        FINAGENT_LLM_MODEL="openai/always-aapl",
        FINAGENT_LLM_API_BASE=llm_server.url,
        FINAGENT_LLM_NUM_RETRIES="0",
    )
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("finagent")), "analyze", "is tesla a buy?"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert "TSLA (Tesla, Inc.)" in proc.stderr and "the model proposed AAPL" in proc.stderr


def test_the_parsed_analysis_type_reaches_the_report(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env.update(PYTHONPATH=str(REPO_ROOT), FINAGENT_SERVICE_STATE_DIR=str(tmp_path / "state"))
    proc = subprocess.run(
        [
            str(Path(sys.executable).with_name("finagent")),
            "analyze",
            "is microsoft overbought on the chart?",
            "--as-of",
            "2010-06-30",
            "--json",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert (out["symbol"], out["analysis_type"]) == ("MSFT", "technical")
    assert out["question"] == "is microsoft overbought on the chart?"  # the user's own words


def test_analysis_type_keywords() -> None:
    assert analysis_type_of("RSI and MACD please") == "technical"
    assert analysis_type_of("buy or not") == "composite"


def test_the_deterministic_path_never_imports_litellm() -> None:
    code = (
        "import sys; from pipeline.stages import analysis, recommendation, review; "
        "import tasks.base, tasks.stages, pipeline.query, agents.llm.session; "
        "print('litellm' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_several_companies_are_refused_with_a_model_too_and_the_model_is_not_asked(
    llm_server: ScriptedLLM,
) -> None:
    llm_server.responder = lambda body: chat('{"ticker": "AAPL", "analysis_type": "technical"}')
    settings = _settings(llm_model="openai/q", llm_api_base=llm_server.url, llm_num_retries=0)
    with pytest.raises(UnresolvedQueryError, match="names several companies") as info:
        parse_query(text="apple or microsoft, which one?", provider=EmbeddedProvider(), settings=settings)
    assert [c[0] for c in info.value.candidates] == ["AAPL", "MSFT"]
    assert llm_server.requests == []


@pytest.mark.parametrize(
    ("word", "suggestion"),
    [
        ("Apple", "'Apple' is a company name, not a ticker; did you mean AAPL (Apple Inc.)?"),
        ("microsoft", "'microsoft' is a company name, not a ticker; did you mean MSFT (Microsoft)?"),
    ],
)
def test_a_company_name_alone_gets_did_you_mean(word: str, suggestion: str) -> None:
    with pytest.raises(UnresolvedQueryError) as info:
        parse_query(text=word, provider=EmbeddedProvider(), settings=_settings())
    assert str(info.value) == suggestion
    # tickers as written stay tickers: upper case, or a listed symbol in lower case
    assert parse_query(text="AAPL", provider=EmbeddedProvider(), settings=_settings()).ticker == "AAPL"
    assert parse_query(text="msft", provider=EmbeddedProvider(), settings=_settings()).ticker == "MSFT"


def test_a_rejected_model_ticker_is_named_in_the_report(tmp_path: Path, llm_server: ScriptedLLM) -> None:
    llm_server.responder = lambda body: chat('{"ticker": "AAPL", "analysis_type": "composite"}')
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env.update(
        PYTHONPATH=str(REPO_ROOT),
        FINAGENT_SERVICE_STATE_DIR=str(tmp_path / "state"),
        # only the query role has a model: the analysis itself runs deterministically
        FINAGENT_LLM_MODEL_QUERY="openai/always-aapl",
        FINAGENT_LLM_API_BASE=llm_server.url,
        FINAGENT_LLM_NUM_RETRIES="0",
    )
    finagent = str(Path(sys.executable).with_name("finagent"))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [finagent, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False
        )

    proc = run("analyze", "what about microsoft stock", "--as-of", "2010-06-30", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["symbol"] == "MSFT"
    assert out["query_note"] == "the model proposed AAPL, which the text does not name"
    shown = run("show", out["analysis_id"])
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert (
        "Question: 'what about microsoft stock' (resolved to MSFT; the model proposed AAPL, which the "
        "text does not name)" in shown.stdout
    )
