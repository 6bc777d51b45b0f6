"""Deterministic fundamental and sentiment views from ``get_fundamentals`` / ``get_news`` data.

No model and no invented number: every value is copied from the tool output it cites.

Sentiment (deterministic; docs/design.md, "Analyst graph"): the mean VADER compound score of the
headlines; label ``POSITIVE`` when the mean ≥ 0.05, ``NEGATIVE`` when ≤ −0.05, else ``NEUTRAL``
(VADER's own thresholds, Hutto & Gilbert 2014). Zero headlines → ``NEUTRAL`` with a note.

Fundamentals: rule-of-thumb observations on the values present, thresholds in
:data:`FUNDAMENTAL_RULES`; outlook ``positive``/``negative`` when one kind of observation
outnumbers the other, ``neutral`` when balanced, ``unknown`` without any value.
"""

from __future__ import annotations

import math
from typing import Any

SENTIMENT_POSITIVE = 0.05
SENTIMENT_NEGATIVE = -0.05
TOP_HEADLINES = 5

#: (field, comparison, threshold, kind, text): kind +1 supportive, -1 a concern.
FUNDAMENTAL_RULES: tuple[tuple[str, str, float, int, str], ...] = (
    ("pe_ratio", ">", 30.0, -1, "P/E above thirty (rich valuation)"),
    ("pe_ratio", "<", 15.0, 1, "P/E below fifteen (modest valuation)"),
    ("peg_ratio", ">", 2.0, -1, "PEG above two (growth is expensive)"),
    ("peg_ratio", "<", 1.0, 1, "PEG below one"),
    ("gross_margin", ">=", 0.4, 1, "gross margin of forty percent or more"),
    ("gross_margin", "<", 0.2, -1, "gross margin below twenty percent"),
    ("current_ratio", "<", 1.0, -1, "current ratio below one (tight liquidity)"),
    ("debt_to_equity", ">", 2.0, -1, "debt above twice equity"),
    ("roic", ">=", 0.15, 1, "return on invested capital of fifteen percent or more"),
    ("roic", "<", 0.0, -1, "negative return on invested capital"),
    ("net_debt_to_ebitda", ">", 3.0, -1, "net debt above three times EBITDA"),
)


def _holds(value: float, op: str, threshold: float) -> bool:
    return {
        ">": value > threshold,
        "<": value < threshold,
        ">=": value >= threshold,
    }[op]


def sentiment_tone(score: float) -> str:
    """The reading of a VADER compound score (in [-1, 1]): ``"positive"`` at or above
    :data:`SENTIMENT_POSITIVE`, ``"negative"`` at or below :data:`SENTIMENT_NEGATIVE`,
    ``"neutral"`` between (the thresholds VADER's authors suggest, ±0.05: Hutto and Gilbert,
    ICWSM 2014, and the vaderSentiment README)."""
    if score >= SENTIMENT_POSITIVE:
        return "positive"
    return "negative" if score <= SENTIMENT_NEGATIVE else "neutral"


def by_impact(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``get_news`` items highest ``impact_score`` first, newest ``published_at`` first among
    equals (a missing or non-finite score counts as 0): the order the analysts are shown
    headlines in (``prompts.headline_digest``, ``readings.sentiment_readings``). A new list."""

    def impact(item: dict[str, Any]) -> float:
        value = item.get("impact_score")
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
        return 0.0

    ordered = sorted(items, key=lambda n: str(n.get("published_at") or ""), reverse=True)
    ordered.sort(key=lambda n: -impact(n))  # stable: the newest first among equal scores
    return ordered


def sentiment_summary(news: dict[str, Any] | None, *, ref: str | None) -> dict[str, Any]:
    """Summary of a ``get_news`` result ``data``.

    Returns ``{label: POSITIVE|NEGATIVE|NEUTRAL, mean_sentiment, count, positive, negative,
    neutral, tags: {tag: n}, top: [{headline, published_at, sentiment, impact_score, tags}],
    window, note, left_out (headlines not naming the company, not scored), source_refs}``;
    ``mean_sentiment`` is None with zero headlines. ``top`` holds the five highest-impact
    headlines (small enough to travel in the state message).
    """
    items = list((news or {}).get("news") or [])
    refs = [ref] if ref else []
    window = (news or {}).get("window")
    # headlines filed under the ticker that do not name the company (agents.data.news.scoring): not scored
    left_out = sum(int(n) for n in ((news or {}).get("left_out") or {}).values())
    left_note = f" {left_out} headlines left out: they do not name the company." if left_out else ""
    if not items:
        return {
            "label": "NEUTRAL",
            "mean_sentiment": None,
            "count": 0,
            "positive": 0,
            "negative": 0,
            "neutral": 0,
            "tags": {},
            "top": [],
            "window": window,
            "note": "No headlines in the window: sentiment NEUTRAL by default." + left_note,
            "left_out": left_out,
            "source_refs": refs,
        }
    scores = [float(n["sentiment"]) for n in items]
    mean = round(sum(scores) / len(scores), 4)
    label = sentiment_tone(mean).upper()
    tones = [sentiment_tone(s) for s in scores]
    tag_counts: dict[str, int] = {}
    for n in items:
        for tag in n.get("tags") or []:
            tag_counts[tag] = tag_counts.get(tag, 0) + 1
    top = sorted(items, key=lambda n: (-float(n["impact_score"]), n.get("published_at") or ""))[
        :TOP_HEADLINES
    ]
    return {
        "label": label,
        "mean_sentiment": mean,
        "count": len(items),
        "positive": tones.count("positive"),
        "negative": tones.count("negative"),
        "neutral": tones.count("neutral"),
        "tags": tag_counts,
        "top": [
            {k: n.get(k) for k in ("headline", "published_at", "sentiment", "impact_score", "tags")}
            for n in top
        ],
        "window": window,
        "note": f"Mean VADER sentiment of {len(items)} headlines." + left_note,
        "left_out": left_out,
        "source_refs": refs,
    }


def fundamental_summary(entry: dict[str, Any] | None, *, ref: str | None) -> dict[str, Any]:
    """Observations on one ``get_fundamentals`` entry (module docstring).

    Returns ``{outlook: positive|negative|neutral|unknown, observations: [{field, value, text,
    kind}], values: {field: value}, missing: [field], timestamp, source_refs}``.
    """
    entry = entry or {}
    refs = [ref] if ref else []
    reasons = entry.get("null_reasons") or {}
    values = {
        k: v
        for k, v in entry.items()
        if k
        not in {"symbol", "timestamp", "field_sources", "null_reasons", "refused", "error", "trailing_eps"}
        and v is not None
    }
    observations: list[dict[str, Any]] = []
    score = 0
    for field, op, threshold, kind, text in FUNDAMENTAL_RULES:
        value = values.get(field)
        if isinstance(value, int | float) and _holds(float(value), op, threshold):
            observations.append({"field": field, "value": value, "text": text, "kind": kind})
            score += kind
    # The calendar's next-quarter EPS estimate alone says nothing about the business.
    numeric = [v for k, v in values.items() if isinstance(v, int | float) and k != "eps_consensus"]
    outlook = (
        "unknown" if not numeric else "positive" if score > 0 else "negative" if score < 0 else "neutral"
    )
    return {
        "outlook": outlook,
        "observations": observations,
        "values": values,
        "missing": sorted(reasons),
        "timestamp": entry.get("timestamp"),
        "source_refs": refs,
    }
