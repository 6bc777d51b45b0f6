"""Social posts about a ticker: the offline stocknet tweet files (``FINAGENT_DATA_SOCIAL_DIR``).

Files: ``<FINAGENT_DATA_SOCIAL_DIR>/{TICKER}.jsonl``, one JSON object a line with ``id``,
``created_at`` (UTC, ISO 8601), ``text`` (as posted; a retweet keeps its ``RT @user:`` prefix),
``lang``, ``user_followers`` and ``retweet`` — the tweets of the ACL 2018 stock-movement data set
(Xu & Cohen, ``../shared/data/news/stocknet_tweets/``, 2014–2015).

Why offline only: no keyless online source of cash-tagged posts fits (Twitter/X and StockTwits
need keys or forbid bulk reads), and the benchmark data is what the social analyst is measured on.

Contract (the market-data protocol's, ``docs/architecture.md`` "Data sources"): no post is an
empty list (a ticker without a file, or nothing in the window); an unreadable or malformed file
raises :class:`SocialSourceError` (an infrastructure failure, ``INTERNAL_ERROR``); a missing folder
raises :class:`SocialNotConfiguredError` (``NOT_CONFIGURED`` with a hint).

Point in time is enforced here: :meth:`StocknetTweetsSource.posts` returns only copies created in
``[since, until)``, and the collapsing of retweets and duplicate texts (:func:`collapse`) runs on
those copies only, so a later retweet never raises an earlier post's count.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from agents.data.market.base import ProviderError

#: ``RT @user: `` at the start of a retweet (Twitter's manual and automatic retweet prefix).
_RT_PREFIX = re.compile(r"^\s*RT\s+@\w+:?\s*", re.IGNORECASE)
_URL = re.compile(r"https?://\S*")
_SPACE = re.compile(r"\s+")


class SocialNotConfiguredError(ProviderError):
    """No social folder is configured (→ ``NOT_CONFIGURED``); ``hint`` says what to set."""

    code = "NOT_CONFIGURED"

    def __init__(self, message: str, *, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


class SocialSourceError(ProviderError):
    """A social file exists but cannot be read or parsed (an infrastructure failure)."""

    code = "INTERNAL_ERROR"


@dataclass(frozen=True)
class RawPost:
    """One tweet as stored: ``created_at`` UTC, ``followers`` = the poster's follower count then."""

    id: str
    created_at: datetime
    text: str
    lang: str
    followers: int
    retweet: bool


@dataclass(frozen=True)
class SocialPost:
    """One distinct text with its copies in the window.

    Attributes:
        symbol: the ticker the file is for.
        text: the first visible copy's text without its ``RT @user:`` prefix.
        created_at / last_at: UTC time of the first and last visible copy.
        count: copies in the window (the original, retweets and identical re-posts), >= 1.
        retweets: how many of them are retweets.
        followers: the largest follower count among the copies' posters (the author reach of the
            best-read copy), people.
        reach: the sum of the copies' follower counts (an upper bound of the people reached), people.
        lang: the first copy's language code (``en``, ``und``, ...).
        ids: ids of the copies, first first.
    """

    symbol: str
    text: str
    created_at: datetime
    last_at: datetime
    count: int
    retweets: int
    followers: int
    reach: int
    lang: str
    ids: tuple[str, ...]


def text_key(text: str) -> str:
    """The key under which copies collapse: the text without the ``RT @user:`` prefix, links and a
    trailing ellipsis (a retweet cut at 140 characters ends in ``…``), spaces collapsed, lower case.

    Example: ``"RT @a: $AAPL up http://t.co/x"`` and ``"$aapl  up http://…"`` share ``"$aapl up"``.
    """
    body = _URL.sub(" ", _RT_PREFIX.sub("", text))
    body = body.rstrip().rstrip("…").rstrip(".")
    return _SPACE.sub(" ", body).strip().lower()


def collapse(symbol: str, rows: list[RawPost]) -> list[SocialPost]:
    """Distinct texts of ``rows`` (any order) with their copy counts, newest first by first copy.

    Copies share :func:`text_key`; an empty key (a bare link) keeps each row on its own.
    """
    groups: dict[str, list[RawPost]] = {}
    for row in sorted(rows, key=lambda r: (r.created_at, r.id)):
        key = text_key(row.text) or f"\x00{row.id}"
        groups.setdefault(key, []).append(row)
    posts = [
        SocialPost(
            symbol=symbol,
            text=_RT_PREFIX.sub("", copies[0].text).strip(),
            created_at=copies[0].created_at,
            last_at=copies[-1].created_at,
            count=len(copies),
            retweets=sum(c.retweet for c in copies),
            followers=max(c.followers for c in copies),
            reach=sum(c.followers for c in copies),
            lang=copies[0].lang,
            ids=tuple(c.id for c in copies),
        )
        for copies in groups.values()
    ]
    return sorted(posts, key=lambda p: (p.created_at, p.ids[0]), reverse=True)


