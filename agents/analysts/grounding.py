"""Numeric grounding: every number in generated text must come from a cited tool output.

A number printed with ``d`` decimals matches a tool value ``v`` when ``round(v, d)`` equals it
(so "63.21" matches 63.2149 but not 63.3, and "483.20" matches 483.1986: the report prints
prices to the cent, ``core.display``); a percentage "1.45%" or "1.45 %" also matches a fraction
``v`` with ``round(100*v, d)``; "$1,234.5" is read as 1234.5. Parameters inside indicator labels
such as ``RSI(14)``, ``MACD(12,26,9)`` or "52-week" are labels, not facts, and are skipped.
Integers match integers exactly (counts, volumes).

Attribution (:func:`misattributed`): a number printed right after the name of a measure ("RSI
-0.8923", "the previous close of $186.18", "P/E ratio 15.45") must be a value of that measure
in the cited outputs, not merely some value of them: the real 0.5B model wrote "The RSI ... is
at -0.8923", a MACD value of the same output (docs/benchmarks.md, "Local 0.5B model").
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

_LABEL_RE = re.compile(
    r"\b[A-Za-z][A-Za-z_]*\s?\(\s*\d+(?:\s*,\s*\d+)*\s*\)|\b52[- ]?w(?:eek)?\b|\b\d+-day\b", re.I
)
#: A number, its sign, a leading ``$``, thousands separators (a comma followed by a digit: the
#: comma after "volume 19,730,300, ..." ends the sentence's item, not the number) and a ``%``
#: right after it or after one space: the report prints percentages as "-2.48 %"
#: (``core.display``), and "2.48 %" read as the plain number 2.48 would match no fraction of a
#: tool output.
_NUMBER_RE = re.compile(r"(?<![\w.])([-+]?\$?\d(?:\d|,(?=\d))*(?:\.\d+)?)((?: ?%)?)")
_ISO_DATE_RE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
#: A tool_call_id as this product writes them (``<tool name>_<12 hex>``): a citation, no number.
TOOL_CALL_ID = re.compile(r"\b[a-z_]+_[0-9a-f]{12}\b")


@dataclass(frozen=True)
class PrintedNumber:
    """A number as it appears in text: its value, decimals shown, and whether it had a ``%``."""

    text: str
    value: float
    decimals: int
    percent: bool


def extract_numbers(text: str) -> list[PrintedNumber]:
    """Numbers in ``text`` that state facts (labels, ISO dates and tool_call_ids removed)."""
    cleaned = TOOL_CALL_ID.sub(" ", _ISO_DATE_RE.sub(" ", _LABEL_RE.sub(" ", text)))
    found = []
    for match in _NUMBER_RE.finditer(cleaned):
        found.append(_printed_number(match))
    return found


def printed_value(value: float) -> str:
    """A numeric JSON value of an answer (a price level, USD) as statement text for
    :func:`extract_numbers`: a float with at most twelve decimals and no trailing zeros
    (``190.2``), an int as it is. The text a dropped list item is listed and found again by
    (``agents.analysts.enforce``, ``agents.analysts.claims.label_problems``). Raises nothing."""
    return f"{value:.12f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)


def _printed_number(match: re.Match[str]) -> PrintedNumber:
    """The :class:`PrintedNumber` of a :data:`_NUMBER_RE` match ("$1,234.5" → 1234.5, 1 decimal)."""
    raw, pct = match.group(1), match.group(2)
    digits = raw.replace("$", "").replace(",", "")
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    return PrintedNumber(text=raw + pct, value=float(digits), decimals=decimals, percent=bool(pct))


def numeric_values(obj: Any) -> Iterable[float]:
    """Every finite int/float inside a JSON-like ``obj`` (bools excluded)."""
    if isinstance(obj, bool) or obj is None:
        return
    if isinstance(obj, int | float):
        if math.isfinite(obj):
            yield float(obj)
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from numeric_values(value)
    elif isinstance(obj, list | tuple):
        for value in obj:
            yield from numeric_values(value)


def matches(printed: PrintedNumber, value: float) -> bool:
    """True when ``printed`` is ``value`` shown with ``printed.decimals`` decimals (or as a %)."""
    candidates = [value, abs(value)]
    if printed.percent:
        candidates += [100 * value, abs(100 * value)]
    target = abs(printed.value)
    return any(
        math.isclose(round(c, printed.decimals), target, abs_tol=10 ** -(printed.decimals + 6))
        for c in candidates
    )


class ValueIndex:
    """The numeric values of one tool output, indexed for :func:`matches`-style lookups.

    Rounded magnitudes are built lazily once per (decimals shown, percent or not) and then
    reused for every statement citing the same output, so a 500-bar history is indexed once per
    review instead of once per statement (measured: review 35.6 → 11.8 ms per analysis).
    """

    def __init__(self, obj: Any) -> None:
        self._values = [abs(v) for v in numeric_values(obj)]
        self._rounded: dict[tuple[int, bool], set[float]] = {}

    @classmethod
    def of_values(cls, values: Iterable[float]) -> ValueIndex:
        """An index of already extracted finite values: the same index as of an object whose
        :func:`numeric_values` are ``values`` (order and repeats do not matter)."""
        index = cls(None)
        index._values = [abs(float(v)) for v in values]
        return index

    def has(self, printed: PrintedNumber) -> bool:
        """True when ``printed`` is one of the values shown with its decimals (or as a %)."""
        key = (printed.decimals, printed.percent)
        rounded = self._rounded.get(key)
        if rounded is None:
            rounded = {round(v, printed.decimals) for v in self._values}
            if printed.percent:
                rounded |= {round(100 * v, printed.decimals) for v in self._values}
            self._rounded[key] = rounded
        return round(abs(printed.value), printed.decimals) in rounded


def index_of(source: Any) -> ValueIndex:
    """``source`` itself when it is already a :class:`ValueIndex`, else a new index of it."""
    return source if isinstance(source, ValueIndex) else ValueIndex(source)


def unverified_numbers(text: str, sources: Iterable[Any]) -> list[str]:
    """Printed numbers in ``text`` that match no numeric value of any ``sources`` object.

    ``sources`` are JSON-like tool outputs or prebuilt :class:`ValueIndex` objects (pass those
    when the same outputs are checked against many texts).
    """
    printed = extract_numbers(text)
    if not printed:
        return []
    indexes = [index_of(source) for source in sources]
    return [p.text for p in printed if not any(index.has(p) for index in indexes)]


def unverified_in_json(
    obj: Any, sources: Iterable[Any], *, skip_keys: frozenset[str] = frozenset()
) -> tuple[int, list[str]]:
    """Grounding of LLM-written JSON: every number in its strings (as :func:`extract_numbers`
    reads text) and every numeric value must match a value of ``sources``.

    A numeric value is checked as printed with at most twelve decimals, trailing zeros dropped
    (``145.23`` must match a source value at two decimals). Keys in ``skip_keys`` (judgements such as
    ``confidence``, and ``source_refs``) are not checked. Returns ``(numbers_checked,
    unverified)`` with the unverified numbers as printed.
    """
    texts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, bool) or value is None:
            return
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, int | float):
            if math.isfinite(value):
                texts.append(
                    f"{value:.12f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)
                )
        elif isinstance(value, dict):
            for key, item in value.items():
                if key not in skip_keys:
                    walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    walk(obj)
    pool = [index_of(source) for source in sources]
    checked = sum(len(extract_numbers(t)) for t in texts)
    unverified = [n for t in texts for n in unverified_numbers(t, pool)]
    return checked, unverified


#: Measures a statement may name (:func:`misattributed`): the name shown in a problem, the
#: pattern of the name in text, and the keys of tool outputs (``technical_indicators``,
#: ``get_stock_data``, ``get_fundamentals``) holding its value. Listed longest name first: a
#: text span is taken by the first pattern that matches it.
MEASURES: tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...] = (
    ("previous close", re.compile(r"\bprevious\s+close\b", re.I), ("previous_close",)),
    (
        "MACD signal line",
        re.compile(r"\bMACD\s+signal(?:\s+line)?s?\b|\bsignal\s+line\b", re.I),
        ("macd_signal",),
    ),
    ("MACD", re.compile(r"\bMACD\b(?:\s*\(\s*\d+(?:\s*,\s*\d+)*\s*\))?(?:\s+line)?", re.I), ("macd",)),
    ("RSI", re.compile(r"\bRSI\b(?:\s*\(\s*\d+\s*\))?", re.I), ("rsi_14",)),
    ("ADX", re.compile(r"\bADX\b(?:\s*\(\s*\d+\s*\))?", re.I), ("adx_14",)),
    (
        "fifty-day SMA",
        re.compile(
            r"\b(?:fifty|50)[- ]day\s+(?:SMA|simple\s+moving\s+average|moving\s+average)\b"
            r"|\bSMA\s*\(?\s*50\b\)?",
            re.I,
        ),
        ("sma_50",),
    ),
    (
        "two-hundred-day SMA",
        re.compile(
            r"\b(?:two[- ]hundred|200)[- ]day\s+(?:SMA|simple\s+moving\s+average|moving\s+average)\b"
            r"|\bSMA\s*\(?\s*200\b\)?",
            re.I,
        ),
        ("sma_200",),
    ),
    # a moving average of a period the outputs do not hold: no value of its own, so a number
    # read with it is misattributed when it is another measure's ("the five-day SMA 128.261"
    # with 128.261 the fifty-day SMA, as the 0.5B model wrote)
    (
        "moving average of another period",
        re.compile(
            r"\b[\w-]+[- ](?:day|week|month|year)\s+(?:SMA|simple\s+moving\s+average|moving\s+average)\b",
            re.I,
        ),
        (),
    ),
    # in digits or in words, as the scorer's risk flag writes it ("the fifty-two-week high
    # 69.655"): read as another period, the 0.5B model's restatement of that flag was dropped
    *(
        (
            f"52-week {end}",
            re.compile(rf"\b(?:52|fifty[- ]two)[- ]?w(?:ee)?k?\s+{end}\b", re.I),
            (f"52w_{end}", f"{end}_52w"),
        )
        for end in ("high", "low")
    ),
    # likewise a high or low of a period the outputs do not hold ("the 50-day high of $133.9804"
    # with 133.9804 the 52-week high, as the 0.5B model wrote); after the 52-week ones, which
    # take their own spans first
    (
        "high or low of another period",
        re.compile(r"\b[\w-]+[- ](?:day|week|month|year)\s+(?:high|low)\b", re.I),
        (),
    ),
    ("P/E ratio", re.compile(r"\b(?:P/E|PE|price[- ]to[- ]earnings)(?:\s+ratio)?\b", re.I), ("pe_ratio",)),
    # the earnings trend (get_fundamentals' trailing fields, get_earnings_dates' quarters): the
    # 0.5B model wrote "The EPS ratio is 15.45" with 15.45 the P/E (docs/benchmarks.md)
    (
        "EPS growth",
        re.compile(r"\b(?:EPS|earnings)\s+growth\b|\beps_growth_yoy\b", re.I),
        ("eps_growth_yoy",),
    ),
    (
        "EPS surprise",
        re.compile(r"\b(?:EPS|earnings)\s+surprises?\b|\beps_surprise_mean_4q\b", re.I),
        ("eps_surprise_mean_4q", "surprise"),
    ),
    (
        "EPS estimate",
        re.compile(r"\b(?:EPS|earnings)\s+(?:estimates?|consensus)\b|\beps_(?:estimate|consensus)\b", re.I),
        ("eps_estimate", "eps_consensus"),
    ),
    ("EPS", re.compile(r"\bEPS\b(?:\s+ratio)?|\beps_actual\b", re.I), ("eps_actual",)),
)
#: Most characters between a measure's name and the number it is read with ("RSI (Relative
#: Strength Index) is at 41.2": 32).
ATTRIBUTION_GAP = 40
#: Output keys whose values are fractions (0.0833 = 8.33 %): the margins and return ratios and
#: the earnings trend of ``get_fundamentals``, a quarter's ``surprise`` of
#: ``get_earnings_dates``. A percentage read with their measure must be the value times 100:
#: "an EPS growth of 0.0833%" for a growth of 0.0833 is a hundredfold misreading the real 0.5B
#: model wrote (docs/benchmarks.md), which the plain value check (:func:`matches`, a percentage
#: or the bare value) lets through. The fundamental readings print these fields as percentages
#: (``agents.analysts.readings``).
FRACTION_KEYS = frozenset({"gross_margin", "roic", "eps_growth_yoy", "eps_surprise_mean_4q", "surprise"})


def keyed_values(obj: Any) -> dict[str, list[float]]:
    """The finite numbers of a JSON-like ``obj`` by the (lower-case) key they sit under, at any
    depth (a list under a key counts for that key), e.g. ``{"rsi_14": [41.2], ...}`` of a
    ``technical_indicators`` output. Raises nothing."""
    out: dict[str, list[float]] = {}

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                found = list(numeric_values(item)) if not isinstance(item, dict) else []
                if found:
                    out.setdefault(str(key).lower(), []).extend(found)
                walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                if isinstance(item, dict | list | tuple):
                    walk(item)

    walk(obj)
    return out


def _blank(match: re.Match[str]) -> str:
    return " " * len(match.group(0))


@dataclass(frozen=True)
class Mention:
    """A measure named in a text (:data:`MEASURES`): its span, shown name and output keys."""

    start: int
    end: int
    name: str
    keys: tuple[str, ...]


def measure_mentions(
    text: str, measures: Iterable[tuple[str, re.Pattern[str], tuple[str, ...]]] = MEASURES
) -> list[Mention]:
    """The measures ``text`` names (``measures``, :data:`MEASURES` by default; a span is taken
    by the first pattern that matches it), in text order. Raises nothing."""
    taken: list[Mention] = []
    for name, pattern, keys in measures:
        for m in pattern.finditer(text):
            if not any(m.start() < t.end and t.start < m.end() for t in taken):
                taken.append(Mention(m.start(), m.end(), name, keys))
    return sorted(taken, key=lambda t: t.start)


def number_spans(text: str) -> list[tuple[int, int, PrintedNumber]]:
    """The numbers of ``text`` that state facts (as :func:`extract_numbers`) with their spans
    ``(start, end, number)`` in ``text``. Raises nothing."""
    cleaned = TOOL_CALL_ID.sub(_blank, _ISO_DATE_RE.sub(_blank, _LABEL_RE.sub(_blank, text)))
    return [(m.start(), m.end(), _printed_number(m)) for m in _NUMBER_RE.finditer(cleaned)]


def measure_values(mention: Mention, keyed: Mapping[str, list[float]]) -> list[float]:
    """The values ``keyed`` (:func:`keyed_values` of the cited outputs) holds for ``mention``'s
    measure (``[]`` when the outputs do not hold it)."""
    return [v for key in mention.keys for v in keyed.get(key, [])]


def read_number(
    mention: Mention, numbers: list[tuple[int, int, PrintedNumber]], *, until: int
) -> tuple[int, int, PrintedNumber] | None:
    """The number read with ``mention``: the first of ``numbers`` after its name, at most
    :data:`ATTRIBUTION_GAP` characters after it and before ``until`` (the next measure's
    name); ``None`` when there is none."""
    number = next((n for n in numbers if n[0] >= mention.end), None)
    if number is None or number[0] - mention.end > ATTRIBUTION_GAP or number[0] >= until:
        return None
    return number


def _matches_measure(printed: PrintedNumber, value: float, key: str) -> bool:
    """:func:`matches`, except that a percentage read with a fraction (:data:`FRACTION_KEYS`)
    must be the value times 100."""
    if printed.percent and key in FRACTION_KEYS:
        return matches(replace(printed, percent=False), 100 * value)
    return matches(printed, value)


def _read_before(
    mention: Mention, numbers: list[tuple[int, int, PrintedNumber]], text: str
) -> PrintedNumber | None:
    """The percentage printed right before ``mention``'s name, only white space between
    ("41.16% EPS growth"), if any."""
    before = [n for n in numbers if n[1] <= mention.start]
    if before and before[-1][2].percent and not text[before[-1][1] : mention.start].strip():
        return before[-1][2]
    return None


def misattributed(text: str, keyed: Mapping[str, list[float]]) -> list[str]:
    """Numbers of ``text`` read with a measure they are not a value of, as
    ``"<number> (not the <measure>)"``.

    A number is read with a measure (:data:`MEASURES`) when it is the first number after the
    measure's name, at most :data:`ATTRIBUTION_GAP` characters after it, with no other measure
    named in between (:func:`read_number`). It is misattributed when ``keyed``
    (:func:`keyed_values` of the cited outputs) holds values of that measure and none
    :func:`matches` it; a measure the outputs do not hold is not judged, except a moving
    average of another period, whose number is misattributed when it is a value of another
    measure (``"128.261 (not a five-day SMA: the fifty-day SMA)"``). Labels, ISO dates and
    tool_call_ids are no numbers (as in :func:`extract_numbers`). Raises nothing."""
    taken = measure_mentions(text)
    if not taken:
        return []
    numbers = number_spans(text)
    out = []
    for index, mention in enumerate(taken):
        following = taken[index + 1].start if index + 1 < len(taken) else len(text)
        after = read_number(mention, numbers, until=following)
        before = _read_before(mention, numbers, text)
        for printed in (before, after[2] if after else None):
            if printed is not None:
                out += _misread(printed, mention, text, keyed)
    return out


def _misread(
    printed: PrintedNumber, mention: Mention, text: str, keyed: Mapping[str, list[float]]
) -> list[str]:
    """``[problem]`` when ``printed``, read with ``mention``, is not a value of its measure
    (:func:`misattributed`), else ``[]``."""
    if not mention.keys:  # a measure no output holds: wrong when it is another's value
        other = next(
            (
                name
                for name, _, keys in MEASURES
                if keys and any(matches(printed, v) for k in keys for v in keyed.get(k, []))
            ),
            None,
        )
        return [f"{printed.text} (not a {text[mention.start : mention.end]}: the {other})"] if other else []
    values = [(key, v) for key in mention.keys for v in keyed.get(key, [])]
    if values and not any(_matches_measure(printed, v, key) for key, v in values):
        return [f"{printed.text} (not the {mention.name})"]
    return []
