"""Ticker validation (docs/design.md, "Tickers"): normalise to upper case, strip whitespace, 1–5 letters.

We also accept one share-class suffix after a dot or dash (``BRK.B``, ``BRK-A``), which the strict
``^[A-Z]+$`` would refuse but which real US listings use; the class part is 1–2 letters.

:func:`refuse_junk` is the one rule, shared by the CLI (``finagent analyze``, through
``pipeline.query.parse_query``) and the HTTP gateway (``pipeline.producer.submit``), that tells a
ticker with junk in it (``AAPL;DROP TABLE``) from a question, before anything resolves it.
Errors echo at most :data:`MAX_ECHO` characters of the input.
"""

from __future__ import annotations

import re
from typing import Final

TICKER_MIN_LENGTH = 1
TICKER_MAX_LENGTH = 5
_TICKER_RE = re.compile(r"^[A-Z]{1,5}(?:[.-][A-Z]{1,2})?$")
#: The same format over the text exactly as sent, either case, nothing around it: the rule
#: :func:`strict_ticker` applies and the HTTP gateway's OpenAPI document states (ASCII classes
#: only, so ECMA-262 and Python read it alike).
TICKER_PATTERN: Final = r"^[A-Za-z]{1,5}([.-][A-Za-z]{1,2})?$"
_STRICT_TICKER_RE: Final = re.compile(TICKER_PATTERN)
#: The longest text :data:`TICKER_PATTERN` matches (``BRK.AB``-like: 5 + 1 + 2).
TICKER_TEXT_MAX_LENGTH: Final = 8

#: Marks a ticker attempt may hold besides letters and digits: class suffixes (``BRK.B``,
#: ``BRK-A``), index and futures notation (``^GSPC``, ``ES=F``). Such input is then refused, if
#: at all, by the format rule, with the usual message.
TICKER_MARKS = frozenset(".-^=")
#: Characters no question needs: shell, SQL and markup metacharacters. Quotes, ``$`` (a
#: cashtag), ``/`` (P/E), ``&`` (AT&T, S&P) and sentence punctuation are prose, not junk.
CODE_JUNK = frozenset(";\\<>|`{}")
#: The most characters of user input an error message repeats, and the most bad characters it
#: names (a long junk string has many).
MAX_ECHO = 200
MAX_NAMED = 10


def clip(text: str, limit: int = MAX_ECHO) -> str:
    """``text`` cut to ``limit`` characters plus ``"…"`` when longer, for echoing user input."""
    return text if len(text) <= limit else text[:limit] + "…"


class InvalidTickerError(ValueError):
    """Raised for a ticker that does not match the ticker format. ``symbol`` holds the input
    (whole); the message repeats at most :data:`MAX_ECHO` characters of it."""

    def __init__(self, symbol: str) -> None:
        self.symbol = symbol
        super().__init__(
            f"Invalid ticker format: {clip(symbol)!r}. "
            "Use 1-5 letters, optionally a class suffix such as BRK.B."
        )


class JunkInputError(ValueError):
    """A ticker attempt or a question holding characters no ticker or question needs
    (:func:`refuse_junk`). ``junk`` lists them once each, in order of appearance; the message
    names the first :data:`MAX_NAMED` of them and repeats at most :data:`MAX_ECHO` characters of
    ``text``."""

    def __init__(self, text: str, junk: str) -> None:
        self.text = text
        self.junk = junk
        named = " ".join(repr(ch) for ch in junk[:MAX_NAMED]) + (" …" if len(junk) > MAX_NAMED else "")
        if has_whitespace(text):
            message = (
                f"{clip(text)!r} contains {named}, which no question or ticker needs: ask without "
                "it, or pass a ticker (1-5 letters, optionally a class suffix such as BRK.B)"
            )
        else:
            message = (
                f"Invalid ticker format: {clip(text)!r} ({named} cannot be part of a ticker). "
                "Use 1-5 letters, optionally a class suffix such as BRK.B."
            )
        super().__init__(message)


