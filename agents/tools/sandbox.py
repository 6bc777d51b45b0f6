"""``run_indicator_script``: user-supplied indicator code in a restricted child process.

The rules (docs/design.md, "Indicator sandbox"): indicator numbers are computed by code, not by the LLM;
``pd``, ``np``, ``ta`` (pandas-ta) and the OHLC series are pre-injected; ``__import__``/``os``/
``sys`` are blocked; 3 s timeout (configurable); the script fills a ``result`` dict.

How each guarantee is enforced:

* restriction: RestrictedPython byte code (no ``_`` names or attributes, guarded getattr/getitem/
  write, no ``import``), a builtins allowlist without ``open``/``__import__``/``getattr`` of
  private names, an attribute denylist for pandas/numpy I/O (``read_*``, ``to_csv``, ``load`` ...)
  and pandas-ta exposed only through its indicator functions (:mod:`agents.quant.sandbox.runner`);
* file and network access: besides the above, the child caps ``RLIMIT_NOFILE`` at the
  descriptors already open, so ``open()`` and ``socket()`` fail at the OS level;
* time: the child is a separate process (``python -I``, its own session); the parent kills its
  process group when ``settings.analysis.sandbox_timeout`` seconds of wall clock pass after the child
  reported ``ready`` (imports, ~0.6 s, are not charged to the script);
* memory: the child caps ``RLIMIT_AS`` at its size after imports + ``settings.analysis.sandbox_memory_mb``,
  so ``[0] * 10**10`` raises ``MemoryError`` inside the child and becomes an error envelope;
* output: ``result`` must be ``{str: finite float | int | str | bool | list of those}``, at most
  64 keys, lists ≤ 1000 items, strings ≤ 1000 chars; validated again here with pydantic.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
)

from agents.tools.bars import adjusted_bars, bars_header, iso_dates
from agents.tools.envelope import ErrorCode
from agents.tools.fields import HistoryRef, Period, Symbol
from agents.tools.history import history_frame
from agents.tools.registry import ToolContext, ToolInputError, ToolOutput, register
from core.settings import Settings

RUNNER = Path(__file__).resolve().parent.parent / "quant" / "sandbox" / "runner.py"
MAX_CODE_CHARS = 20_000
_MAX_ANSWER_BYTES = 2_000_000

Scalar = (
    Annotated[float, Field(allow_inf_nan=False)]
    | bool
    | int
    | Annotated[str, StringConstraints(max_length=1000)]
)
ResultValue = Scalar | Annotated[list[Scalar], Field(max_length=1000)]
_RESULT: TypeAdapter[dict[str, Any]] = TypeAdapter(
    Annotated[
        dict[Annotated[str, StringConstraints(min_length=1, max_length=64)], ResultValue],
        Field(max_length=64),
    ]
)


class SandboxError(Exception):
    """The script was refused, failed, timed out or returned an invalid ``result``.

    ``kind`` is one of ``refused``, ``script_error``, ``timeout``, ``memory``,
    ``invalid_result``, ``crashed``.
    """

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class SandboxRun:
    """A successful run: the validated ``result`` and the script's wall-clock ``elapsed_ms``."""

    result: dict[str, Any]
    elapsed_ms: float


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # the child's own session: it and anything it started
    proc.wait()


class _LineReader:
    """Newline-terminated lines from the child's stdout, each with a deadline (monotonic s)."""

    def __init__(self, proc: subprocess.Popen[bytes]):
        assert proc.stdout is not None
        self._fd = proc.stdout.fileno()
        self._buf = bytearray()

    def line(self, deadline: float) -> bytes | None:
        """The next line (b"" at end of output), or None when ``deadline`` passes first."""
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self._fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(self._fd, 65536)
            if not chunk or len(self._buf) > _MAX_ANSWER_BYTES:
                out, self._buf = bytes(self._buf), bytearray()
                return out
            self._buf += chunk
        line, _, rest = bytes(self._buf).partition(b"\n")
        self._buf = bytearray(rest)
        return line


