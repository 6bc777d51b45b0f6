"""The social-sentiment analyst: a deterministic, reach-weighted reading of ``get_social_posts``.

Each English post gets :func:`agents.data.social.sentiment.post_sentiment` (VADER extended with
the Loughran–McDonald lists and trader terms), and a weight for its audience::

    w = 1 + log10(1 + reach)        reach = summed follower counts of the post's copies

so every distinct post counts at least once and each tenfold of audience (more followers, or
more retweets) adds one. The score is the weighted mean ``Σ w·s / Σ w`` in [-1, 1]; the label is
``BULLISH`` at ≥ 0.05, ``BEARISH`` at ≤ −0.05, else ``NEUTRAL`` (VADER's own thresholds). No
English post → label ``NO_DATA`` and score None. Posts in other languages are counted but not
scored (the lexicon is English).

Weight in the composite score: ``FINAGENT_ANALYSIS_SOCIAL_WEIGHT`` (default 0: the analyst is shown and
recorded but moves nothing until it has out-of-sample evidence; docs/data-and-tools.md).
"""

from __future__ import annotations

import math
from typing import Any

from agents.data.social.sentiment import post_sentiment

BULLISH = 0.05
BEARISH = -0.05
#: Posts listed in the summary (highest weight × |sentiment| first): small for the state message.
TOP_POSTS = 5


def reach_weight(reach: int) -> float:
    """``1 + log10(1 + reach)`` (reach in people, ≥ 0): 1 for an unseen post, 2 at 9 followers,
    3 at 99, 7 at about a million."""
    return 1.0 + math.log10(1.0 + max(0, reach))


def social_score(posts: list[dict[str, Any]]) -> tuple[float | None, int, float]:
    """``(score, scored, weight)`` of ``get_social_posts`` rows: the reach-weighted mean sentiment
    of the English rows (None without any), how many were scored and their total weight."""
    total = weighted = 0.0
    scored = 0
    for post in posts:
        if post.get("lang") != "en":
            continue
        w = reach_weight(int(post.get("reach") or 0))
        weighted += w * post_sentiment(str(post["text"]))
        total += w
        scored += 1
    if not scored:
        return None, 0, 0.0
    return weighted / total, scored, total


def label_of(score: float | None) -> str:
    """``BULLISH`` / ``BEARISH`` / ``NEUTRAL`` by the thresholds above, ``NO_DATA`` for None."""
    if score is None:
        return "NO_DATA"
    return "BULLISH" if score >= BULLISH else "BEARISH" if score <= BEARISH else "NEUTRAL"


def social_summary(data: dict[str, Any] | None, *, ref: str | None) -> dict[str, Any]:
    """The analyst's view of one ``get_social_posts`` result ``data``, citing ``ref`` (its
    tool_call_id) for every number.

    Returns ``{label: BULLISH|BEARISH|NEUTRAL|NO_DATA, score (4 decimals or None), posts
    (distinct posts read), scored (English posts scored), copies (tweets in the window),
    weight (Σ w, 2 decimals), positive, negative, neutral, top: [{text, created_at, sentiment,
    weight, count, followers}], window, truncated, note, source_refs}``.
    """
    data = data or {}
    posts = list(data.get("posts") or [])
    refs = [ref] if ref else []
    score, scored, weight = social_score(posts)
    rows = []
    for post in posts:
        if post.get("lang") != "en":
            continue
        s = post_sentiment(str(post["text"]))
        rows.append((s, reach_weight(int(post.get("reach") or 0)), post))
    top = sorted(rows, key=lambda r: (-(r[1] * abs(r[0])), r[2].get("created_at") or ""))[:TOP_POSTS]
    note = (
        f"Reach-weighted mean sentiment of {scored} English posts "
        f"({data.get('copies', 0)} tweets in the window)."
        if scored
        else "No English post in the window: no social reading."
    )
    if data.get("truncated"):
        note += f" Only the newest {len(posts)} of {data.get('distinct')} posts were read."
    return {
        "label": label_of(score),
        "score": round(score, 4) if score is not None else None,
        "posts": len(posts),
        "scored": scored,
        "copies": int(data.get("copies") or 0),
        "weight": round(weight, 2),
        "positive": sum(1 for s, _, _ in rows if s >= BULLISH),
        "negative": sum(1 for s, _, _ in rows if s <= BEARISH),
        "neutral": sum(1 for s, _, _ in rows if BEARISH < s < BULLISH),
        "top": [
            {
                "text": p["text"],
                "created_at": p.get("created_at"),
                "sentiment": s,
                "weight": round(w, 2),
                "count": p.get("count"),
                "followers": p.get("followers"),
            }
            for s, w, p in top
        ],
        "window": data.get("window"),
        "truncated": bool(data.get("truncated")),
        "note": note,
        "source_refs": refs,
    }


def blend(*, score: float, social: float, weight: float) -> float:
    """The composite score with the social analyst at ``weight`` (a fraction in [0, 1]):
    ``(1 - weight) * score + weight * social``, rounded to 4 decimals. At weight 0 it is ``score``."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"social weight {weight} outside [0, 1]")
    return round((1.0 - weight) * score + weight * social, 4) + 0.0
