"""Social posts tool: ``get_social_posts(symbol, hours_back, limit)`` over the offline stocknet
tweet files (``FINAGENT_DATA_SOCIAL_DIR``, :mod:`agents.data.social.posts`).

Point in time, as ``get_news``: the window ends at the close that prices ``as_of`` (exclusive;
16:00 New York on the last NYSE session on or before ``as_of``,
:func:`agents.data.market_calendar.close_at_or_before`) and starts ``hours_back`` hours earlier;
no post created at or after that close is returned or counted. Retweets and duplicate texts in
the window collapse into one post with its ``count`` (copies) and ``retweets``; ``followers`` and
``reach`` keep the author reach (the largest and the summed follower counts of the copies).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agents.data.market_calendar import close_at_or_before
from agents.data.social.posts import SocialNotConfiguredError, SocialPost, SocialSource, get_social_source
from agents.tools.envelope import ErrorCode
from agents.tools.fields import Symbol
from agents.tools.registry import ToolContext, ToolInputError, ToolOutput, register

MAX_HOURS_BACK = 24 * 366
DEFAULT_HOURS_BACK = 72
DEFAULT_LIMIT = 50
#: Most posts in one answer: keeps the envelope (and the state message) small.
MAX_LIMIT = 200


def social_source(ctx: ToolContext) -> SocialSource:
    """The configured social source, or ``ToolInputError(NOT_CONFIGURED)`` with the hint."""
    try:
        return get_social_source(ctx.settings.data.social_dir)
    except SocialNotConfiguredError as exc:
        raise ToolInputError(str(exc), code=ErrorCode.NOT_CONFIGURED, retry_hint=exc.hint) from None


def post_row(post: SocialPost) -> dict[str, Any]:
    """The JSON form of one collapsed post (times UTC ISO 8601, counts in copies, reach in people)."""
    return {
        "text": post.text,
        "created_at": post.created_at.isoformat(),
        "last_at": post.last_at.isoformat(),
        "count": post.count,
        "retweets": post.retweets,
        "followers": post.followers,
        "reach": post.reach,
        "lang": post.lang,
        "id": post.ids[0],
    }


class SocialPostsInput(BaseModel):
    """``{symbol, hours_back?, limit?}``: one ticker; hours before the close of ``as_of``
    (1..8784, default 72); most posts returned (1..200, default 50)."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol = Field(description="Ticker, e.g. 'AAPL'")
    hours_back: int = Field(
        default=DEFAULT_HOURS_BACK,
        ge=1,
        le=MAX_HOURS_BACK,
        description="Window before the analysis date's market close, hours",
    )
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description="Most posts returned")


@register(
    name="get_social_posts",
    description=(
        "Cash-tagged social posts (tweets) about the symbol in the hours_back before the market close "
        "of the analysis date; retweets and duplicates collapsed with count, author followers and reach."
    ),
    input_model=SocialPostsInput,
)
def get_social_posts(params: SocialPostsInput, ctx: ToolContext) -> ToolOutput:
    """Posts about ``params.symbol`` created in ``[cutoff - hours_back h, cutoff)``.

    Returns data ``{symbol, posts: [{text, created_at, last_at, count, retweets, followers, reach,
    lang, id}], count (distinct posts returned), distinct (distinct posts in the window), copies
    (tweets in the window, retweets included), truncated, window: {since, until, hours_back},
    source}``, newest first. Zero posts is a success (no data is an answer).

    Raises:
        ToolInputError: NOT_CONFIGURED when ``FINAGENT_DATA_SOCIAL_DIR`` is unset or not a folder.
        SocialSourceError: the ticker's file cannot be read or parsed (INTERNAL_ERROR).
    """
    source = social_source(ctx)
    until = close_at_or_before(ctx.as_of)
    since = until - timedelta(hours=params.hours_back)
    posts = source.posts(params.symbol, since=since, until=until)
    shown = posts[: params.limit]
    ref = source.source_ref(params.symbol)
    data = {
        "symbol": params.symbol,
        "posts": [post_row(p) for p in shown],
        "count": len(shown),
        "distinct": len(posts),
        "copies": sum(p.count for p in posts),
        "truncated": len(posts) > len(shown),
        "window": {"since": since.isoformat(), "until": until.isoformat(), "hours_back": params.hours_back},
        "source": ref,
    }
    summary = (
        f"{len(shown)} of {len(posts)} social posts ({data['copies']} tweets) for {params.symbol} in "
        f"{params.hours_back} h to {until:%Y-%m-%d %H:%M} UTC (market close)"
    )
    return ToolOutput(data=data, summary=summary, source_refs=(ref,), symbol=params.symbol)