def execute_script(*, code: str, bars: pd.DataFrame, settings: Settings) -> SandboxRun:
    """Run ``code`` in a fresh restricted child process over ``bars``.

    Args:
        code: the indicator script; it reads ``open/high/low/close/volume`` (``pd.Series`` with a
            DatetimeIndex) and ``pd``, ``np``, ``ta``, and fills ``result``.
        bars: frame with columns ``open, high, low, close, volume`` (already adjusted).
        settings: ``sandbox_timeout`` (s, wall clock for the script), ``sandbox_memory_mb``,
            ``sandbox_startup_timeout`` (s, for the child's imports).
    Returns:
        The validated result and the script's wall-clock time in ms.
    Raises:
        SandboxError: refused code, script exception, timeout, memory cap, invalid result, crash.
    """
    payload = {
        "code": code,
        "index": iso_dates(bars.index),
        **{
            name: [float(v) for v in bars[name].tolist()]
            for name in ("open", "high", "low", "close", "volume")
        },
        "memory_mb": settings.analysis.sandbox_memory_mb,
    }
    with tempfile.TemporaryDirectory(prefix="finagent-sandbox-") as tmp:
        payload_path = Path(tmp) / "payload.json"
        payload_path.write_text(json.dumps(payload))
        env = {
            "PATH": os.defpath,
            "HOME": tmp,
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "NUMBA_NUM_THREADS": "1",
        }
        with (Path(tmp) / "stderr.txt").open("wb") as err:
            proc = subprocess.Popen(  # noqa: S603 - fixed argv: this interpreter and our runner
                [sys.executable, "-I", str(RUNNER), str(payload_path)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                cwd=tmp,
                env=env,
                start_new_session=True,
            )
            try:
                reader = _LineReader(proc)
                first = reader.line(time.monotonic() + settings.analysis.sandbox_startup_timeout)
                started = time.monotonic()
                answer_line = first
                if first is not None and first.startswith(b'{"ready"'):
                    answer_line = reader.line(started + settings.analysis.sandbox_timeout)
                    if answer_line is None:
                        raise SandboxError(
                            "timeout",
                            f"the script ran longer than {settings.analysis.sandbox_timeout:g} s "
                            "and was stopped",
                        )
                elif first is None:
                    raise SandboxError("crashed", "the sandbox process did not start in time")
                elapsed_ms = (time.monotonic() - started) * 1000.0
            finally:
                _kill(proc)
        stderr_tail = (Path(tmp) / "stderr.txt").read_bytes()[-400:].decode(errors="replace")
    try:
        answer = json.loads(answer_line or b"")
    except ValueError:
        raise SandboxError(
            _crash_kind(proc.returncode, stderr_tail),
            f"the sandbox process ended without an answer (exit {proc.returncode}): {stderr_tail}",
        ) from None
    if not answer.get("ok"):
        raise SandboxError(str(answer.get("kind", "script_error")), str(answer.get("message", "")))
    try:
        result = _RESULT.validate_python(answer.get("result"))
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error.get("loc", ()))
        raise SandboxError("invalid_result", f"result {where}: {error.get('msg')}") from None
    return SandboxRun(result=result, elapsed_ms=round(elapsed_ms, 1))


