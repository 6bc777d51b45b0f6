"""Shared fixtures: repository paths, the shared data folder, settings isolation."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm.server import ScriptedLLM

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = (REPO_ROOT / ".." / "shared" / "data").resolve()
STOCKNET_DIR = SHARED_DATA / "ohlcv" / "stocknet"


#: Folders whose files run longest (real worker processes, private servers), scheduled first.
LONG_FIRST = ("tests/fault/", "tests/integration/")


def _long_first_rank(item: pytest.Item) -> int:
    """0 for ``tests/fault``, 1 for ``tests/integration``, 2 for every other test."""
    where = item.nodeid  # relative to the rootdir: "tests/fault/test_faults.py::..."
    return next((rank for rank, folder in enumerate(LONG_FIRST) if where.startswith(folder)), len(LONG_FIRST))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the longest files first (a stable sort: the order inside each file and folder stays).

    pytest-xdist's ``--dist loadfile`` hands out whole files in collection order; starting the
    fault scenarios (one file, minutes long) and the integration files first lets the other
    worker run the short unit files meanwhile, instead of one worker running the fault file
    alone at the end (the longest-processing-time-first rule of list scheduling)."""
    items.sort(key=_long_first_rank)


@pytest.fixture
def stocknet_dir() -> Path:
    """The stocknet CSV folder (88 tickers, 2012–2017); skips when ../shared is absent."""
    if not STOCKNET_DIR.is_dir():
        pytest.skip(f"shared market data not found at {STOCKNET_DIR} (only present in the workplace)")
    return STOCKNET_DIR


@pytest.fixture
def clean_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Settings from a clean environment: no FINAGENT_* variables, state dir in tmp_path, and no
    secret registered at run time by an earlier test (``core.masking``: the keys LLM
    sessions handed to LiteLLM, the short values already warned about)."""
    from core import masking
    from core.settings import get_settings

    monkeypatch.setattr(masking, "_extra", [])
    monkeypatch.setattr(masking, "_warned", set())
    monkeypatch.setattr(masking, "_current", None)

    for key in list(os.environ):
        if key.startswith("FINAGENT_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("FINAGENT_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)  # no stray .env is read
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.fixture
def llm_server() -> Iterator[ScriptedLLM]:
    """A started ``ScriptedLLM`` (the scripted OpenAI-compatible server) on 127.0.0.1, stopped
    at teardown; worker subprocesses reach it over ``server.url``."""
    server = ScriptedLLM().start()
    yield server
    server.stop()


pytest_plugins = ["tests.support.postgres", "tests.support.secrets"]