def has_whitespace(text: str) -> bool:
    """Whether ``text`` has whitespace inside it (leading and trailing whitespace is ignored)."""
    return any(ch.isspace() for ch in text.strip())


def junk_characters(text: str) -> str:
    """The characters of ``text`` that make it a ticker with junk, once each, in order.

    The rule (the CLI's ``analyze`` argument, the gateway's ``symbol`` and ``query``):

    * Text without inner whitespace is a ticker attempt: every character that is not a letter,
      a digit or one of :data:`TICKER_MARKS` is junk (``AAPL;DROP``, ``$AAPL``, ``AAPL'``,
      ``AAPL/MSFT``). Control characters count.
    * Text with inner whitespace is a question: only :data:`CODE_JUNK` (``; \\ < > | ` { }``)
      and control characters are junk (``AAPL;DROP TABLE``, ``AAPL | cat``). "is tesla a
      buy?", "what's the P/E of $MSFT?" or "how is AT&T doing" hold none. A question with a
      quote trick (``AAPL' OR '1'='1``) stays a question and resolves like any other text:
      nothing ever splices the text into SQL or a shell.

    Returns ``""`` when there is none.
    """
    stripped = text.strip()
    if has_whitespace(stripped):
        bad = [ch for ch in stripped if ch in CODE_JUNK or (not ch.isprintable() and not ch.isspace())]
    else:
        bad = [ch for ch in stripped if not (ch.isalnum() or ch in TICKER_MARKS)]
    return "".join(dict.fromkeys(bad))


def refuse_junk(text: str) -> None:
    """Raise :class:`JunkInputError` when ``text`` holds junk (:func:`junk_characters`).

    Raises:
        JunkInputError: a ``ValueError`` whose message names the bad characters and repeats at
            most :data:`MAX_ECHO` characters of ``text``.
    """
    junk = junk_characters(text)
    if junk:
        raise JunkInputError(text, junk)


def normalize_ticker(symbol: str) -> str:
    """Return ``symbol`` stripped and upper-cased if it is a valid ticker.

    Args:
        symbol: user input such as ``" aapl "`` or ``"brk.b"``.
    Returns:
        The normalised ticker, e.g. ``"AAPL"``, ``"BRK.B"``.
    Raises:
        InvalidTickerError: empty, too long, digits or other characters.
    """
    if not isinstance(symbol, str):
        raise InvalidTickerError(repr(symbol))
    value = symbol.strip().upper()
    if not _TICKER_RE.fullmatch(value):
        raise InvalidTickerError(symbol)
    return value


def strict_ticker(text: str) -> str:
    """``text`` upper-cased if it matches :data:`TICKER_PATTERN` exactly (no whitespace is
    stripped: the HTTP gateway takes a ticker field as its schema states it).

    Raises:
        JunkInputError: ``text`` holds characters no ticker has (:func:`refuse_junk`; the
            message names them).
        InvalidTickerError: any other mismatch (empty, too long, digits, spaces around it).
    """
    refuse_junk(text)
    if not _STRICT_TICKER_RE.fullmatch(text):
        raise InvalidTickerError(text)
    return text.upper()


def name_once(subject: str, message: str) -> str:
    """``"<subject>: <message>"``, unless ``message`` already starts with ``subject`` followed
    by ``:`` or a space (data providers name the symbol first: ``"ZZZZZ: not in the embedded
    dataset"``); so a caller adding context never stacks ``ZZZZZ: ZZZZZ: …``."""
    if message.startswith((f"{subject}:", f"{subject} ")):
        return message
    return f"{subject}: {message}"


def drop_subject(subject: str, message: str) -> str:
    """``message`` without its leading ``"<subject>: "`` prefixes (any number), for a place that
    already shows ``subject`` next to it (a digest line ``**AAPL**: …``)."""
    prefix = f"{subject}: "
    while message.startswith(prefix):
        message = message[len(prefix) :]
    return message
