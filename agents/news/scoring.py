"""Sentiment, tags and impact of one headline, computed in code (no model).

* ``sentiment``: VADER ``compound`` score of ``headline + " " + summary`` (vaderSentiment, MIT;
  Hutto & Gilbert 2014), in [-1, 1], rounded to 4 decimals.
* ``tags`` ⊂ {earnings, guidance, regulatory, product}: a headline gets a tag when it contains
  one of that tag's keywords (:data:`TAG_KEYWORDS`, whole words, case-insensitive).
* ``impact_score`` in [0, 1] (:func:`impact_score`)::

      impact = min(1, 0.6 * |sentiment| + 0.2 * [any tag] + 0.2 * [the headline names the symbol])

  Strong tone, a material topic and being about the company itself each raise the impact;
  a neutral generic market headline scores 0.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from vaderSentiment.vaderSentiment import (  # type: ignore[import-untyped]
    SentimentIntensityAnalyzer,
)

TAGS: tuple[str, ...] = ("earnings", "guidance", "regulatory", "product")

#: The documented keyword table (whole words or phrases, case-insensitive).
TAG_KEYWORDS: dict[str, tuple[str, ...]] = {
    "earnings": (
        "earnings",
        "eps",
        "quarterly results",
        "q1",
        "q2",
        "q3",
        "q4",
        "revenue",
        "revenues",
        "profit",
        "profits",
        "net income",
        "beats",
        "misses",
        "results",
    ),
    "guidance": (
        "guidance",
        "outlook",
        "forecast",
        "forecasts",
        "raises",
        "lowers",
        "reaffirms",
        "sees fy",
        "price target",
        "target",
        "upgrade",
        "upgrades",
        "downgrade",
        "downgrades",
    ),
    "regulatory": (
        "sec",
        "ftc",
        "doj",
        "fda",
        "antitrust",
        "lawsuit",
        "sues",
        "sued",
        "probe",
        "investigation",
        "regulator",
        "regulators",
        "regulatory",
        "court",
        "fine",
        "fined",
        "settlement",
        "tariff",
        "tariffs",
    ),
    "product": (
        "launch",
        "launches",
        "unveils",
        "unveiled",
        "product",
        "products",
        "iphone",
        "ipad",
        "mac",
        "release",
        "releases",
        "recall",
        "recalls",
        "new model",
        "app store",
    ),
}

_PATTERNS: dict[str, re.Pattern[str]] = {
    tag: re.compile(r"\b(" + "|".join(re.escape(k) for k in words) + r")\b", re.IGNORECASE)
    for tag, words in TAG_KEYWORDS.items()
}


@lru_cache(maxsize=1)
def _analyzer() -> Any:
    return SentimentIntensityAnalyzer()


def sentiment(text: str) -> float:
    """VADER compound score of ``text`` in [-1, 1] (0.0 for empty text)."""
    if not text.strip():
        return 0.0
    return round(float(_analyzer().polarity_scores(text)["compound"]), 4)


def tags(text: str) -> list[str]:
    """Tags of ``text`` from :data:`TAG_KEYWORDS`, in :data:`TAGS` order."""
    return [tag for tag in TAGS if _PATTERNS[tag].search(text)]


def names_symbol(text: str, symbol: str, company: str | None = None) -> bool:
    """True when ``text`` names ``symbol`` as a word (or ``company``'s first word, case-insensitive)."""
    if re.search(rf"(?<![A-Za-z]){re.escape(symbol)}(?![A-Za-z])", text):
        return True
    if company:
        first = company.split()[0].strip(",.").lower()
        return len(first) > 2 and re.search(rf"\b{re.escape(first)}\b", text.lower()) is not None
    return False


def impact_score(*, sentiment_value: float, tag_list: list[str], names: bool) -> float:
    """``min(1, 0.6*|sentiment| + 0.2*[tags] + 0.2*[names the symbol])`` rounded to 4 decimals."""
    value = 0.6 * abs(sentiment_value) + (0.2 if tag_list else 0.0) + (0.2 if names else 0.0)
    return round(min(1.0, max(0.0, value)), 4)


def score_item(
    *, headline: str, summary: str | None, symbol: str, company: str | None = None
) -> dict[str, Any]:
    """``{sentiment, impact_score, tags}`` of one headline (see the module docstring)."""
    text = f"{headline} {summary or ''}".strip()
    value = sentiment(text)
    tag_list = tags(text)
    return {
        "sentiment": value,
        "impact_score": impact_score(
            sentiment_value=value, tag_list=tag_list, names=names_symbol(text, symbol, company)
        ),
        "tags": tag_list,
    }
