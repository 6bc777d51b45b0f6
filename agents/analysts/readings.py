"""Readings computed in code that an analyst model is shown next to the numbers.

Why (docs/llm.md, "Prompts for small models"): shown only the numbers, the real 0.5B model
compared them wrongly ("$183.88, which is above the previous close of $186.18"), called the
trend down with the close above both moving averages and read a MACD value as the RSI
(docs/benchmarks.md, "Local 0.5B model"). Comparisons are arithmetic, which is this product's
code's job, not the model's: each analyst's context carries the comparisons its rules make,
as sentences with the numbers they rest on, and the model's part is to say which of them
matter and what they mean together. What the model writes is still checked
(:mod:`agents.analysts.claims`), readings or not.

- Technical: the quote's price against its previous close, the ADX against the scorer's
  trending threshold (twenty-five), and the deterministic scorer's rule statements
  (``agents.quant.scorer``: RSI zone, MACD vs its signal line and zero, the Bollinger bands,
  the SMAs' alignment, close vs the fifty- and two-hundred-day SMA, in this order: a small
  model writes about what it read last) without their votes and weights, so the judgement
  stays the model's.
- Fundamental: the rule-of-thumb observations that hold
  (``agents.analysts.views.FUNDAMENTAL_RULES``) with their values, the values no rule speaks
  to, then the earnings trend against zero (the EPS growth on the year before, the mean
  surprise, the EPS), each sentence naming its measure before its number and fractions printed
  as percentages. The 0.5B model copies these readings from the first one on (measured:
  docs/benchmarks.md, fifteenth run), so the valuation verdict comes first.
- Sentiment: how many headlines name the company, the keyword tags they carry, the
  highest-impact headline with its VADER score, and whether more of them read positive or
  negative by VADER (``agents.data.news.scoring``; the thresholds of
  ``agents.analysts.views.sentiment_summary``). Shown only the headlines and the quote, the
  real 0.5B model wrote of the quote ("the quote does not contain any relevant information")
  in two of three sentiment answers (docs/benchmarks.md, seventh run).

Every number in a reading is printed from the output the analyst is shown (the same value, a
decimal form the grounding check accepts), so a model that copies a reading stays grounded.
"""

from __future__ import annotations

import math
import re
from typing import Any, TypeGuard

from agents.analysts.views import (
    by_impact,
    fundamental_summary,
    sentiment_summary,
    sentiment_tone,
)
from agents.data.news.scoring import TAGS
from agents.quant.scorer import ADX_TRENDING, fmt_number, score_technical
from core.display import decimal2, fundamental_text, usd

#: The scorer keys a technical reading reads from the ``technical_indicators`` output.
_SCORER_TOP_KEYS = ("close", "high_52w", "pct_from_52w_high")
#: Where a scorer statement's vote begins (": bullish vote, at half weight ...", ": no vote.").
_VOTE = re.compile(r":\s*(?:bullish|bearish|no)\s+vote\b.*$", re.S)
#: Scorer rules whose readings close the list, in this order (the trend vs the two-hundred-day
#: SMA, which also sets the deterministic trend direction, last).
_LAST = ("sma_cross", "price_vs_sma50", "price_vs_sma200")
#: Most readings an analyst is shown (the scorer has six rules, plus the ADX and the quote).
MAX_READINGS = 8
#: The moving averages' periods in digits in the readings ("the 50-day SMA"), not in words as
#: the scorer writes them: copying its readings, the real 0.5B model wrote "the five-day SMA
#: 571.9649" and "the five-year SMA 128.261" for the fifty-day one, while every price it copied
#: was exact (docs/benchmarks.md, "Local 0.5B model"). "50-day" is a period to the grounding
#: check, not a number, and names the same measure.
_PERIODS = ((re.compile(r"\bfifty-day\b"), "50-day"), (re.compile(r"\btwo-hundred-day\b"), "200-day"))


