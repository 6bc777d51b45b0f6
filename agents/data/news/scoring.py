"""Sentiment, tags and impact of one headline, computed in code (no model).

* ``sentiment``: VADER ``compound`` score of ``headline + " " + summary`` (vaderSentiment, MIT;
  Hutto & Gilbert 2014), in [-1, 1], rounded to 4 decimals.
* ``tags`` ⊂ {earnings, guidance, regulatory, product}: a headline gets a tag when it contains
  one of that tag's keywords (:data:`TAG_KEYWORDS`, whole words, case-insensitive).
* ``impact_score`` in [0, 1] (:func:`impact_score`)::

      impact = min(1, 0.6 * |sentiment| + 0.2 * [any tag] + 0.2 * [the headline names the symbol])

  Strong tone, a material topic and being about the company itself each raise the impact;
  a neutral generic market headline scores 0.

Relevance comes first (:func:`mentions_company`): a headline filed under a ticker that names
neither the ticker nor the company (its name from the data provider or the S&P 500 list, with
and without the legal form, and its other names, :data:`RENAMES`) is not about the company —
news feeds file sector and market stories under every ticker they touch (the Benzinga set has
"JPMorgan, Wells Fargo Earnings Lower Than Expected, But Positive Tone Helps Shares" under
AAPL) — so ``get_news`` leaves it out and counts it instead of scoring it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
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


#: Legal-form words dropped from a company's registered name to get the name headlines use
#: ("Apple Inc." → "Apple", "Microsoft Corporation" → "Microsoft").
LEGAL_SUFFIXES: frozenset[str] = frozenset(
    {
        "inc",
        "incorporated",
        "corp",
        "corporation",
        "co",
        "company",
        "ltd",
        "limited",
        "plc",
        "llc",
        "lp",
        "l.p",
        "sa",
        "ag",
        "nv",
        "n.v",
        "se",
        "holdings",
        "holding",
        "group",
        "the",
        "class",
        "cl",
    }
)

#: First words too common to stand for a company alone ("General Electric" is not "General").
GENERIC_FIRST_WORDS: frozenset[str] = frozenset(
    {
        "general",
        "american",
        "united",
        "international",
        "national",
        "first",
        "royal",
        "china",
        "british",
        "global",
        "southern",
        "northern",
        "western",
        "eastern",
        "public",
        "capital",
        "digital",
        "advanced",
        "applied",
        "home",
        "health",
        "energy",
        "financial",
        "federal",
        "state",
        "pacific",
        "atlantic",
        "central",
        "service",
        "walt",
        "texas",
        "dominion",
    }
)

#: Other names of the same company in other years (renames), which the provider's current or
#: period name does not carry: Google Inc. became Alphabet Inc. on 2015-10-02; Facebook, Inc.
#: became Meta Platforms, Inc. on 2021-10-28 (ticker FB → META on 2022-06-09).
RENAMES: dict[str, tuple[str, ...]] = {
    "GOOG": ("Google", "Alphabet"),
    "GOOGL": ("Google", "Alphabet"),
    "FB": ("Facebook", "Meta Platforms"),
    "META": ("Facebook", "Meta Platforms"),
}


def company_aliases(*, symbol: str, names: Iterable[str | None]) -> tuple[str, ...]:
    """The names a headline may call ``symbol``'s company by: each of ``names`` (e.g. the
    provider's ``Profile.name``, the S&P 500 list's ``Name``) as given and without its legal
    form (:data:`LEGAL_SUFFIXES`), its first word when distinctive (five letters or more, not in
    :data:`GENERIC_FIRST_WORDS`), plus :data:`RENAMES`. Shorter than three letters is dropped.
    Sorted, unique; the ticker itself is matched separately (:func:`mentions_company`)."""
    out: set[str] = set(RENAMES.get(symbol.upper(), ()))
    for name in names:
        if not name:
            continue
        clean = re.sub(r"\s+", " ", name.replace(",", " ")).strip()
        words = clean.split(" ")
        while words and words[-1].lower().strip(".") in LEGAL_SUFFIXES:
            words.pop()
        while words and words[0].lower() == "the":
            words.pop(0)
        short = [clean.rstrip("."), " ".join(words)]
        if len(words) >= 2 and len(words[0]) >= 5 and words[0].lower() not in GENERIC_FIRST_WORDS:
            short.append(words[0])  # "Exxon Mobil" → "Exxon", "Agilent Technologies" → "Agilent"
        for candidate in short:
            if len(candidate) >= 3:
                out.add(candidate)
    return tuple(sorted(out))


def mentions_company(text: str, *, symbol: str, aliases: Iterable[str]) -> bool:
    """True when ``text`` names the company: its ticker as an upper-case word (``AAPL``,
    ``$AAPL``, ``(AAPL)``; a one-letter ticker only as ``$T``, ``(T)`` or ``NYSE: T``, since
    "A" is also a word), or one of ``aliases`` as whole words, case-insensitive."""
    ticker = re.escape(symbol.upper())
    if len(symbol) >= 2:
        if re.search(rf"(?<![A-Za-z0-9]){ticker}(?![A-Za-z0-9])", text):
            return True
    elif re.search(rf"(\${ticker}\b|\({ticker}\)|(NYSE|NASDAQ|Nasdaq|AMEX):\s?{ticker}\b)", text):
        return True
    return any(
        re.search(rf"(?<![A-Za-z0-9]){re.escape(alias)}(?![A-Za-z0-9])", text, re.IGNORECASE) is not None
        for alias in aliases
    )


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