class SocialSource(Protocol):
    """What ``get_social_posts`` needs from a source (module docstring: the contract)."""

    name: str

    def posts(self, symbol: str, *, since: datetime, until: datetime) -> list[SocialPost]:
        """Collapsed posts about ``symbol`` created in ``[since, until)`` (UTC), newest first."""
        ...

    def source_ref(self, symbol: str) -> str:
        """A citation of the data read for ``symbol``, e.g. ``social:/path/AAPL.jsonl``."""
        ...


def _parse(path: Path) -> list[RawPost]:
    rows: list[RawPost] = []
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                    stamp = datetime.fromisoformat(str(obj["created_at"]).replace("Z", "+00:00"))
                    rows.append(
                        RawPost(
                            id=str(obj["id"]),
                            created_at=stamp.replace(tzinfo=UTC)
                            if stamp.tzinfo is None
                            else stamp.astimezone(UTC),
                            text=str(obj["text"]),
                            lang=str(obj.get("lang") or "und"),
                            followers=max(0, int(obj.get("user_followers") or 0)),
                            # the flag, or the prefix where the flag is missing (213 such rows)
                            retweet=bool(obj.get("retweet")) or bool(_RT_PREFIX.match(str(obj["text"]))),
                        )
                    )
                except (ValueError, KeyError, TypeError) as exc:
                    raise SocialSourceError(f"{path}: line {number} is not a post ({exc})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SocialSourceError(f"cannot read {path}: {exc}") from None
    rows.sort(key=lambda r: r.created_at)
    return rows


class StocknetTweetsSource:
    """The stocknet tweet files under ``root`` (one ``{TICKER}.jsonl`` each), each parsed once."""

    name = "stocknet"

    def __init__(self, root: Path) -> None:
        self.root = Path(root).expanduser()
        self._cache: dict[str, list[RawPost]] = {}
        self._lock = threading.Lock()

    def _path(self, symbol: str) -> Path:
        return self.root / f"{symbol.upper()}.jsonl"

    def raw(self, symbol: str) -> list[RawPost]:
        """Every stored tweet of ``symbol``, oldest first; empty when the ticker has no file."""
        path = self._path(symbol)
        with self._lock:
            if symbol not in self._cache:
                self._cache[symbol] = _parse(path) if path.is_file() else []
            return self._cache[symbol]

    def posts(self, symbol: str, *, since: datetime, until: datetime) -> list[SocialPost]:
        """See :meth:`SocialSource.posts`: copies in ``[since, until)`` UTC, collapsed."""
        return collapse(symbol, [r for r in self.raw(symbol) if since <= r.created_at < until])

    def source_ref(self, symbol: str) -> str:
        """``social:<absolute path of the ticker's file>``."""
        return f"social:{self._path(symbol).resolve()}"


_SOURCES: dict[str, StocknetTweetsSource] = {}
_SOURCES_LOCK = threading.Lock()


def get_social_source(social_dir: Path | None) -> SocialSource:
    """The source over ``social_dir`` (``FINAGENT_DATA_SOCIAL_DIR``), one instance per folder (it
    holds the parsed files).

    Raises:
        SocialNotConfiguredError: the folder is unset or not a folder.
    """
    if social_dir is None or not Path(social_dir).expanduser().is_dir():
        raise SocialNotConfiguredError(
            "No social posts folder is configured."
            if social_dir is None
            else f"FINAGENT_DATA_SOCIAL_DIR={str(social_dir)!r} is not a folder.",
            hint="Set FINAGENT_DATA_SOCIAL_DIR to a folder of {TICKER}.jsonl tweet files "
            "(e.g. ../shared/data/news/stocknet_tweets).",
        )
    folder = str(Path(social_dir).expanduser().resolve())
    with _SOURCES_LOCK:
        if folder not in _SOURCES:
            _SOURCES[folder] = StocknetTweetsSource(Path(folder))
        return _SOURCES[folder]