def _finite(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def scorer_inputs(technical: dict[str, Any]) -> dict[str, Any]:
    """The ``indicators`` argument of ``agents.quant.scorer.score_technical`` from a
    ``technical_indicators`` output: its ``indicators`` with ``close``, ``high_52w`` and
    ``pct_from_52w_high`` (the top-level keys the scorer reads) added. ``{}`` for ``{}``."""
    return {
        **(technical.get("indicators") or {}),
        **{k: technical[k] for k in _SCORER_TOP_KEYS if k in technical},
    }


def technical_readings(*, technical: dict[str, Any], quote: dict[str, Any] | None) -> list[str]:
    """Sentences comparing the indicators of a ``technical_indicators`` output ``technical``
    (``{close, high_52w, pct_from_52w_high, indicators: {rsi_14, macd, ...}}``; prices USD, RSI
    points) and the ``get_stock_data`` ``quote`` (``current_price``, ``previous_close`` USD),
    e.g. ``"Close 183.88 is above the 50-day SMA 180.10."`` (numbers as the report's tables
    print them, ``core.display``): the quote's price vs its
    previous close, the ADX, then the scorer's rule statements without their votes (module
    docstring), the trend rules last, periods in digits (:data:`_PERIODS`); at most
    :data:`MAX_READINGS` (the last ones). A rule the values do not allow (the scorer evaluates
    none without its inputs) is left out; ``[]`` without indicators. Raises nothing (an input
    the scorer refuses, NaN or not a number, gives no rule readings)."""
    indicators = technical.get("indicators") or {}
    flat = scorer_inputs(technical)
    out: list[str] = []
    quote = quote or {}
    price, previous = quote.get("current_price"), quote.get("previous_close")
    if _finite(price) and _finite(previous):
        where = "above" if price > previous else "below" if price < previous else "level with"
        out.append(f"The quote's price {usd(price)} is {where} the previous close {usd(previous)}.")
    adx = indicators.get("adx_14")
    if _finite(adx):
        strength = (
            "above twenty-five (a trending market)"
            if adx > ADX_TRENDING
            else "not above twenty-five (a weak trend)"
        )
        out.append(f"ADX {decimal2(adx)} is {strength}.")
    if flat:
        try:
            score = score_technical(indicators=flat, refs={"indicators": "technical_indicators"})
        except ValueError:
            score = None
        components = score.components if score is not None else []
        # the trend readings last: a small model writes about what it read last (measured:
        # the 0.5B model restated the last reading in 6 of 6 technical answers)
        for component in sorted(components, key=lambda c: _LAST.index(c.name) if c.name in _LAST else -1):
            text = _VOTE.sub("", component.text).rstrip(" .")
            for words, digits in _PERIODS:
                text = words.sub(digits, text)
            if text:
                out.append(f"{text}.")
    return out[-MAX_READINGS:]


#: How the fundamental readings name a digest field (:data:`prompts.FUNDAMENTAL_KEYS`), each
#: name one the grounding check reads the field's number with where it has a measure for it
#: (``grounding.MEASURES``: "P/E", "EPS growth"); fields held as fractions
#: (``grounding.FRACTION_KEYS``) are printed as percentages: shown "eps_growth_yoy 0.9342 ...
#: (a fraction)", the real 0.5B model wrote "a growth rate of 0.9342%", a hundredfold
#: misreading (docs/benchmarks.md).
FIELD_NAMES = {
    "pe_ratio": "P/E",
    "peg_ratio": "PEG",
    "ev_ebitda": "EV/EBITDA",
    "gross_margin": "gross margin",
    "roic": "return on invested capital",
    "current_ratio": "current ratio",
    "debt_to_equity": "debt to equity",
    "net_debt_to_ebitda": "net debt to EBITDA",
}


def _shown(field: str, value: float) -> str:
    """``value`` of ``field`` as the report's Fundamentals table prints it
    (``core.display.fundamental_text``): a margin or return (a fraction) as a percentage
    ("44.59 %"), the earnings trend as a signed one ("+93.42 %"), the EPS to the cent, other
    values to two decimals ("35.20"). The digest holds four decimals, so the grounding check
    finds the number shown (100 × the value for a fraction, ``grounding.FRACTION_KEYS``)."""
    return fundamental_text(field, value)


def _earnings_readings(digest: dict[str, Any]) -> list[str]:
    """The earnings trend of a fundamentals digest against zero, in words (the fields of
    ``agents.data.fundamentals.trailing``: ``eps_growth_yoy`` the last four reported quarters'
    EPS summed against the four before, less one, ``eps_surprise_mean_4q`` the mean surprise of
    the last four quarters, both fractions printed as percentages, and ``eps_actual`` their EPS
    in USD a share), in this order: the change first, the level last."""
    out = []
    growth = digest.get("eps_growth_yoy")
    if _finite(growth):
        moved = "grew" if growth > 0 else "fell" if growth < 0 else "was flat"
        out.append(
            f"The EPS growth is {_shown('eps_growth_yoy', growth)}: the last four quarters' "
            f"earnings {moved} on the four before."
        )
    surprise = digest.get("eps_surprise_mean_4q")
    if _finite(surprise):
        verdict = "beat" if surprise > 0 else "missed" if surprise < 0 else "matched"
        out.append(
            f"The mean EPS surprise is {_shown('eps_surprise_mean_4q', surprise)}: reported "
            f"earnings {verdict} the estimates over the last four quarters."
        )
    eps = digest.get("eps_actual")
    if _finite(eps):
        loss = " (a loss)" if eps < 0 else ""
        shown = _shown("eps_actual", eps)
        out.append(f"The EPS of the last four reported quarters is {shown} USD a share{loss}.")
    return out


def fundamental_readings(digest: dict[str, Any]) -> list[str]:
    """Sentences on a fundamentals digest (``prompts.fundamentals_digest``: ratios as
    fractions, ``pe_ratio`` etc. plain numbers), each naming its measure before its number
    (:data:`FIELD_NAMES`; fractions as percentages, :func:`_shown`), in this order: each rule
    of thumb of ``views.FUNDAMENTAL_RULES`` that holds (``views.fundamental_summary``'s
    observations, e.g. ``"The P/E is 35.20: P/E above thirty (rich valuation)."``), one sentence
    naming the ruled fields present that no rule speaks to, then the earnings trend against
    zero (:func:`_earnings_readings`, e.g. ``"The EPS growth is -8.70 %: the last four quarters'
    earnings fell on the four before."``); the first :data:`MAX_READINGS`. Without the earnings
    sentences, an analysis whose data held only the earnings trend had no reading at all, and
    the 0.5B model wrote of the quote instead (docs/benchmarks.md, ninth run); shown the
    digest's field names ("eps_growth_yoy 0.9342: ...") it wrote them back mangled ("a 41.16%
    EPS growth", "the stock price of AAPL is below fifteen"), shown these sentences it copied
    them whole (fifteenth run). ``[]`` without values. Raises nothing."""
    summary = fundamental_summary(digest, ref=None)
    spoken = {o["field"] for o in summary["observations"]}
    quiet = [
        f"the {FIELD_NAMES[f]} {_shown(f, v)}"
        for f, v in digest.items()
        if f in FIELD_NAMES and f not in spoken and _finite(v)
    ]
    out = [
        f"The {FIELD_NAMES[o['field']]} is {_shown(o['field'], o['value'])}: {o['text']}."
        for o in summary["observations"]
    ]
    out += [f"No rule of thumb is crossed by {', '.join(quiet)}."] if quiet else []
    out += _earnings_readings(digest)
    return out[:MAX_READINGS]


def sentiment_readings(news: dict[str, Any] | None) -> list[str]:
    """Sentences on a ``get_news`` output ``news`` (``{news: [{headline, sentiment,
    impact_score, tags, published_at}], count}``; ``sentiment`` a VADER compound score in
    [-1, 1]): how many headlines name the company (``count``), the tags they carry (in
    ``agents.data.news.scoring.TAGS`` order), the highest-impact headline's tone and score
    (``views.by_impact``, the order ``prompts.headline_digest`` shows them in; its title only
    when it holds no digit, since a number quoted from a title is in no value of the output and
    would not be grounded), then the balance of positive and negative headlines, in words (the
    counts and tags of ``views.sentiment_summary``, its tones by ``views.sentiment_tone``).
    Every number printed is a value of ``news``. ``[]`` without headlines. Raises KeyError /
    TypeError / ValueError on an item without a numeric ``sentiment`` (as the view does)."""
    items = list((news or {}).get("news") or [])
    if not items:
        return []
    count = (news or {}).get("count")
    count = count if isinstance(count, int) and not isinstance(count, bool) else len(items)
    out = [f"{count} headline{'' if count == 1 else 's'} in the window name the company."]
    view = sentiment_summary(news, ref=None)
    named = [t for t in TAGS if view["tags"].get(t)]
    if named:
        out.append(f"Some headlines are tagged {', '.join(named)} by their keywords.")
    top = by_impact(items)[0]
    title = " ".join(str(top.get("headline") or "").split())
    quoted = f': "{title}"' if title and not re.search(r"\d", title) else ""
    value = float(top["sentiment"])
    tone = sentiment_tone(value)
    out.append(f"The highest-impact headline reads {tone} (VADER {fmt_number(value)}){quoted}.")
    positive, negative = view["positive"], view["negative"]
    if positive == negative == 0:
        balance = "none of the headlines reads positive or negative; all are neutral"
    elif positive > negative:
        balance = "more headlines read positive than negative"
    elif negative > positive:
        balance = "more headlines read negative than positive"
    else:
        balance = "as many headlines read positive as negative"
    out.append(f"By their VADER scores, {balance}.")
    return out[:MAX_READINGS]
