"""Run the five fixed (symbol, as_of) analyses through the embedded pipeline and print their
reports with run-specific ids replaced, so two runs (or two versions of the code) compare equal.

The analysis id is a random UUID and every ``tool_call_id`` is derived from it, so both are
replaced by their order of first appearance (``<analysis>``, ``<get_history#1>``, ...). The
JSON's floats are written to 12 significant digits: their last bits depend on the machine
(numpy's SIMD kernels sum in a different order on another CPU, e.g. the risk forecast's VaR came
out as 17.259397640678582 on one machine and 17.25939764067859 on another), while the Markdown
prints them rounded already. Nothing else is touched: a changed number (beyond the 12th digit),
word, key or order is a difference.

Usage (regenerate the stored snapshots after a deliberate behaviour change, and read them):
    XDG_STATE_HOME=$(mktemp -d) uv run python tests/regression/snapshot.py tests/regression/snapshots
"""

from __future__ import annotations

import json
import re
import sys
from datetime import date
from pathlib import Path
from typing import Any

# Embedded data (bokeh_sampledata) covers these five symbols; dates spread over 2010-2013 and
# include one with an earnings report within two weeks (AAPL 2012-07-17 → EARNINGS_SOON).
PAIRS: list[tuple[str, str]] = [
    ("AAPL", "2012-06-29"),
    ("AAPL", "2012-07-17"),
    ("MSFT", "2010-06-30"),
    ("GOOG", "2011-03-15"),
    ("IBM", "2013-02-28"),
]

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_CALL_ID = re.compile(r"\b([a-z][a-z0-9_]*?)_([0-9a-f]{12})\b")


def normalize(text: str) -> str:
    """Replace UUIDs and tool_call_ids in ``text`` by stable placeholders in order of appearance."""
    seen: dict[str, str] = {}

    def uuid(m: re.Match[str]) -> str:
        return seen.setdefault(m.group(0), f"<uuid#{sum(v.startswith('<uuid') for v in seen.values()) + 1}>")

    def call(m: re.Match[str]) -> str:
        tool = m.group(1)
        n = sum(v.startswith(f"<{tool}#") for v in seen.values()) + 1
        return seen.setdefault(m.group(0), f"<{tool}#{n}>")

    return _CALL_ID.sub(call, _UUID.sub(uuid, text))


def round_floats(value: Any, *, digits: int = 12) -> Any:
    """``value`` (parsed JSON) with every float rounded to ``digits`` significant digits, so a
    snapshot does not depend on the machine's floating-point summation order (module docstring);
    ints, strings, keys and order are kept."""
    if isinstance(value, float):
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {k: round_floats(v, digits=digits) for k, v in value.items()}
    if isinstance(value, list):
        return [round_floats(v, digits=digits) for v in value]
    return value


def snapshot(symbol: str, as_of: str) -> dict[str, Any]:
    """Run one analysis in embedded mode; return ``{"json": ..., "markdown": ...}`` normalised."""
    from core.settings import get_settings
    from tasks import enqueue_analysis  # a producer process installs the task queue through tasks

    handle = enqueue_analysis(symbol, as_of=date.fromisoformat(as_of), settings=get_settings())
    row = handle.wait(timeout=300)
    blob = json.dumps({"json": row["report_json"], "markdown": row["report"]}, indent=1, sort_keys=True)
    result: dict[str, Any] = round_floats(json.loads(normalize(blob)))
    return result


def main(out_dir: str) -> None:
    """Write ``<symbol>_<as_of>.json`` for every pair into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for symbol, as_of in PAIRS:
        data = snapshot(symbol, as_of)
        (out / f"{symbol}_{as_of}.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"{symbol} {as_of}: {data['json']['headline']}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1])
