"""The ACL18 LLM row: the full pipeline in LLM mode (the scripted OpenAI-compatible server as the
model, the embedded in-process worker) on a fixed sample of the real XOM dev samples. Structure
only: the scripted model's calls say nothing about markets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from apps import acl18
from core.settings import Settings
from tests.conftest import SHARED_DATA
from tests.llm.responders import AgentPlayer
from tests.llm.server import ScriptedLLM

PRICES = SHARED_DATA / "ohlcv" / "stocknet"
TWEETS = SHARED_DATA / "news" / "stocknet_tweets"


@pytest.fixture
def embedded(clean_settings: None) -> Iterator[None]:
    """Embedded settings; the process-wide in-process worker is stopped afterwards."""
    from pipeline.producer import stop_embedded_worker

    yield
    stop_embedded_worker()


def test_fixed_sample_is_spread_and_stable() -> None:
    from datetime import date

    rows = [
        acl18.Sample(symbol=s, day=date(2015, 8, d), up=True, tweets=0, score=None)
        for d in (3, 4)
        for s in "BA"
    ]
    picked = acl18.llm_sample(rows, 2)
    assert [(s.day.day, s.symbol) for s in picked] == [(3, "A"), (4, "A")]  # every 2nd of 4, by (day, symbol)
    assert acl18.llm_sample(list(reversed(rows)), 2) == picked
    with pytest.raises(ValueError, match="at least one"):
        acl18.llm_sample(rows, 0)


@pytest.mark.shared_data
@pytest.mark.usefixtures("embedded")
def test_llm_row_runs_the_pipeline_through_the_scripted_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm_server: ScriptedLLM
) -> None:
    if not (PRICES / "XOM.csv").is_file() or not (TWEETS / "XOM.jsonl").is_file():
        pytest.skip(f"stocknet data not found under {SHARED_DATA} (only present in the workplace)")
    prices, tweets = tmp_path / "p", tmp_path / "t"
    prices.mkdir()
    tweets.mkdir()
    (prices / "XOM.csv").write_bytes((PRICES / "XOM.csv").read_bytes())
    (tweets / "XOM.jsonl").write_bytes((TWEETS / "XOM.jsonl").read_bytes())
    player = AgentPlayer(synthesis_signal="HOLD")
    llm_server.responder = player
    for key, value in {
        "FINAGENT_DATA_PROVIDER": "csv",
        "FINAGENT_DATA_DIR": str(prices),
        "FINAGENT_DATA_SOCIAL_DIR": str(tweets),
        "FINAGENT_LLM_MODEL": "openai/scripted",
        "FINAGENT_LLM_API_BASE": llm_server.url,
        "FINAGENT_LLM_API_KEY": "sk-acl18-test",
    }.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ValueError, match="needs the settings"):
        acl18.report(prices_dir=prices, tweets_dir=tweets, split="dev", llm_n=2)
    result = acl18.report(prices_dir=prices, tweets_dir=tweets, split="dev", llm_n=2, settings=Settings())
    llm = result["llm"]
    assert llm["n"] == 2 and llm["failed"] == 0
    assert sum(llm["authors"].values()) == 2 and sum(llm["signals"].values()) == 2
    assert player.calls.get("synthesis", 0) >= 2  # the model was asked, once per analysis at least
    assert "LLM mode, fixed sample (structure only)" in acl18.markdown(result)
