"""A deterministic, documented technical scorer: indicator values in, BUY/HOLD/SELL out.

:func:`score_technical` is a pure function of the dict :func:`agents.quant.indicators.compute_indicators`
returns (plus an optional quote). Each rule below turns some indicators into a *vote* in
[-1, 1]; votes are weighted, averaged into ``score`` and mapped to a signal. Every sentence the
scorer writes cites the tool calls it came from (docs/design.md, "Source references") and
contains **no number other than an input value**, printed as the report's Quote and Indicators
tables print it (``core.display``: prices to the cent with thousands separators, fractions as
percentages, RSI, ADX and MACD to two decimals, counts whole), so the prose and the tables show
the same numbers and a report's numbers can still be checked mechanically against the tool
outputs (``agents.analysts.grounding`` reads a printed number as the value rounded to the
decimals shown). Thresholds are therefore spelled out in words in the text ("above seventy").
``Component.values`` keep the inputs unrounded.

Rules (weight in brackets; ``close`` is the adjusted close of the last bar):

* ``rsi`` [1.0]: +1 if ``rsi_14`` < 30 (oversold), −1 if > 70 (overbought), else 0.
  Source: Wilder, *New Concepts in Technical Trading Systems* (1978).
* ``macd`` [1.0]: ½·sign(``macd_hist``) (line above/below its signal line: the state after the
  last crossover) + ½·sign(``macd``) (centre line). Source: Appel, *Technical Analysis: Power
  Tools for Active Investors* (2005).
* the **trend group** [1.0 in all, ⅓ each], three rules that vote once together:

  * ``price_vs_sma50``: sign(close − ``sma_50``) × trend factor;
  * ``price_vs_sma200``: sign(close − ``sma_200``) × trend factor;
  * ``sma_cross``: sign(``sma_50`` − ``sma_200``) × trend factor: +1 golden-cross state, −1
    death-cross state (the alignment, not the crossing day: only the last bar is known).

  Source of the three trend rules: the classic moving-average rules (e.g. Murphy, *Technical
  Analysis of the Financial Markets*, 1999, ch. 9). They are collinear: in a steady trend all
  three point the same way (close above both averages and the fifty-day above the two-hundred-day),
  so counting them as three independent rules (weights 0.75 + 1 + 1 of 5.25 before) let one piece
  of evidence, "the stock has been rising", outvote every other rule and pushed the agreement
  share of the confidence towards one. Measured on 20 stocknet tickers, 2013-07..2015-05, that
  confidence was badly over-stated (docs/design.md, "Calibrated probability"). The group now
  weighs as one rule (1.0, the weight of RSI or MACD) and each member a third of it, so the
  group's contribution is its members' average vote; a member that cannot be evaluated lowers
  the coverage by its third.
* ``bollinger`` [0.5]: −1 if close > ``bb_upper``, +1 if close < ``bb_lower``, else 0 (%b > 1 /
  < 0, mean reversion). Source: Bollinger, *Bollinger on Bollinger Bands* (2001); a modest
  weight because Bollinger warns that a tag of a band alone is not a signal.

Trend factor (Wilder 1978, ADX): 1.0 when ``adx_14`` > 25 (a trending market), else 0.5; also
0.5 when ``adx_14`` is missing (trend strength unconfirmed), with a statement saying so.

Aggregation: ``score = Σ wᵢ·voteᵢ / Σ wᵢ`` over the components that could be evaluated, rounded
to 4 dp; ``BUY`` if score ≥ 0.25, ``SELL`` if score ≤ −0.25, else ``HOLD``. A component whose
inputs are missing (``None`` or absent) is skipped with a statement; no value is ever assumed.

Confidence (rounded to 2 dp), ``coverage = Σ w(evaluated) / Σ w(all rules)``:

* BUY/SELL: ``strength = (|score| + agreement) / 2``, where ``agreement`` is the share of the
  voting mass ``Σ wᵢ·|voteᵢ|`` that points the signal's way;
* HOLD: ``strength = ½·(1 − |score| / 0.25)``: a HOLD means "no edge", so at most 0.5;
* ``confidence = min(0.9, strength × coverage)``: capped because indicators alone never justify
  certainty, and reduced in proportion to the rule weight that could not be evaluated.

Risk flags (docs/design.md, "Risk assessor"): ``NEAR_52W_HIGH`` when ``pct_from_52w_high`` ≥ −0.05
(close within 5 % of the 52-week high, boundary included); ``HIGH_VOLATILITY`` when ``hv_20`` >
0.40 (annualised 40 %: roughly twice the long-run volatility of the S&P 500, a common
"high-volatility stock" cut-off; boundary excluded).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Final, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from core.display import decimal2, indicator_text, percent, quote_text, signed_percent, usd, whole

Signal = Literal["BUY", "HOLD", "SELL"]
RiskFlagName = Literal["NEAR_52W_HIGH", "HIGH_VOLATILITY", "LOW_LIQUIDITY", "EARNINGS_SOON"]

RSI_OVERSOLD: Final[float] = 30.0
RSI_OVERBOUGHT: Final[float] = 70.0
ADX_TRENDING: Final[float] = 25.0
WEAK_TREND_FACTOR: Final[float] = 0.5
BUY_THRESHOLD: Final[float] = 0.25
SELL_THRESHOLD: Final[float] = -0.25
CONFIDENCE_CAP: Final[float] = 0.9
NEAR_52W_HIGH_PCT: Final[float] = -0.05
HIGH_VOLATILITY_HV: Final[float] = 0.40
#: LOW_LIQUIDITY below one million USD of average daily traded value over 20 sessions: the
#: usual minimum of institutional liquidity screens (names below it move on small orders).
LOW_LIQUIDITY_USD: Final[float] = 1_000_000.0
#: EARNINGS_SOON when the next earnings date falls within 14 calendar days after as_of (two
#: weeks: the window in which pre-earnings implied volatility typically builds up).
EARNINGS_SOON_DAYS: Final[int] = 14

#: The collinear trend rules (module docstring): one vote between them.
TREND_GROUP: Final[tuple[str, ...]] = ("price_vs_sma50", "price_vs_sma200", "sma_cross")
TREND_GROUP_WEIGHT: Final[float] = 1.0

WEIGHTS: Final[dict[str, float]] = {
    "rsi": 1.0,
    "macd": 1.0,
    **{name: TREND_GROUP_WEIGHT / len(TREND_GROUP) for name in TREND_GROUP},
    "bollinger": 0.5,
}

# Names used in prose: no digits, so the only numbers in a text are input values.
_DISPLAY: Final[dict[str, str]] = {
    "rsi": "RSI",
    "macd": "MACD",
    "price_vs_sma50": "price vs fifty-day SMA",
    "price_vs_sma200": "price vs two-hundred-day SMA",
    "sma_cross": "fifty/two-hundred-day SMA alignment",
    "bollinger": "Bollinger position",
}
# ``get_quotes`` names the price ``price``; ``get_stock_data`` ``current_price``.
_QUOTE_KEYS: Final[dict[str, str]] = {
    "price": "price",
    "current_price": "price",
    "change": "change",
    "change_percent": "change",
    "volume": "volume",
}


class Statement(BaseModel):
    """One sentence of the rationale and the ``tool_call_id`` s it rests on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    source_refs: list[str] = Field(min_length=1)