class IndicatorScriptInput(BaseModel):
    """``{symbol, code, period?, history_ref?}``."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol = Field(description="Stock ticker, e.g. AAPL")
    code: str = Field(
        min_length=1,
        max_length=MAX_CODE_CHARS,
        description=(
            "Python indicator code. Given: pd, np, ta (pandas-ta) and open, high, low, close, volume "
            "(pd.Series of adjusted daily bars up to the analysis date). Fill the dict `result` with "
            "str -> number/str/bool or list of those. No imports, no names starting with '_'."
        ),
    )
    period: Period = Field(default="1y", description="Bars to load when history_ref is not given")
    history_ref: HistoryRef | None = Field(
        default=None, description="tool_call_id of a get_history call to use instead"
    )


#: How a child that hit its address-space cap in native code dies without a Python
#: ``MemoryError``: killed (the kernel's OOM killer: SIGKILL), or aborted by an allocator that
#: got NULL (SIGABRT, e.g. ``std::bad_alloc``; SIGSEGV/SIGBUS on a failed page mapping).
_MEMORY_SIGNALS = frozenset({signal.SIGKILL, signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS})
_MEMORY_TEXTS = ("MemoryError", "Cannot allocate memory", "bad_alloc", "out of memory")


def _crash_kind(returncode: int | None, stderr_tail: str) -> str:
    """``memory`` when a child that answered nothing died of a memory signal or said so on
    stderr (see :data:`_MEMORY_SIGNALS`), else ``crashed``."""
    if returncode is not None and returncode < 0 and -returncode in _MEMORY_SIGNALS:
        return "memory"
    if any(text in stderr_tail for text in _MEMORY_TEXTS):
        return "memory"
    return "crashed"


# Timeouts and memory kills have codes of their own (a script that is valid but too expensive
# is not "invalid input"); the same script on the same bars hits them again (permanent codes).
_KIND_CODES = {
    "timeout": ErrorCode.TIMEOUT,
    "memory": ErrorCode.RESOURCE_EXHAUSTED,
    "refused": ErrorCode.INVALID_INPUT,
    "script_error": ErrorCode.INVALID_INPUT,
    "invalid_result": ErrorCode.INVALID_INPUT,
    "crashed": ErrorCode.INTERNAL_ERROR,
}
_KIND_HINTS = {
    "timeout": "Make the script faster (vectorised pandas/pandas-ta, no loops over huge ranges).",
    "memory": "Allocate less: work on the given series, not on huge arrays.",
    "refused": "Use only pd, np, ta and the given series; no imports, files, or names starting with '_'.",
    "script_error": "Fix the script error and retry.",
    "invalid_result": "Set result[name] to finite numbers, strings, booleans or lists of those.",
    "crashed": "The sandbox process failed; see the logs.",
}


@register(
    name="run_indicator_script",
    description=(
        "Run a restricted Python indicator script over the adjusted daily OHLCV series of a symbol "
        "(pd, np, ta=pandas-ta, open/high/low/close/volume given; fill `result`). "
        "3 s wall-clock limit; no imports, files or network."
    ),
    input_model=IndicatorScriptInput,
)
def run_indicator_script(params: IndicatorScriptInput, ctx: ToolContext) -> ToolOutput:
    """Run ``params.code`` over adjusted bars ending at ``ctx.as_of``.

    Bars: the ``get_history`` result named by ``history_ref`` (bars after ``as_of`` dropped), or
    ``period`` of daily bars from the provider; prices split/dividend-adjusted and expressed in
    the prices traded on the last bar (:func:`agents.data.market.base.adjusted_ohlc`), USD.

    Returns data ``{symbol, date, bars_used, result: {...}, elapsed_ms}``.

    Raises:
        ToolInputError: ``TIMEOUT`` past ``sandbox_timeout``; ``RESOURCE_EXHAUSTED`` at the memory
            cap (a ``MemoryError`` in the script, or the child killed by a memory signal);
            ``INVALID_INPUT`` for refused code, script errors and invalid results (the message
            says which); ``INTERNAL_ERROR`` if the child crashed otherwise.
    """
    refs: tuple[str, ...] = ()
    raw: pd.DataFrame | None = None
    if params.history_ref:
        data = ctx.result_data(params.history_ref)
        if data is None or "history" not in data or data.get("symbol") != params.symbol:
            raise ToolInputError(
                f"history_ref {params.history_ref!r} is not a successful get_history call for {params.symbol}"
            )
        raw = history_frame(data)
        raw = raw[raw.index <= pd.Timestamp(ctx.as_of)]
        refs = (params.history_ref,)
    bars = adjusted_bars(raw, symbol=params.symbol, period=params.period, ctx=ctx)
    try:
        run = execute_script(code=params.code, bars=bars, settings=ctx.settings)
    except SandboxError as exc:
        raise ToolInputError(
            f"sandbox {exc.kind}: {exc}",
            code=_KIND_CODES.get(exc.kind, ErrorCode.INVALID_INPUT),
            retry_hint=_KIND_HINTS.get(exc.kind),
        ) from None
    out = {
        **bars_header(params.symbol, bars),
        "result": run.result,
        "elapsed_ms": run.elapsed_ms,
    }
    keys = ", ".join(list(run.result)[:6])
    summary = f"{params.symbol} {out['date']}: indicator script → {len(run.result)} values ({keys})"
    return ToolOutput(data=out, summary=summary, source_refs=refs, symbol=params.symbol)
