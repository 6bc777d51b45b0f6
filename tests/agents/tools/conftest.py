"""Fixtures for the portfolio/trading tools: a migrated database per backend and tool contexts.

``trading_url`` is a fresh SQLite file per test or the session's Postgres database (tests use a
fresh ``user_id`` each, so they never share an account).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from agents.data.market.embedded import EmbeddedProvider
from agents.tools.registry import ToolContext
from core.settings import Settings
from db.engine import get_engine
from db.migrate import upgrade


@pytest.fixture(params=["sqlite", "postgresql"])
def trading_url(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A migrated database URL, once per backend."""
    if request.param == "postgresql":
        yield str(request.getfixturevalue("pg_url"))
        return
    url = f"sqlite:///{tmp_path / 'trading.sqlite3'}"
    upgrade(url=url)
    yield url
    get_engine(url).dispose()


@pytest.fixture
def user() -> str:
    """A user id no other test uses."""
    return f"u-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def make_ctx(trading_url: str) -> Callable[..., ToolContext]:
    """``make_ctx(as_of, **settings)``: a direct-use context on the test database."""

    def make(as_of: date, **overrides: Any) -> ToolContext:
        settings = Settings(service_database_url=trading_url, **overrides)
        return ToolContext(settings=settings, as_of=as_of, provider=EmbeddedProvider())

    return make


def raw_rows(symbol: str) -> pd.DataFrame:
    """The embedded source's own rows for ``symbol`` (Date index, Yahoo columns), read directly."""
    import importlib.resources

    path = importlib.resources.files("bokeh_sampledata") / "_data/stocks.csv.gz"
    with path.open("rb") as fh:
        frame = pd.read_csv(fh, compression="gzip")
    return frame[frame.Ticker == symbol].set_index("Date").sort_index()
