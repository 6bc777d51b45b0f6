"""The Rationale and Risk flags of a real report print each number as the report's Quote and
Indicators tables print it (docs/usage.md): the same string for the same value, prices to the
cent, fractions as percentages, volumes with thousands separators. Read from the five stored
reports (tests/regression/snapshots/), which test_report_snapshots.py keeps equal to what the
code writes now."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

SNAPSHOTS = sorted((Path(__file__).resolve().parent / "snapshots").glob("*.json"))
_ROW = re.compile(r"^\| ([^|]+) \| ([^|]+) \|$", re.M)
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d(?:\d|,(?=\d))*(?:\.\d+)?")


def _section(markdown: str, heading: str) -> str:
    """The text of ``## heading`` up to the next ``## `` heading, citations removed."""
    match = re.search(rf"^## {re.escape(heading)}[^\n]*\n(.*?)(?=^## |\Z)", markdown, re.M | re.S)
    assert match, heading
    return re.sub(r" `\[[^\]]+\]`", "", match.group(1))


def _table(markdown: str, heading: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, v in _ROW.findall(_section(markdown, heading))}


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.stem)
def test_rationale_numbers_read_as_in_the_tables(path: Path) -> None:
    markdown = json.loads(path.read_text())["markdown"]
    ind, quote = _table(markdown, "Indicators"), _table(markdown, "Quote")
    rationale = _section(markdown, "Rationale")
    # the same strings as the Indicators table
    assert f"fifty-day SMA {ind['SMA(50)']}" in rationale
    assert f"two-hundred-day SMA {ind['SMA(200)']}" in rationale
    assert f"RSI {ind['RSI(14)']} is " in rationale
    assert f"ADX {ind['ADX(14)']} is " in rationale
    assert (
        f"MACD line {ind['MACD(12,26,9) line']} is " in rationale
        and f"its signal line {ind['MACD signal']} (histogram {ind['MACD histogram']})" in rationale
    )
    assert ind["Bollinger(20,2) lower"] in rationale or ind["Bollinger(20,2) upper"] in rationale
    # and as the Quote table: price and change to the cent, the change in %, the volume whole
    assert (
        f"Latest quote (as reported): price {quote['current_price']}, change {quote['change']} "
        f"({quote['change_percent']}), volume {quote['volume']}." in rationale
    )
    # no raw tool value is left in the prose: no number with more than two decimals
    prose = rationale + (_section(markdown, "Risk flags") if "## Risk flags" in markdown else "")
    assert [n for n in _NUMBER.findall(prose) if len(n.partition(".")[2]) > 2] == []
    assert re.search(r"Close \d[\d,]*\.\d\d ", rationale)  # a price prints to the cent ("584.00")
