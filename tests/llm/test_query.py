"""parse_query: deterministic resolution, the LLM path and its fallback; no litellm without a model."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agents.providers.embedded import EmbeddedProvider
from pipeline.core.settings import Settings
from pipeline.query import UnresolvedQueryError, analysis_type_of, parse_query
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
    parsed = parse_query(
        text="how is the software giant doing", provider=EmbeddedProvider(), settings=settings
    )
    assert (parsed.ticker, parsed.analysis_type, parsed.method) == ("MSFT", "technical", "llm")
    assert len(parsed.llm_rows) == 1 and parsed.llm_rows[0]["agent"] == "parse_query"

    llm_server.script("q", [chat('{"ticker": "ZZZZ"}')])
    parsed = parse_query(text="thoughts on Apple?", provider=EmbeddedProvider(), settings=settings)
    assert parsed.method == "rules" and parsed.ticker == "AAPL" and "not a known ticker" in parsed.notes[0]

    llm_server.script("q", [error(500)])
    parsed = parse_query(text="thoughts on Apple?", provider=EmbeddedProvider(), settings=settings)
    assert parsed.method == "rules" and parsed.llm_rows[0]["status"] == "error"


def test_analysis_type_keywords() -> None:
    assert analysis_type_of("RSI and MACD please") == "technical"
    assert analysis_type_of("buy or not") == "composite"


def test_the_deterministic_path_never_imports_litellm() -> None:
    code = (
        "import sys; from pipeline.stages import analysis, recommendation, review; "
        "import tasks.factory, pipeline.query, agents.llm.session; "
        "print('litellm' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
