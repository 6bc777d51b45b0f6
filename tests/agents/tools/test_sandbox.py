"""run_indicator_script: restricted code in a child process, escapes refused, real RSI."""

from __future__ import annotations

import time
from datetime import date
from pathlib import Path

import pytest

from agents.data.market.embedded import EmbeddedProvider
from agents.tools.bars import fetch_bars, period_start
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from agents.tools.sandbox import SandboxError, execute_script
from core.settings import Settings, get_settings

AS_OF = date(2013, 3, 1)


def _ctx(**settings: object) -> ToolContext:
    return ToolContext(settings=Settings(**settings), as_of=AS_OF, provider=EmbeddedProvider())  # type: ignore[arg-type]


def _run(code: str, **settings: object) -> dict:
    env = run_tool(
        name="run_indicator_script", arguments={"symbol": "AAPL", "code": code}, ctx=_ctx(**settings)
    )
    return env.to_public()


def _error(code: str, expected: str = "INVALID_INPUT", **settings: object) -> str:
    out = _run(code, **settings)
    assert "error" in out, out
    assert out["error"]["code"] == expected
    return str(out["error"]["message"])


def test_default_timeout_is_three_seconds() -> None:
    assert Settings().analysis.sandbox_timeout == 3.0


def test_real_rsi_in_a_script_equals_the_technical_module() -> None:
    from agents.quant.indicators import compute_indicators

    code = (
        "rsi = ta.rsi(close, length=14)\n"
        "result['rsi_14'] = float(rsi.iloc[-1])\n"
        "result['last_close'] = float(close.iloc[-1])\n"
        "result['n'] = len(close)\n"
        "result['above_sma20'] = bool(close.iloc[-1] > close.rolling(20).mean().iloc[-1])\n"
    )
    out = _run(code)
    data = out["data"]
    bars = fetch_bars(
        provider=EmbeddedProvider(),
        symbol="AAPL",
        start=period_start(period="1y", as_of=AS_OF),
        end=AS_OF,
        settings=get_settings(),
    )
    expected = compute_indicators(bars=bars)
    assert data["date"] == "2013-03-01" and data["bars_used"] == len(bars) == data["result"]["n"]
    assert round(data["result"]["rsi_14"], 2) == expected["rsi_14"]
    assert data["result"]["last_close"] == pytest.approx(expected["close"], abs=1e-4)
    assert isinstance(data["result"]["above_sma20"], bool)


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        ("x = ().__class__.__mro__", "starts with"),
        ("x = __import__('os')", "starts with"),
        ("import os", "import statements are not allowed"),
        ("from os import path", "import statements are not allowed"),
        ("x = getattr(close, '__globals__')", "invalid attribute name"),
        ("f = lambda: 0\nx = getattr(f, '__globals__')", "invalid attribute name"),
        ("x = pd.read_csv('/etc/passwd')", "not available in the sandbox"),
        ("close.to_csv('/tmp/finagent_escape.csv')", "not available in the sandbox"),
        ("close.to_pickle('/tmp/finagent_escape.pkl')", "not available in the sandbox"),
        ("x = np.loadtxt('/etc/passwd')", "not available in the sandbox"),
        ("x = np.fromfile('/etc/passwd')", "not available in the sandbox"),
        ("x = ta.create_dir('/tmp/finagent_escape')", "has no attribute"),
        ("x = ta.utils", "not available in the sandbox"),
        ("x = eval('1')", "not allowed"),
        ("x = exec('1')", "not allowed"),
        ("x = compile('1', 'a', 'eval')", "not defined"),
        ("x = globals()", "not defined"),
        ("x = vars(close)", "not defined"),
        ("x = bytearray(10**10)", "not defined"),
        ("g = (i for i in [1])\nx = getattr(g, 'gi_frame')", "restricted name"),
        ("g = (i for i in [1])\nx = g.gi_frame", "restricted name"),
        ("x = getattr(close, 'f_globals', 1)", "restricted name"),
        ("x = 'a{0}'.format(1)", "format"),
        ("x = getattr(close, 'no_such_attribute')", "has no attribute"),
    ],
)
def test_escape_attempts_are_refused(code: str, fragment: str) -> None:
    assert fragment in _error(code)
    assert not Path("/tmp/finagent_escape.csv").exists()
    assert not Path("/tmp/finagent_escape.pkl").exists()


def test_the_builtin_open_is_unreachable() -> None:
    # ``open`` is the injected open-price series, never the file builtin.
    assert "not callable" in _error("x = open('/etc/passwd')")
    assert "not defined" in _error("del open\nx = open('/etc/passwd')")