class Component(BaseModel):
    """One rule's evaluation.

    ``values``: the inputs it used (indicator key → value as given); ``vote`` in [-1, 1]
    (positive = bullish) after any trend factor; ``weight``: the rule's weight in the average.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    values: dict[str, float]
    vote: float = Field(ge=-1.0, le=1.0)
    weight: float = Field(gt=0.0)
    text: str
    source_refs: list[str] = Field(min_length=1)


class RiskFlag(BaseModel):
    """A risk flag raised by a threshold rule (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    flag: RiskFlagName
    text: str
    source_refs: list[str] = Field(min_length=1)


class TechnicalScore(BaseModel):
    """The scorer's output.

    ``signal``: BUY/HOLD/SELL; ``confidence`` in [0, 0.9] (2 dp); ``score`` in [-1, 1] (4 dp);
    ``components``: the evaluated rules; ``rationale``: statements (component texts, skipped
    rules, quote, summary); ``risk_flags``: flags raised, possibly none.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    signal: Signal
    confidence: float = Field(ge=0.0, le=1.0)
    score: float = Field(ge=-1.0, le=1.0)
    components: list[Component]
    rationale: list[Statement]
    risk_flags: list[RiskFlag]


def fmt_number(value: float) -> str:
    """How the scorer prints an input number: shortest round-trip decimal, no exponent.

    ``72.1`` → ``"72.1"``, ``-0.0383`` → ``"-0.0383"``, ``1863013100.0`` → ``"1863013100"``,
    ``5`` → ``"5"``. Parsing the result with ``float()`` gives back exactly ``value``.
    """
    if isinstance(value, int):
        return str(value)
    return np.format_float_positional(float(value), trim="-")


def _price_text(key: str, value: float) -> str:
    """A trend rule's input as the report prints it: the close (a price, USD) to the cent, an
    indicator as its Indicators table row (``core.display.indicator_text``)."""
    return usd(value) if key == "close" else indicator_text(key, value)


def _number(source: Mapping[str, Any], key: str, *, what: str) -> float | None:
    """``source[key]`` as a float, ``None`` when absent/None; ``ValueError`` on NaN or non-numbers."""
    value = source.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what}[{key!r}] must be a number or None, got {value!r}")
    if not math.isfinite(float(value)):
        raise ValueError(f"{what}[{key!r}] is {value!r}; pass None for a missing value")
    return value


def _sign(x: float) -> float:
    return float((x > 0) - (x < 0))


def _word(vote: float) -> str:
    if vote > 0:
        return "bullish vote"
    if vote < 0:
        return "bearish vote"
    return "no vote"


@dataclass
class _Votes:
    """The rules' components and statements in the order they are evaluated, and the names of
    the rules skipped for missing inputs (their statements cite ``ind_refs``)."""

    ind_refs: list[str]
    components: list[Component] = field(default_factory=list)
    rationale: list[Statement] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def add(self, name: str, values: dict[str, float], vote: float, text: str, cite: list[str]) -> None:
        """Record rule ``name``'s vote (-1..1) on ``values`` with its statement ``text``."""
        self.components.append(
            Component(name=name, values=values, vote=vote, weight=WEIGHTS[name], text=text, source_refs=cite)
        )
        self.rationale.append(Statement(text=text, source_refs=cite))

    def skip(self, name: str, why: str) -> None:
        """Record rule ``name`` as not scored, saying ``why``."""
        self.skipped.append(name)
        self.rationale.append(
            Statement(
                text=f"{_DISPLAY[name][:1].upper()}{_DISPLAY[name][1:]} not scored: {why} "
                "(not enough history, or not provided).",
                source_refs=self.ind_refs,
            )
        )


def _rsi_rule(votes: _Votes, rsi: float | None) -> None:
    """RSI (Wilder 1978): extremes only; the middle of the range is not a signal by itself."""
    f = decimal2
    if rsi is None:
        votes.skip("rsi", "RSI unavailable")
    else:
        if rsi < RSI_OVERSOLD:
            vote, zone = 1.0, "below thirty (oversold)"
        elif rsi > RSI_OVERBOUGHT:
            vote, zone = -1.0, "above seventy (overbought)"
        else:
            vote, zone = 0.0, "between thirty and seventy (neutral zone)"
        votes.add("rsi", {"rsi_14": rsi}, vote, f"RSI {f(rsi)} is {zone}: {_word(vote)}.", votes.ind_refs)


def _macd_rule(
    votes: _Votes, *, macd: float | None, macd_signal: float | None, macd_hist: float | None
) -> None:
    """MACD (Appel): signal-line relation (histogram sign) and centre line, half each."""
    f = decimal2
    if macd is None or macd_signal is None or macd_hist is None:
        votes.skip("macd", "MACD line, signal or histogram unavailable")
    else:
        vote = 0.5 * _sign(macd_hist) + 0.5 * _sign(macd)
        rel = {1.0: "above", -1.0: "below", 0.0: "level with"}[_sign(macd_hist)]
        zero = {1.0: "above", -1.0: "below", 0.0: "at"}[_sign(macd)]
        text = (
            f"MACD line {f(macd)} is {rel} its signal line {f(macd_signal)} (histogram {f(macd_hist)}) "
            f"and {zero} zero: {_word(vote)}."
        )
        values = {"macd": macd, "macd_signal": macd_signal, "macd_hist": macd_hist}
        votes.add("macd", values, vote, text, votes.ind_refs)


def _trend_rules(
    votes: _Votes,
    *,
    close: float | None,
    sma50: float | None,
    sma200: float | None,
    adx: float | None,
    price_refs: list[str],
) -> None:
    """The trend rules (close against each SMA, the SMAs' cross), scaled by ADX trend strength
    (Wilder 1978, :func:`_trend_strength`)."""
    f = _price_text
    factor, strength, adx_values = _trend_strength(adx)

    def trend(name: str, a_key: str, a: float | None, b_key: str, b: float | None, what: str) -> None:
        if a is None or b is None:
            missing = [k for k, v in ((a_key, a), (b_key, b)) if v is None]
            votes.skip(name, f"{_missing_words(missing)} unavailable")
            return
        direction = _sign(a - b)
        vote = direction * factor
        rel = {1.0: "above", -1.0: "below", 0.0: "equal to"}[direction]
        cross = {1.0: " (golden-cross alignment)", -1.0: " (death-cross alignment)", 0.0: ""}[direction]
        text = what.format(a=f(a_key, a), rel=rel, b=f(b_key, b), cross=cross) + f": {_word(vote)}"
        if vote != 0:
            text += f", {strength}"
        values = {a_key: a, b_key: b, **adx_values}
        votes.add(name, values, vote, text + ".", price_refs)

    trend("price_vs_sma50", "close", close, "sma_50", sma50, "Close {a} is {rel} the fifty-day SMA {b}")
    trend(
        "price_vs_sma200", "close", close, "sma_200", sma200, "Close {a} is {rel} the two-hundred-day SMA {b}"
    )
    trend(
        "sma_cross",
        "sma_50",
        sma50,
        "sma_200",
        sma200,
        "The fifty-day SMA {a} is {rel} the two-hundred-day SMA {b}{cross}",
    )


def _bollinger_rule(
    votes: _Votes,
    *,
    close: float | None,
    bb_upper: float | None,
    bb_lower: float | None,
    price_refs: list[str],
) -> None:
    """Bollinger (2001): a close outside the bands votes for reversion."""
    f = usd
    if close is None or bb_upper is None or bb_lower is None:
        votes.skip("bollinger", "close or Bollinger bands unavailable")
    else:
        if close > bb_upper:
            vote, where = -1.0, f"above the upper Bollinger band {f(bb_upper)} (overextended)"
        elif close < bb_lower:
            vote, where = 1.0, f"below the lower Bollinger band {f(bb_lower)} (oversold stretch)"
        else:
            vote, where = 0.0, f"within the Bollinger bands, from {f(bb_lower)} to {f(bb_upper)}"
        values = {"close": close, "bb_upper": bb_upper, "bb_lower": bb_lower}
        votes.add("bollinger", values, vote, f"Close {f(close)} is {where}: {_word(vote)}.", price_refs)


def _trend_strength(adx: float | None) -> tuple[float, str, dict[str, float]]:
    """The trend rules' weight factor for ADX ``adx`` (0..100; ``None``: unavailable), the words
    saying so, and the ADX value the trend components record (``{}`` without one): full weight
    above ``ADX_TRENDING``, ``WEAK_TREND_FACTOR`` otherwise (Wilder 1978)."""
    f = decimal2
    if adx is None:
        factor = WEAK_TREND_FACTOR
        strength = "at half weight because ADX is unavailable"
        adx_values: dict[str, float] = {}
    elif adx > ADX_TRENDING:
        factor, strength = 1.0, f"at full weight as ADX {f(adx)} is above twenty-five (trending)"
        adx_values = {"adx_14": adx}
    else:
        factor = WEAK_TREND_FACTOR
        strength = f"at half weight as ADX {f(adx)} is not above twenty-five (weak trend)"
        adx_values = {"adx_14": adx}
    return factor, strength, adx_values


def _aggregate(components: list[Component]) -> tuple[float, Signal, float]:
    """``(score, signal, confidence)`` of the evaluated ``components`` (module docstring): the
    weighted mean vote of the evaluated rules (-1..1, 4 decimals), its signal by
    ``BUY_THRESHOLD``/``SELL_THRESHOLD``, and the confidence (0..``CONFIDENCE_CAP``, 2 decimals):
    the signal's strength times the share of the rules' weight evaluated."""
    total_weight = sum(WEIGHTS.values())
    used_weight = sum(c.weight for c in components)
    if used_weight > 0:
        score = round(sum(c.weight * c.vote for c in components) / used_weight, 4) + 0.0
    else:
        score = 0.0
    signal: Signal = "BUY" if score >= BUY_THRESHOLD else "SELL" if score <= SELL_THRESHOLD else "HOLD"
    coverage = used_weight / total_weight
    if signal == "HOLD":
        strength_value = 0.5 * (1.0 - abs(score) / BUY_THRESHOLD)
    else:
        direction = 1.0 if signal == "BUY" else -1.0
        mass = sum(c.weight * abs(c.vote) for c in components)
        agreeing = sum(c.weight * abs(c.vote) for c in components if _sign(c.vote) == direction)
        strength_value = (abs(score) + agreeing / mass) / 2.0
    confidence = round(min(CONFIDENCE_CAP, strength_value * coverage), 2) + 0.0
    return score, signal, confidence


def score_technical(
    *,
    indicators: Mapping[str, float | str | None],
    quote: Mapping[str, Any] | None = None,
    refs: Mapping[str, str],
    earnings_date: str | None = None,
    earnings_checked_through: str | None = None,
    as_of: str | None = None,
) -> TechnicalScore:
    """Score indicator values into a BUY/HOLD/SELL signal with cited, checkable statements.

    Args:
        indicators: the dict from :func:`agents.quant.indicators.compute_indicators` (or any subset:
            keys ``rsi_14, macd, macd_signal, macd_hist, bb_upper, bb_lower, sma_50, sma_200,
            adx_14, hv_20, close, high_52w, pct_from_52w_high`` are read; prices USD, RSI/ADX
            0..100, ``hv_20`` and ``pct_from_52w_high`` fractions). ``None``/absent = missing.
        quote: optional quote, ``get_quotes`` (``price``) or ``get_stock_data`` (``current_price``) shape,
            plus ``change, change_percent`` (a fraction), ``volume``. Its numeric fields are restated
            as reported in one sentence citing ``refs["quote"]``; it does not vote (the last
            close is already in ``indicators``). Other keys are ignored.
        refs: source kind → ``tool_call_id``: ``"indicators"`` required, ``"history"``
            optional (also cited for statements about close and the 52-week range),
            ``"quote"`` required when ``quote`` is given, ``"earnings"`` (else
            ``"fundamentals"``) cited by the EARNINGS_SOON flag and its note.
        earnings_date / as_of: ISO dates of the next earnings report (from get_earnings_dates
            or get_fundamentals; ``None`` when the source has none) and of the analysis, for
            EARNINGS_SOON.
        earnings_checked_through: ISO date through which the source vouches that no report
            other than ``earnings_date`` falls (get_earnings_dates' ``checked_through``); with
            no ``earnings_date`` and a date ≥ as_of + 14 days, the flag counts as evaluated
            (a cited "no report within two weeks" statement) instead of "not evaluated".
    Returns:
        A :class:`TechnicalScore`; rules, thresholds, weights and confidence are in the module
        docstring.
    Raises:
        ValueError: a missing required ref, or an input that is NaN, infinite or not a number.
    """
    ind_ref = refs.get("indicators")
    if not ind_ref:
        raise ValueError("refs must map 'indicators' to the tool_call_id of the indicators call")
    if quote is not None and not refs.get("quote"):
        raise ValueError("refs must map 'quote' to a tool_call_id when a quote is given")
    ind_refs = [ind_ref]
    price_refs = [ind_ref, refs["history"]] if refs.get("history") else [ind_ref]

    def num(key: str) -> float | None:
        return _number(indicators, key, what="indicators")

    rsi, macd, macd_signal, macd_hist = num("rsi_14"), num("macd"), num("macd_signal"), num("macd_hist")
    sma50, sma200, adx = num("sma_50"), num("sma_200"), num("adx_14")
    bb_upper, bb_lower, close = num("bb_upper"), num("bb_lower"), num("close")
    hv, pct, high_52w = num("hv_20"), num("pct_from_52w_high"), num("high_52w")

    votes = _Votes(ind_refs=ind_refs)
    _rsi_rule(votes, rsi)
    _macd_rule(votes, macd=macd, macd_signal=macd_signal, macd_hist=macd_hist)
    _trend_rules(votes, close=close, sma50=sma50, sma200=sma200, adx=adx, price_refs=price_refs)
    _bollinger_rule(votes, close=close, bb_upper=bb_upper, bb_lower=bb_lower, price_refs=price_refs)
    components, rationale, skipped = votes.components, votes.rationale, votes.skipped

    score, signal, confidence = _aggregate(components)

    if quote is not None:
        rationale.extend(_quote_statement(quote, refs["quote"]))

    rationale.append(Statement(text=_summary(signal, components, skipped), source_refs=ind_refs))
    risk_flags, flag_notes = _risk_flags(
        close=close, high_52w=high_52w, pct=pct, hv=hv, price_refs=price_refs
    )
    more_flags, more_notes = _liquidity_and_earnings_flags(
        dollar_volume=_number(indicators, "dollar_volume_20", what="indicator"),
        earnings_date=earnings_date,
        checked_through=earnings_checked_through,
        as_of=as_of,
        ind_refs=ind_refs,
        earnings_ref=refs.get("earnings") or refs.get("fundamentals") or None,
    )
    risk_flags += more_flags
    flag_notes += more_notes
    rationale.extend(flag_notes)

    return TechnicalScore(
        signal=signal,
        confidence=confidence,
        score=score,
        components=components,
        rationale=rationale,
        risk_flags=risk_flags,
    )


_KEY_WORDS: Final[dict[str, str]] = {
    "close": "close",
    "sma_50": "fifty-day SMA",
    "sma_200": "two-hundred-day SMA",
}


def _missing_words(keys: list[str]) -> str:
    """Indicator keys → words without digits (["close", "sma_50"] → "close and fifty-day SMA")."""
    return " and ".join(_KEY_WORDS.get(k, k) for k in keys)


def _quote_statement(quote: Mapping[str, Any], ref: str) -> list[Statement]:
    """One sentence restating the quote's numeric fields as the Quote table prints them
    (``core.display.quote_text``: "price 430.47, change -10.93 (-2.48 %), volume 19,730,300"),
    or nothing if it has none."""
    parts: list[str] = []
    for key, label in _QUOTE_KEYS.items():
        value = _number(quote, key, what="quote")
        if value is None:
            continue
        shown = quote_text(key, value)
        if key == "change_percent" and parts and parts[-1].startswith("change "):
            parts[-1] += f" ({shown})"  # the same change in USD and in percent
        else:
            parts.append(f"{label} {shown}")
    if not parts:
        return []
    return [Statement(text=f"Latest quote (as reported): {', '.join(parts)}.", source_refs=[ref])]


def _summary(signal: Signal, components: list[Component], skipped: list[str]) -> str:
    """A digit-free sentence naming which rules voted which way."""

    def names(pred: Any) -> str:
        found = [_DISPLAY[c.name] for c in components if pred(c.vote)]
        return ", ".join(found) if found else "none"

    text = (
        f"Technical signal {signal}: bullish votes from {names(lambda v: v > 0)}; "
        f"bearish votes from {names(lambda v: v < 0)}; neutral: {names(lambda v: v == 0)}"
    )
    if skipped:
        text += f"; not scored: {', '.join(_DISPLAY[s] for s in skipped)}, which lowers confidence"
    return text + "."


def _risk_flags(
    *,
    close: float | None,
    high_52w: float | None,
    pct: float | None,
    hv: float | None,
    price_refs: list[str],
) -> tuple[list[RiskFlag], list[Statement]]:
    """Flags raised by the thresholds in the module docstring, and notes for flags not evaluable."""
    flags: list[RiskFlag] = []
    notes: list[Statement] = []
    if pct is None:
        notes.append(
            Statement(
                text="Near-high risk flag not evaluated: the fifty-two-week range needs a year of bars.",
                source_refs=price_refs,
            )
        )
    elif pct >= NEAR_52W_HIGH_PCT:
        where = f"Close {usd(close)}" if close is not None else "Close"
        high = f" {usd(high_52w)}" if high_52w is not None else ""
        text = (
            f"{where} is within five percent of the fifty-two-week high{high} "
            f"(distance from the high {signed_percent(pct)})."
        )
        flags.append(RiskFlag(flag="NEAR_52W_HIGH", text=text, source_refs=price_refs))
    if hv is None:
        notes.append(
            Statement(
                text="Volatility risk flag not evaluated: historical volatility unavailable.",
                source_refs=price_refs[:1],
            )
        )
    elif hv > HIGH_VOLATILITY_HV:
        text = (
            f"Twenty-day historical volatility {percent(hv)} (annualised) is above the "
            "high-volatility threshold of forty percent."
        )
        flags.append(RiskFlag(flag="HIGH_VOLATILITY", text=text, source_refs=price_refs[:1]))
    return flags, notes


def _liquidity_and_earnings_flags(
    *,
    dollar_volume: float | None,
    earnings_date: str | None,
    checked_through: str | None,
    as_of: str | None,
    ind_refs: list[str],
    earnings_ref: str | None,
) -> tuple[list[RiskFlag], list[Statement]]:
    """LOW_LIQUIDITY and EARNINGS_SOON (thresholds above); a note when one cannot be evaluated."""
    flags: list[RiskFlag] = []
    notes: list[Statement] = []
    if dollar_volume is None:
        notes.append(
            Statement(
                text="Liquidity risk flag not evaluated: too few bars with volume.", source_refs=ind_refs
            )
        )
    elif dollar_volume < LOW_LIQUIDITY_USD:
        text = (
            f"Twenty-day average traded value {whole(dollar_volume)} USD is below the "
            "low-liquidity threshold of one million US dollars a day."
        )
        flags.append(RiskFlag(flag="LOW_LIQUIDITY", text=text, source_refs=ind_refs))
    if (
        not earnings_date
        and as_of
        and checked_through
        and earnings_ref
        and (date.fromisoformat(checked_through[:10]) - date.fromisoformat(as_of[:10])).days
        >= EARNINGS_SOON_DAYS
    ):
        notes.append(
            Statement(
                text="No earnings report is scheduled within two weeks after the analysis date.",
                source_refs=[earnings_ref],
            )
        )
    elif not earnings_date or not as_of:
        notes.append(
            Statement(
                text="Earnings risk flag not evaluated: the data source gives no next earnings date.",
                source_refs=[earnings_ref] if earnings_ref else ind_refs,
            )
        )
    else:
        days = (date.fromisoformat(earnings_date[:10]) - date.fromisoformat(as_of[:10])).days
        if 0 <= days <= EARNINGS_SOON_DAYS:
            text = (
                f"Next earnings report on {earnings_date[:10]} falls within two weeks after the "
                "analysis date."
            )
            flags.append(
                RiskFlag(
                    flag="EARNINGS_SOON", text=text, source_refs=[earnings_ref] if earnings_ref else ind_refs
                )
            )
    return flags, notes
