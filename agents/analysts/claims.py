"""Claims a statement makes about the measures it names, checked against the cited outputs.

Grounding (:mod:`agents.analysts.grounding`) checks that each printed number is a value of a
cited output, and of the measure it is read with. A statement can pass both and still say the
opposite of the data: the real 0.5B model wrote "the close price is currently at $183.88, which
is above the previous close of $186.18" and "likely to be in a downtrend" with the close above
both moving averages (docs/benchmarks.md, "Local 0.5B model"). :func:`contradictions` finds
four kinds of such claims (docs/design.md, "Grounding"):

- **Comparisons**: ``<operand> above|below|higher than|lower than|greater than|exceeds|up
  from|down from <operand>``, an operand being a printed number, a threshold in words ("zero",
  "fifteen", "seventy": :data:`WORD_NUMBERS`; "forty percent" is a distance), or a measure's name
  (:data:`agents.analysts.grounding.MEASURES` plus the close and the Bollinger bands, with the
  number read after it or, without one, its single value in the cited outputs). The left operand
  is the nearest before the comparison word (a percentage right before it, the "3 %" of "3 %
  above", is the distance, skipped), the right one the first after it (a percentage first: a
  distance, not judged). A comparison the numbers contradict is a claim against the data.
- **RSI zones**: "overbought" with the RSI at or below seventy, "oversold" with it at or above
  thirty (the scorer's thresholds, ``agents.quant.scorer.RSI_OVERBOUGHT``/``RSI_OVERSOLD``).
- **Trend**: "downtrend" (or a downward/bearish trend, trending down) with the close above both
  the fifty- and the two-hundred-day SMA, "uptrend" with it below both.
- **A rule's verdict on another measure**: the verdict of a fundamental rule of thumb
  ("modest valuation", "rich valuation": ``agents.analysts.views.FUNDAMENTAL_RULES``, the rules
  whose field a measure of :data:`~agents.analysts.grounding.MEASURES` holds) read after
  another measure's name: copying "P/E below fifteen (modest valuation)", the 0.5B model wrote
  "the EPS ... is 1.95 USD, which is below fifteen (modest valuation)", true of the number and
  a misreading of the rule (docs/benchmarks.md). No data is needed to see it.

:func:`label_problems` holds an answer's judgement labels and price levels to the same data
(the technical analyst's ``trend_direction``, ``trend_quality``, ``extension_risk``,
``support_levels`` and ``resistance_levels``): a trend "down" with the close above both SMAs,
a "strong" trend with the ADX below twenty, a "low" extension with the close above the upper
Bollinger band, a support level above the close. The real 0.5B model's labels were never
checked before; the thresholds are those of the deterministic technical view
(``agents.analysts.deterministic``), so a label the checks refuse is one that view would never
give.

A comparison negated right before its word ("is not above twenty-five", "isn't below") claims
the opposite relation (at most, at least) and is judged as such; a claim hedged just before
its word ("neither overbought nor oversold", "could enter a downtrend", "near overbought",
"could not be above") is not judged, nor is one whose operands the outputs do not settle (a
measure with several values, no number in reach). "The Bollinger bands" are both bands at
once: a comparison is contradicted only when it fails for each. The
checks are deliberately narrow: a missed claim costs nothing that was not there before, a
wrongly refused sentence costs a true one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agents.analysts.deterministic import ADX_MODERATE, ADX_STRONG
from agents.analysts.grounding import (
    ATTRIBUTION_GAP,
    MEASURES,
    measure_mentions,
    measure_values,
    number_spans,
    printed_value,
    read_number,
)
from agents.analysts.views import FUNDAMENTAL_RULES
from agents.quant.scorer import RSI_OVERBOUGHT, RSI_OVERSOLD

#: Names a comparison's operand may have besides :data:`MEASURES`: the close (not "close to")
#: and the Bollinger bands, with the output keys holding their values.
SUBJECTS: tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...] = (
    *MEASURES,
    (
        "upper Bollinger band",
        re.compile(r"\bupper\s+(?:Bollinger\s+)?band\b", re.I),
        ("bb_upper",),
    ),
    (
        "lower Bollinger band",
        re.compile(r"\blower\s+(?:Bollinger\s+)?band\b", re.I),
        ("bb_lower",),
    ),
    (
        "middle Bollinger band",
        re.compile(r"\bmiddle\s+(?:Bollinger\s+)?band\b", re.I),
        ("bb_middle",),
    ),
    (
        # both bands at once ("the Bollinger bands are above 120"): a range, not one value
        "Bollinger bands",
        re.compile(r"(?<!upper\s)(?<!lower\s)(?<!middle\s)\bBollinger\s+bands\b", re.I),
        ("bb_upper", "bb_lower"),
    ),
    (
        "close",
        re.compile(
            r"\b(?:(?:closing|close|current|last|share|stock)\s+price|clos(?:e|ing)\b(?!\s+to\b))", re.I
        ),
        ("close", "current_price"),
    ),
)
#: Comparison words and the relation they claim of (left, right).
COMPARATORS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b(?:above|higher\s+than|greater\s+than|exceed(?:s|ed|ing)?|up\s+from)\b", re.I), ">"),
    (re.compile(r"\b(?:below|lower\s+than|under(?:neath)?\s+(?=the\b)|down\s+from)\b", re.I), "<"),
)
#: Most characters between a comparison's left operand and its word (", which is" of "$183.88,
#: which is above"; "is 3.4% above").
LEFT_GAP = 60
#: Words right before a claim (within :data:`HEDGE_REACH` characters) that negate or hedge it.
HEDGES = re.compile(
    r"\b(?:not|no|never|neither|nor|isn't|aren't|wasn't|without|near|nearing|approach(?:es|ing)?|"
    r"close\s+to|toward|towards|could|may|might|would|if|risk\s+of|avoid|yet)\b|n't\b",
    re.I,
)
#: Thirty characters hold the hedge of "could soon enter a" or "is neither ... nor" before the
#: claim's word, not a clause of its own further back.
HEDGE_REACH = 30
#: Words of a trend claim (:func:`contradictions`, "Trend").
DOWNTREND = re.compile(
    r"\b(?:down[- ]?trend(?:ing)?|downward\s+trend|bearish\s+trend|trending\s+(?:down|lower))\b", re.I
)
UPTREND = re.compile(
    r"\b(?:up[- ]?trend(?:ing)?|upward\s+trend|bullish\s+trend|trending\s+(?:up|higher))\b", re.I
)
_ASIDE = re.compile(r"\([^()]*\)")
#: Numbers written in words (the thresholds of the rules: "below fifteen", "above seventy"),
#: not as a period ("twenty-day") and not as a percentage ("forty percent": a distance).
WORD_NUMBERS = {
    "zero": 0.0,
    "ten": 10.0,
    "fifteen": 15.0,
    "twenty-five": 25.0,
    "twenty": 20.0,
    "thirty": 30.0,
    "forty": 40.0,
    "fifty": 50.0,
    "seventy": 70.0,
    "eighty": 80.0,
}
_WORD_NUMBER = re.compile(
    r"\b(" + "|".join(WORD_NUMBERS) + r")\b(?![- ](?:day|week|month|year)s?\b)(\s*(?:percent|per\s+cent|%))?",
    re.I,
)
#: Characters of a clause boundary: a comparison never reaches across them.
_BOUNDARY = re.compile(r"[;:]|\.(?!\d)")


#: Subjects that stand for several values at once (a claim about them is judged only when it
#: fails for every one of them).
_RANGE_SUBJECTS = frozenset({"Bollinger bands"})
#: A negation right before a comparison word ("is not above", "isn't below"): the claim is the
#: opposite relation (at most / at least), judged like any other.
_NEGATED = re.compile(r"\b(?:not|never)\s+$|n't\s+$", re.I)


@dataclass(frozen=True)
class _Operand:
    start: int
    end: int
    value: float | None
    shown: str
    percent: bool = False
    #: the largest value, for a range subject (``value`` is then the smallest); else ``value``
    high: float | None = None

    @property
    def top(self) -> float | None:
        return self.value if self.high is None else self.high


def _single(values: list[float]) -> float | None:
    """The one value of a measure, or ``None`` when the outputs hold several different ones."""
    distinct = {round(v, 6) for v in values}
    return values[0] if len(distinct) == 1 else None


def _operands(text: str, keyed: Mapping[str, list[float]]) -> list[_Operand]:
    """Numbers, "zero" and named measures of ``text`` in order; a measure followed by the number
    read with it is one operand holding that number."""
    numbers = number_spans(text)
    mentions = measure_mentions(text, SUBJECTS)
    out: list[_Operand] = []
    used: set[int] = set()
    for index, mention in enumerate(mentions):
        following = mentions[index + 1].start if index + 1 < len(mentions) else len(text)
        read = read_number(mention, numbers, until=following)
        if read is not None and not read[2].percent and not _BOUNDARY.search(text, mention.end, read[0]):
            used.add(read[0])
            out.append(_Operand(mention.start, read[1], read[2].value, f"{mention.name} {read[2].text}"))
        elif mention.name in _RANGE_SUBJECTS and (values := measure_values(mention, keyed)):
            low, high = min(values), max(values)
            shown = f"the {mention.name} ({low:g} to {high:g})"
            out.append(_Operand(mention.start, mention.end, low, shown, high=high))
        else:
            value = _single(measure_values(mention, keyed))
            shown = f"the {mention.name}" + (f" ({value:g})" if value is not None else "")
            out.append(_Operand(mention.start, mention.end, value, shown))
    for start, end, number in numbers:
        if start not in used and not any(o.start <= start < o.end for o in out):
            out.append(_Operand(start, end, number.value, number.text, percent=number.percent))
    for m in _WORD_NUMBER.finditer(text):
        if not any(o.start <= m.start() < o.end for o in out):
            word = m.group(1).lower()
            out.append(_Operand(m.start(), m.end(), WORD_NUMBERS[word], word, percent=bool(m.group(2))))
    return sorted(out, key=lambda o: o.start)


def _hedged(text: str, start: int) -> bool:
    return bool(HEDGES.search(text[max(0, start - HEDGE_REACH) : start]))


#: Text between one comparison's right operand and the next comparison word that makes both
#: share the first's subject ("Close 183.88 is above the SMA 180.1 and above the band 175").
_SAME_SUBJECT = re.compile(
    r"\s*,?\s*(?:and|but|yet|while|as\s+well\s+as)?\s*(?:it\s+)?(?:is|was|also|still|remains|stays|trades)?"
    r"\s*(?:also|still)?\s*",
    re.I,
)


def _comparisons(text: str, keyed: Mapping[str, list[float]]) -> list[str]:
    # a parenthesis is an aside ("signal line -0.5 (histogram 0.3) and below zero"): its numbers
    # are no operand of a comparison outside it, and it does not break a shared subject
    asides = [(m.start(), m.end()) for m in _ASIDE.finditer(text)]
    operands = _operands(text, keyed)
    words = sorted(
        ((m, relation) for pattern, relation in COMPARATORS for m in pattern.finditer(text)),
        key=lambda item: item[0].start(),
    )
    out = []
    previous: tuple[_Operand, _Operand] | None = None  # (left, right) of the last comparison
    for m, relation in words:
        # an aside that closes before the comparison word or opens after it hides its operands
        hidden = [(a, b) for a, b in asides if b <= m.start() or a >= m.end()]
        outside = [o for o in operands if not any(a <= o.start < b for a, b in hidden)]
        before = [o for o in outside if o.end <= m.start()]
        if before and before[-1].percent:
            before = before[:-1]  # "3.4% above": the distance, not the left operand
        after = [o for o in outside if o.start >= m.end()]
        # "is not above twenty-five" claims at most twenty-five: judged; other hedges are not
        # ("could not be above" stays unjudged: the hedge before the negation counts)
        negation = _NEGATED.search(text, 0, m.start())
        negated = negation is not None
        hedge_at = m.start() if negation is None else negation.start()
        if not before or not after or after[0].percent or _hedged(text, hedge_at):
            previous = None
            continue
        left, right = before[-1], after[0]
        shared = (
            previous is not None
            and left is previous[1]
            and _SAME_SUBJECT.fullmatch(_ASIDE.sub("", text[left.end : m.start()])) is not None
        )
        if shared and previous is not None:
            left = previous[0]  # "... above A and below B": the subject is the first comparison's
        previous = (left, right)
        if (not shared and m.start() - left.end > LEFT_GAP) or right.start - m.end() > ATTRIBUTION_GAP:
            continue
        if _BOUNDARY.search(text, left.end, m.start()) or _BOUNDARY.search(text, m.end(), right.start):
            continue
        if left.value is None or right.value is None or left.top is None or right.top is None:
            continue
        # judged only when false for every value of a range: "above" fails when all of the
        # left is below all of the right; "not above" (at most) when all of it is above
        below, above = left.top < right.value, left.value > right.top
        wrong = (above if relation == ">" else below) if negated else (below if relation == ">" else above)
        if wrong:
            claim = ("not " if negated else "") + m.group(0)
            out.append(f"{left.shown} {claim} {right.shown} (it is {'below' if below else 'above'})")
    return out


#: The output keys of each :data:`SUBJECTS` name (the zone and trend checks read them by name).
_KEYS_OF = {name: keys for name, _, keys in SUBJECTS}


def _value(keyed: Mapping[str, list[float]], name: str) -> float | None:
    return _single([v for key in _KEYS_OF[name] for v in keyed.get(key, [])])


def _zones(text: str, keyed: Mapping[str, list[float]]) -> list[str]:
    rsi = _value(keyed, "RSI")
    named = {m.name for m in measure_mentions(text, SUBJECTS)} - {"close"}
    # "below the lower Bollinger band (oversold stretch)" is the band's reading, not the RSI's
    if rsi is None or (named and "RSI" not in named):
        return []
    out = []
    for word, wrong, limit in (
        ("overbought", rsi <= RSI_OVERBOUGHT, "at or below seventy"),
        ("oversold", rsi >= RSI_OVERSOLD, "at or above thirty"),
    ):
        for m in re.finditer(rf"\b{word}\b", text, re.I):
            if wrong and not _hedged(text, m.start()):
                out.append(f"{word} (the RSI is {rsi:g}, {limit})")
                break
    return out


def _trends(text: str, keyed: Mapping[str, list[float]]) -> list[str]:
    close, sma50, sma200 = (_value(keyed, n) for n in ("close", "fifty-day SMA", "two-hundred-day SMA"))
    if close is None or sma50 is None or sma200 is None:
        return []
    out = []
    for pattern, wrong, where in (
        (DOWNTREND, close > sma50 and close > sma200, "above"),
        (UPTREND, close < sma50 and close < sma200, "below"),
    ):
        for m in pattern.finditer(text):
            if wrong and not _hedged(text, m.start()):
                out.append(
                    f"{m.group(0)} (the close {close:g} is {where} the fifty-day SMA {sma50:g} "
                    f"and the two-hundred-day SMA {sma200:g})"
                )
                break
    return out


def _rule_verdicts() -> tuple[tuple[re.Pattern[str], str, str], ...]:
    """``(verdict pattern, verdict, measure name)`` for each rule of thumb whose text ends in a
    parenthesised verdict and whose field a measure of :data:`MEASURES` holds."""
    out = []
    for field, _op, _threshold, _kind, text in FUNDAMENTAL_RULES:
        verdict = re.search(r"\(([^()]+)\)\s*$", text)
        measure = next((name for name, _, keys in MEASURES if field in keys), None)
        if verdict and measure:
            words = verdict.group(1)
            out.append((re.compile(rf"\b{re.escape(words)}\b", re.I), words, measure))
    return tuple(out)


#: The verdicts :func:`_verdicts` judges (built once from the rules).
_RULE_VERDICTS = _rule_verdicts()


def _verdicts(text: str) -> list[str]:
    """Rule verdicts of ``text`` read after another measure's name (module docstring), e.g.
    ``"modest valuation read on the EPS (a verdict of the P/E ratio's rule)"``."""
    found = [
        (m, words, measure) for pattern, words, measure in _RULE_VERDICTS for m in pattern.finditer(text)
    ]
    if not found:  # most sentences: no verdict, so no need to find the measures' names
        return []
    mentions = measure_mentions(text, SUBJECTS)
    out = []
    for m, words, measure in found:
        before = [t for t in mentions if t.end <= m.start()]
        if before and before[-1].name != measure:
            out.append(f"{words} read on the {before[-1].name} (a verdict of the {measure}'s rule)")
    return out


def contradictions(text: str, keyed: Mapping[str, list[float]]) -> list[str]:
    """The claims of ``text`` the cited outputs contradict (module docstring), each as one line
    naming the claim and the data, e.g. ``"$183.88 above the previous close 186.18 (it is
    below)"``, ``"overbought (the RSI is 55.2, at or below seventy)"``. ``keyed``: the cited
    outputs' numbers by key (``grounding.keyed_values``); ``[]`` when it settles nothing.
    Raises nothing."""
    if not text.strip():
        return []
    return [*_comparisons(text, keyed), *_zones(text, keyed), *_trends(text, keyed), *_verdicts(text)]


#: The answer keys :func:`label_problems` checks: judgement labels, then price levels.
LABEL_KEYS = ("trend_direction", "trend_quality", "extension_risk")
LEVEL_KEYS = ("support_levels", "resistance_levels")


@dataclass(frozen=True)
class LabelProblem:
    """A judgement label or price level of an answer the cited outputs contradict.

    ``key``: the answer key (``trend_direction``, ``support_levels``, ...); ``given``: what the
    answer holds, as printed (``"down"``, ``"190.2"``); ``why``: one line naming the data, e.g.
    ``"trend_direction down (the close 183.88 is above the fifty-day SMA 180.1 and the
    two-hundred-day SMA 170.2)"``; ``data_label``: for a label, the one the data gives (what
    the deterministic technical view would say), ``None`` for a level (it is dropped).
    """

    key: str
    given: str
    why: str
    data_label: str | None = None


def _trend_label(label: str, keyed: Mapping[str, list[float]]) -> LabelProblem | None:
    close, sma50, sma200 = (_value(keyed, n) for n in ("close", "fifty-day SMA", "two-hundred-day SMA"))
    if close is None or sma50 is None or sma200 is None:
        return None
    above, below = close > sma50 and close > sma200, close < sma50 and close < sma200
    if (label == "down" and above) or (label == "up" and below):
        where, data = ("above", "up") if above else ("below", "down")
        why = (
            f"trend_direction {label} (the close {close:g} is {where} the fifty-day SMA {sma50:g} "
            f"and the two-hundred-day SMA {sma200:g})"
        )
        return LabelProblem("trend_direction", label, why, data)
    return None


def _quality_label(label: str, keyed: Mapping[str, list[float]]) -> LabelProblem | None:
    adx = _value(keyed, "ADX")
    if adx is None:
        return None
    if label == "strong" and adx < ADX_MODERATE:
        return LabelProblem(
            "trend_quality", label, f"trend_quality strong (the ADX is {adx:g}, below twenty)", "weak"
        )
    if label == "weak" and adx > ADX_STRONG:
        why = f"trend_quality weak (the ADX is {adx:g}, above twenty-five)"
        return LabelProblem("trend_quality", label, why, "strong")
    return None


def _extension_label(label: str, keyed: Mapping[str, list[float]]) -> LabelProblem | None:
    close = _value(keyed, "close")
    upper, middle = _value(keyed, "upper Bollinger band"), _value(keyed, "middle Bollinger band")
    if close is None:
        return None
    if label == "low" and upper is not None and close > upper:
        why = f"extension_risk low (the close {close:g} is above the upper Bollinger band {upper:g})"
        return LabelProblem("extension_risk", label, why, "high")
    if label == "high" and middle is not None and close < middle:
        why = f"extension_risk high (the close {close:g} is below the middle Bollinger band {middle:g})"
        return LabelProblem("extension_risk", label, why, "low")
    return None


_LABEL_RULES = {
    "trend_direction": _trend_label,
    "trend_quality": _quality_label,
    "extension_risk": _extension_label,
}


def _level_problems(key: str, levels: Sequence[Any], close: float) -> list[LabelProblem]:
    out = []
    for level in levels:
        if not isinstance(level, int | float) or isinstance(level, bool):
            continue
        wrong = level > close if key == "support_levels" else level < close
        if wrong:
            where, kind = ("above", "support") if key == "support_levels" else ("below", "resistance")
            printed = printed_value(level)
            why = f"{printed} {where} the close {close:g}: no {kind}"
            out.append(LabelProblem(key, printed, why))
    return out


def label_problems(
    result: Mapping[str, Any], keyed: Mapping[str, list[float]], *, keys: Sequence[str]
) -> list[LabelProblem]:
    """The labels and levels among ``keys`` (of :data:`LABEL_KEYS` and :data:`LEVEL_KEYS`) of
    the answer ``result`` that the cited outputs' numbers ``keyed`` (``grounding.keyed_values``)
    contradict (module docstring), in ``keys`` order. A rule whose values the outputs do not
    settle (no close, several different closes, no ADX) judges nothing. Raises nothing."""
    out: list[LabelProblem] = []
    close = _value(keyed, "close")
    for key in keys:
        value = result.get(key)
        rule = _LABEL_RULES.get(key)
        if rule is not None and isinstance(value, str):
            problem = rule(value, keyed)
            out += [problem] if problem is not None else []
        elif key in LEVEL_KEYS and isinstance(value, list) and close is not None:
            out += _level_problems(key, value, close)
    return out