def test_infinite_loop_is_killed_from_outside_on_the_wall_clock_timeout() -> None:
    started = time.perf_counter()
    message = _error("while True:\n    pass", "TIMEOUT", analysis_sandbox_timeout=1.0)
    elapsed = time.perf_counter() - started
    assert "timeout" in message and "1 s" in message
    assert elapsed < 1.0 + 15.0  # timeout + child start-up (slow on a loaded machine), not forever


def test_sleep_inside_pandas_is_also_bounded() -> None:
    # a long-running numpy call (no Python bytecode to interrupt) is stopped the same way
    message = _error(
        "x = np.ones(10**4)\nwhile True:\n    x = np.sort(x)", "TIMEOUT", analysis_sandbox_timeout=0.5
    )
    assert "timeout" in message


@pytest.mark.parametrize("code", ["x = [0] * 10**10", "x = np.zeros(10**10)", "x = 'a' * 10**10"])
def test_huge_allocations_fail_cleanly(code: str) -> None:
    message = _error(code, "RESOURCE_EXHAUSTED")
    assert "memory" in message


def test_a_child_killed_by_a_memory_signal_is_a_resource_error_not_a_crash() -> None:
    import signal

    from agents.tools.sandbox import _crash_kind

    assert _crash_kind(-signal.SIGKILL, "") == "memory"  # the kernel's OOM killer
    assert _crash_kind(-signal.SIGABRT, "terminate called after std::bad_alloc") == "memory"
    assert _crash_kind(1, "numpy.core._exceptions._ArrayMemoryError: MemoryError") == "memory"
    assert _crash_kind(1, "Traceback: ImportError: no module") == "crashed"
    assert _crash_kind(-signal.SIGTERM, "") == "crashed"


def test_result_must_be_finite_plain_values() -> None:
    assert "not finite" in _error("result['x'] = float('nan')")
    assert "not finite" in _error("result['x'] = float(np.inf)")
    assert "unsupported type" in _error("result['x'] = close.to_frame()")
    assert "must be a dict" in _error("result = 3")
    assert "items" in _error("result['x'] = list(np.arange(5000))")


def test_series_and_numpy_values_become_lists_and_numbers() -> None:
    data = _run("result['tail'] = close.tail(3)\nresult['m'] = np.float64(1.5)\nresult['k'] = np.int64(2)")[
        "data"
    ]
    assert len(data["result"]["tail"]) == 3 and data["result"]["m"] == 1.5 and data["result"]["k"] == 2


def test_script_errors_are_reported_with_their_type() -> None:
    assert "ZeroDivisionError" in _error("x = 1 / 0")


def test_execute_script_api_and_memmap_refused() -> None:
    import pandas as pd

    bars = pd.DataFrame(
        {k: [1.0, 2.0, 3.0] for k in ("open", "high", "low", "close", "volume")},
        index=pd.DatetimeIndex(["2020-01-01", "2020-01-02", "2020-01-03"]),
    )
    run = execute_script(code="result['n'] = len(close)", bars=bars, settings=Settings())
    assert run.result == {"n": 3} and run.elapsed_ms >= 0
    with pytest.raises(SandboxError) as info:
        execute_script(
            code="x = np.memmap('/tmp/finagent_escape', mode='w+')", bars=bars, settings=Settings()
        )
    assert info.value.kind == "refused"
    assert not Path("/tmp/finagent_escape").exists()


def test_history_ref_bars_are_used_and_cited() -> None:
    ctx = _ctx()
    hist = run_tool(name="get_history", arguments={"symbol": "AAPL", "period": "3mo"}, ctx=ctx)
    env = run_tool(
        name="run_indicator_script",
        arguments={"symbol": "AAPL", "code": "result['n'] = len(close)", "history_ref": hist.tool_call_id},
        ctx=ctx,
    )
    assert env.ok and env.data and env.data["result"]["n"] == hist.data["count"]  # type: ignore[index]
    assert hist.tool_call_id in env.source_refs


def test_the_child_cannot_open_files_after_the_descriptor_cap(tmp_path: Path) -> None:
    """OS-level backstop: after ``_cap_resources`` any open() fails (EMFILE), whatever the route."""
    import subprocess
    import sys

    from agents.tools.sandbox import RUNNER

    probe = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('runner', {str(RUNNER)!r})\n"
        "runner = importlib.util.module_from_spec(spec); spec.loader.exec_module(runner)\n"
        "runner._cap_resources(256)\n"
        "try:\n"
        "    open('/etc/hostname')\n"
        "    print('OPENED', file=sys.stderr)\n"
        "except OSError as exc:\n"
        "    print('REFUSED', exc.errno, file=sys.stderr)\n"
        "import socket\n"
        "try:\n"
        "    socket.socket()\n"
        "    print('SOCKET', file=sys.stderr)\n"
        "except OSError as exc:\n"
        "    print('REFUSED', exc.errno, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.stderr.count("REFUSED 24") == 2, out.stderr  # EMFILE for the file and the socket
