"""Prompts a small local model can follow: the answer's keys and allowed values in one line,
short contexts, and bounded answer schemas that compile to a llama.cpp grammar.

Why (docs/llm.md, "Prompts for small models"): a 0.5B–3B instruct model given a JSON schema as
text tends to echo the schema, or to answer fields it was not asked. The JSON schema still
travels, but as the request's ``response_format`` (constrained decoding where the server offers
it), in a bounded form (:func:`grammar_schema`): llama.cpp turns ``maxLength: N`` into N nested
optional rules and an unbounded list into an open repetition, so the grammar form keeps strings
short, lists short, prose at least :data:`GRAMMAR_TEXT_MIN` characters, every key required and
no ``$ref``. The prompt itself names each key once with its allowed values or what it is for
(:func:`answer_keys`).

Why not a filled example answer (docs/llm.md, "Keys, not an example"): measured with the real
0.5B model (docs/benchmarks.md, "The real 0.5B model"), an example answer is written back: its
prose verbatim, its judgement whatever the example showed, also when that judgement was drawn
at random. Without an example the model has nothing to copy but the keys' descriptions, and an
answer that writes a description back, or says nothing (:func:`reading_problem`), is refused
like a copy. The options-plan analysts (``agents.analysts.option_llm``) still show one example
(:func:`chart_example` ...), with its judgement drawn by :func:`example_choice` and the copy
guard (:func:`copied_example`).

Contexts without tools (``FINAGENT_LLM_MAX_ITERATIONS=0``): the research stage has already
fetched the headlines and fundamentals; :func:`headline_digest` and
:func:`fundamentals_digest` put a short, cited digest of them in the analysts' context.

Nothing here touches the deterministic path: the prompts are built only when a model is asked.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from typing import Any

from pydantic import BaseModel

from agents.analysts.grounding import TOOL_CALL_ID
from agents.analysts.views import by_impact

#: Longest strings and lists in the grammar form of an answer schema (:func:`grammar_schema`).
#: ``notes``/statement texts: about two sentences; other strings are ids, labels or contracts.
GRAMMAR_TEXT_MAX = 200
#: Shortest prose (``notes``, statement ``text``) the grammar admits: an empty or one-word note
#: is no reading (:func:`reading_problem` refuses it where no grammar binds the server).
GRAMMAR_TEXT_MIN = 24
GRAMMAR_SHORT_MAX = 48
GRAMMAR_LIST_MAX = 4
#: Fields whose strings are prose (the longer bound): notes, statements, risk notes.
_PROSE_FIELDS = frozenset({"notes", "text", "risks"})
#: Prose fields that must say something (the :data:`GRAMMAR_TEXT_MIN` floor); risk notes may be short.
_READING_FIELDS = frozenset({"notes", "text"})

#: The line of an options-plan analyst's system prompt that shows its example answer (hashed
#: into prompt_version).
ANSWER_SHAPE = (
    "Answer with ONE JSON object with exactly the keys of this example. The example's numbers "
    "and tool_call_ids are this analysis's, but its judgement was drawn at random, not read "
    "from the data: decide your own, write your own notes, and copy any number you use exactly "
    "from the data given. Example:"
)
#: The line of the analysts' and the synthesis's system prompts that names the answer's keys
#: (:func:`answer_keys`; hashed into prompt_version).
ANSWER_KEYS = (
    "Answer with ONE JSON object with exactly these keys; decide every judgement yourself from "
    "the data given and copy any number you use exactly:"
)
#: What a key of an answer holds, where its type does not say it (:func:`answer_keys`; hashed
#: into prompt_version). An answer whose prose writes one of these back is refused
#: (:func:`reading_problem`).
FIELD_HINTS: dict[str, str] = {
    "notes": "one or two sentences of your own reading of the data above, with the numbers it rests on",
    "source_refs": "a list of the tool_call_ids above that your answer relies on",
    "missing_data": "a list of the data you needed but were not given (may be empty)",
    "support_levels": "a list of up to four prices below the close, copied from the data (may be empty)",
    "resistance_levels": "a list of up to four prices above the close, copied from the data (may be empty)",
    "confidence": "a number between 0 and 1: how sure you are (a judgement, not a score)",
    "rationale": (
        'a list of one to three objects {"text": one sentence of your own restating a scorer rule '
        'above that supports your signal, with its numbers, "source_refs": that rule\'s tool_call_ids}'
    ),
    "risks": "a list of short notes on the risk flags above (may be empty)",
}
#: The context line that introduces an analyst's computed readings (``agents.analysts.readings``;
#: hashed into prompt_version): facts the model is to weigh, not to redo or contradict.
READINGS_LINE = (
    "Readings computed from these outputs (true; say which matter and what they mean together, "
    "do not contradict them):"
)
#: Fewest words of prose that count as a reading (:func:`reading_problem`): "RSI 46.76 is
#: neutral." is four.
MIN_READING_WORDS = 4

#: Headlines shown to the sentiment analyst (highest impact first) and the longest title shown.
DIGEST_HEADLINES = 8
DIGEST_TITLE_MAX = 110
#: Fundamentals shown to the fundamental analyst: the fields the deterministic view's rules read
#: (``agents.analysts.views.FUNDAMENTAL_RULES``) plus the earnings trend, in this order.
FUNDAMENTAL_KEYS = (
    "pe_ratio",
    "peg_ratio",
    "ev_ebitda",
    "gross_margin",
    "roic",
    "current_ratio",
    "debt_to_equity",
    "net_debt_to_ebitda",
    "eps_actual",
    "eps_growth_yoy",
    "eps_surprise_mean_4q",
    "market_cap",
)

#: Indicator keys a technical analyst is shown (``technical_indicators`` output), in this order.
TECHNICAL_KEYS = (
    "rsi_14",
    "macd",
    "macd_signal",
    "adx_14",
    "sma_50",
    "sma_200",
    "bb_upper",
    "bb_middle",
    "bb_lower",
)
#: Quote keys every analyst is shown (``get_stock_data`` output).
QUOTE_KEYS = ("current_price", "previous_close", "change", "52w_high", "52w_low", "pe_ratio", "market_cap")
#: The quote's values each analyst is shown (:func:`short_quote`), by analyst name: the
#: fundamental analyst the valuation ones (shown the day's change and previous close, the real
#: 0.5B model restated them as its fundamental reading, docs/benchmarks.md); the sentiment
#: analyst none when it reads headlines (it wrote "the quote does not contain any relevant
#: information"); the synthesis sees no quote line at all.
QUOTE_SHOWN: dict[str, tuple[str, ...]] = {
    "technical": QUOTE_KEYS,
    "fundamental": ("current_price", "pe_ratio", "market_cap"),
    "sentiment": (),
}


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            return _inline(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
        return {k: _inline(v, defs) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def _bound(node: Any, field: str | None = None) -> Any:
    if not isinstance(node, dict):
        return node
    out = {k: v for k, v in node.items() if k not in ("title", "description", "default")}
    if "anyOf" in out:  # Optional[X]: X or null
        out["anyOf"] = [_bound(v, field) for v in out["anyOf"]]
    kind = out.get("type")
    if kind == "object":
        props = {name: _bound(sub, name) for name, sub in (out.get("properties") or {}).items()}
        out["properties"] = props
        out["required"] = list(props)  # every key written: a small model skips what it may
        out["additionalProperties"] = False
    elif kind == "array":
        out["items"] = _bound(out.get("items") or {}, field)
        out["maxItems"] = min(int(out.get("maxItems", GRAMMAR_LIST_MAX)), GRAMMAR_LIST_MAX)
        out["minItems"] = min(int(out.get("minItems", 0)), out["maxItems"])
    elif kind == "string" and "enum" not in out:
        cap = GRAMMAR_TEXT_MAX if field in _PROSE_FIELDS else GRAMMAR_SHORT_MAX
        out["maxLength"] = min(int(out.get("maxLength", cap)), cap)
        out.pop("minLength", None)
        if field in _READING_FIELDS:
            out["minLength"] = GRAMMAR_TEXT_MIN
    return out


def grammar_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of ``model``'s answers in a form that compiles to a small llama.cpp grammar.

    ``$ref``/``$defs`` inlined; titles, descriptions and defaults removed; every property
    required, no extra keys; strings at most :data:`GRAMMAR_TEXT_MAX` characters (``notes``,
    ``text``, at least :data:`GRAMMAR_TEXT_MIN`) or :data:`GRAMMAR_SHORT_MAX` (others, enums
    keep their values); lists at most
    :data:`GRAMMAR_LIST_MAX` items. Every answer it admits also validates as ``model`` (the
    bounds only tighten the model's), so validation is unchanged. Raises nothing."""
    schema = model.model_json_schema()
    bounded: dict[str, Any] = _bound(_inline(schema, schema.get("$defs") or {}))
    bounded["title"] = model.__name__
    return bounded


def _present(values: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: values[k] for k in keys if values.get(k) is not None}


def short_quote(quote: dict[str, Any] | None, *, keys: tuple[str, ...] = QUOTE_KEYS) -> dict[str, Any]:
    """The quote values an analyst needs (``keys``, :data:`QUOTE_KEYS` by default, that are not
    null), from a ``get_stock_data`` output; prices in USD, ``market_cap`` in USD. ``{}``
    without a quote."""
    return _present(quote or {}, keys)


def short_technical(technical: dict[str, Any]) -> dict[str, Any]:
    """The numbers a technical analyst needs from a ``technical_indicators`` output: ``close``,
    the 52-week range and :data:`TECHNICAL_KEYS` (RSI/ADX in points, MACD and levels in USD),
    nulls left out."""
    flat = {**_present(technical, ("close", "high_52w", "low_52w"))}
    flat.update(_present(technical.get("indicators") or {}, TECHNICAL_KEYS))
    return flat


def example_choice(values: tuple[str, ...], *, seed: str) -> str:
    """One of ``values`` picked by sha256 of ``seed`` (e.g. ``"technical|AAPL|2015-06-30"``):
    independent of the analysis's data, the same for the same seed in every process. The
    judgement an example answer shows (module docstring, "Copying"). Raises IndexError on an
    empty ``values``."""
    digest = hashlib.sha256(seed.encode("utf-8")).digest()
    return values[int.from_bytes(digest[:4], "big") % len(values)]


def headline_digest(news: dict[str, Any] | None, *, limit: int = DIGEST_HEADLINES) -> list[dict[str, Any]]:
    """At most ``limit`` headlines of a ``get_news`` output ``data``, highest ``impact_score``
    first (then newest): ``{title, source, time}`` each, the title cut to
    :data:`DIGEST_TITLE_MAX` characters, ``time`` the UTC ``published_at`` to the minute
    (``None`` undated). No sentiment score: the model judges the titles. ``[]`` without news."""
    out = []
    for n in by_impact(list((news or {}).get("news") or []))[:limit]:
        title = " ".join(str(n.get("headline") or "").split())
        if len(title) > DIGEST_TITLE_MAX:
            title = title[: DIGEST_TITLE_MAX - 1] + "…"
        stamp = n.get("published_at")
        out.append({"title": title, "source": n.get("source"), "time": str(stamp)[:16] if stamp else None})
    return out


def fundamentals_digest(entry: dict[str, Any] | None) -> dict[str, Any]:
    """The :data:`FUNDAMENTAL_KEYS` of a ``get_fundamentals`` entry that are not null, floats
    rounded to four decimals (the grounding check accepts fewer decimals than the source), plus
    its ``timestamp`` (the newest source's ISO date). Ratios are fractions (0.4459 = 44.59 %),
    ``eps_actual`` USD/share, ``market_cap`` USD. ``{}`` without values."""
    values: dict[str, Any] = {
        k: round(v, 4) if isinstance(v, float) else v
        for k, v in _present(entry or {}, FUNDAMENTAL_KEYS).items()
        if isinstance(v, int | float)
    }
    if values and (entry or {}).get("timestamp"):
        values["as_of"] = str((entry or {})["timestamp"])[:10]
    return values


#: difflib similarity (after case and white space are folded) at or above which an answer's
#: prose counts as the example's, copied (bench/llm_local_model.py uses the same rule).
NEAR_COPY = 0.9


def answer_prose(answer: dict[str, Any]) -> str:
    """The free text of an answer or example: its ``notes``, else the texts of its
    ``rationale`` statements joined by a space ("" when it has neither)."""
    if answer.get("notes"):
        return str(answer["notes"])
    return " ".join(str(s.get("text") or "") for s in answer.get("rationale") or [] if isinstance(s, dict))


def prose_match(answer: str, example: str) -> str:
    """``identical`` (equal after case and white space are folded), ``near`` (difflib ratio
    ≥ :data:`NEAR_COPY`) or ``different``."""
    a, b = _fold(answer), _fold(example)
    if a == b:
        return "identical"
    return "near" if difflib.SequenceMatcher(None, a, b).ratio() >= NEAR_COPY else "different"


def copied_example(answer: dict[str, Any], example: dict[str, Any]) -> bool:
    """True when ``answer``'s prose is the example's, identical or near-identical
    (:func:`prose_match`): such an answer says nothing of its own, and its judgement, drawn at
    random for the example, would be taken for a reading (module docstring, "Copying"). An
    answer without prose is not a copy."""
    mine, shown = answer_prose(answer), answer_prose(example)
    return bool(mine.strip()) and bool(shown.strip()) and prose_match(mine, shown) != "different"


def _describe(key: str, node: dict[str, Any]) -> str:
    if key in FIELD_HINTS:
        return FIELD_HINTS[key]
    options = [o for o in node.get("anyOf") or [node] if o.get("type") != "null"]
    enum = [v for o in options for v in o.get("enum") or []]
    nullable = " or null" if len(options) < len(node.get("anyOf") or [node]) else ""
    if enum:
        return "one of " + ", ".join(json.dumps(v) for v in enum) + nullable
    kind = options[0].get("type", "string") if options else "string"
    return {"number": "a number", "integer": "a whole number", "array": "a list"}.get(
        kind, "a short text"
    ) + nullable


def answer_keys(model: type[BaseModel]) -> str:
    """The answer-shape line of a prompt (:data:`ANSWER_KEYS`) for answers of ``model``: each key
    of its grammar form (:func:`grammar_schema`, in order) with its allowed values (enums, e.g.
    ``recommendation: one of "bullish", "bearish", "neutral"``) or what it holds
    (:data:`FIELD_HINTS`), ``;``-separated. No example value: see the module docstring. Raises
    nothing."""
    properties = grammar_schema(model).get("properties") or {}
    keys = "; ".join(f"{key}: {_describe(key, node)}" for key, node in properties.items())
    return f"{ANSWER_KEYS} {keys}."


#: Prose about the prompt instead of the data (measured with the real 0.5B model: "The
#: analyst's results do not contradict the data provided", "The fundamental notes do not match
#: any tool output you were shown", "matches the tool call ID get_stock_data_..."): a reading of
#: the data never needs to speak of tool outputs, ids, what it was shown or the analysts' results
#: ("The readings do not contradict these claims. The source_refs are [get_stock_data_...").
PROMPT_TALK = re.compile(
    r"\b(?:you\s+were\s+(?:shown|given)|tool\s+outputs?|tool[\s_-]?call(?:[\s_-]?ids?)?|"
    r"(?:earlier\s+)?analysts?'?s?'?\s+results?|json|source_refs|the\s+readings|these\s+claims)\b"
    rf"|{TOOL_CALL_ID.pattern}",
    re.I,
)
#: Prose saying the data is absent ("The quote does not provide any information about ...",
#: "no data", "not provided"): false when the analyst was shown its data (:func:`reading_problem`'s
#: ``data``); the model said so in most fundamental and sentiment answers it was shown data for.
ABSENCE = re.compile(
    r"\b(?:no|not\s+any|without\s+any)\s+(?:\w+\s+){0,2}?(?:information|data)\b"
    r"|\b(?:does|do|did)\s*(?:not|n't)\s+(?:\w+\s+)?(?:contain|provide|include|mention|have|give)\b"
    r"|\bnot\s+(?:provided|given|available|relevant)\b",
    re.I,
)

#: Words naming fundamental data (the fields of :data:`FUNDAMENTAL_KEYS` and what they
#: measure): a fundamental analyst's prose naming none of them speaks of other data (the real
#: 0.5B model restated the quote's price and previous close as its fundamental reading).
FUNDAMENTAL_TOPIC = re.compile(
    r"\b(?:P/?E|PEG|price[-/ ](?:to[- ])?earnings|EV/EBITDA|EBITDA|margins?|ROIC|return\s+on|"
    r"current\s+ratio|debts?|leverage|EPS|earnings|revenues?|sales|valuations?|valued|"
    r"market\s+cap(?:italization)?|cash|profit\w*|growth|liquidity|balance\s+sheet|fundamentals?|"
    r"undervalued|overvalued|expensive|cheap)\b|\b(?:" + "|".join(FUNDAMENTAL_KEYS) + r")\b",
    re.I,
)
#: Words naming news (the sentiment analyst's data): with headlines shown, prose naming none of
#: them and sharing no word of five letters or more with the headlines speaks of other data
#: (:func:`news_topic`; the 0.5B model wrote about the price's 50-day high instead).
NEWS_WORDS = (
    r"headlines?|news|tweets?|reports?|reported|articles?|sentiment|announc\w*|stor(?:y|ies)|"
    r"coverage|press|media|rumou?rs?|upgrade\w*|downgrade\w*|analysts?"
)
#: Shortest headline word that names its subject for :func:`news_topic` ("iPhone", "lawsuit").
NEWS_WORD_MIN = 5


def news_topic(headlines: list[dict[str, Any]]) -> re.Pattern[str]:
    """The topic pattern of a sentiment answer shown ``headlines`` (:func:`headline_digest`
    items, ``title`` each): :data:`NEWS_WORDS` or any word of the titles of at least
    :data:`NEWS_WORD_MIN` letters. Raises nothing."""
    titles = " ".join(str(h.get("title") or "") for h in headlines)
    words = sorted({w.lower() for w in re.findall(rf"[A-Za-z]{{{NEWS_WORD_MIN},}}", titles)})
    alternatives = NEWS_WORDS + "".join(f"|{re.escape(w)}" for w in words)
    return re.compile(rf"\b(?:{alternatives})\b", re.I)


#: Prose saying there are no headlines ("There are no other news headlines in the window"):
#: false when headlines were shown (:func:`reading_problem` with ``data`` "the headlines"),
#: true when the window held none, so it is not part of :data:`ABSENCE`.
NEWS_ABSENCE = re.compile(
    # "no negative news" is a reading of the news, not a claim that there is none
    r"\b(?:no|not\s+any|without\s+any)\s+(?:(?:other|new|recent|relevant|more|further|available|news)\s+)"
    r"{0,2}(?:headlines?|news|articles?|tweets?)\b"
    r"|\b(?:headlines?|news)\s+(?:is|are)\s+(?:not\s+)?(?:missing|absent|empty|unavailable)\b",
    re.I,
)
#: The ``data`` of :func:`reading_problem` for a sentiment analyst shown headlines (the key of
#: :data:`NEWS_ABSENCE`; ``agents.analysts.llm_agents`` passes it, so the two cannot drift).
HEADLINES_SHOWN = "the headlines"
#: What ``data`` an absence pattern besides :data:`ABSENCE` applies to.
_ABSENCE_OF = {HEADLINES_SHOWN: NEWS_ABSENCE}


def reading_problem(
    answer: dict[str, Any],
    *,
    shown: dict[str, str] | None = None,
    data: str | None = None,
    topic: re.Pattern[str] | None = None,
) -> str | None:
    """Why ``answer``'s prose (:func:`answer_prose`: notes, or the synthesis's rationale) is no
    reading of the data, or ``None`` when it is one: ``"it is empty"``, ``"it has fewer than
    MIN_READING_WORDS words"``, ``"it writes back the prompt's description of <key>"``
    (:func:`prose_match` identical or near to a :data:`FIELD_HINTS` value, or containing one),
    or ``"it writes back <name>"`` for a text of ``shown`` (``{name: text}``: prose the agent
    was shown, near-identical or holding each of the answer's sentences, e.g. ``{"the
    technical analyst's notes": ...}``; the real 0.5B model copied an earlier analyst's notes
    as its own, docs/benchmarks.md), ``"it speaks of the prompt, not the data"``
    (:data:`PROMPT_TALK`), or, when ``data`` names what the agent was shown (e.g. ``"the
    fundamentals"``), ``"it says the data is absent, but <data> was shown"`` (:data:`ABSENCE`;
    for "the headlines" also :data:`NEWS_ABSENCE`),
    or, when ``topic`` matches the words that name that data (:data:`FUNDAMENTAL_TOPIC`,
    :func:`news_topic`), ``"it speaks of none of <data>"`` for prose it does not match.
    Raises nothing."""
    prose = answer_prose(answer)
    words = prose.split()
    if not words:
        return "it is empty"
    if len(words) < MIN_READING_WORDS:
        return f"it has fewer than {MIN_READING_WORDS} words"
    if PROMPT_TALK.search(prose):
        return "it speaks of the prompt, not the data"
    absent = _ABSENCE_OF.get(data or "")
    if data and (ABSENCE.search(prose) or (absent is not None and absent.search(prose))):
        return f"it says the data is absent, but {data} was shown"
    texts = [prose, *(str(s.get("text") or "") for s in answer.get("rationale") or [] if isinstance(s, dict))]
    texts = [t for t in texts if t.strip()]
    for key, hint in FIELD_HINTS.items():
        if any(prose_match(t, hint) != "different" or hint.lower() in t.lower() for t in texts):
            return f"it writes back the prompt's description of {key}"
    sources = {name: _fold(text) for name, text in (shown or {}).items() if text.strip()}
    # the whole prose made of sentences of what it was shown (a shortened copy, or the
    # synthesis's statements each an analyst's notes) is a copy as well; a sentence counts as
    # taken from a text when it is in it, or when its words are all the text's words (the
    # 0.5B model's "The fifty-day SMA 571.9649 is not a five-day" of the correction request's
    # "571.9649 (not a five-day SMA: the fifty-day SMA)")
    sentences = [_fold(x) for x in re.split(r"(?<=[.!?])\s+", prose) if x.strip()]

    vocabulary = {name: _words(folded) for name, folded in sources.items()}

    def taken(sentence: str, name: str) -> bool:
        words = _words(sentence) - _FILLER
        return sentence in sources[name] or (len(words) >= MIN_READING_WORDS and words <= vocabulary[name])

    used = [name for name in sources if any(taken(x, name) for x in sentences)]
    whole = all(any(taken(x, name) for name in sources) for x in sentences)
    near = [
        name
        for name, text in (shown or {}).items()
        if text.strip() and prose_match(prose, text) != "different"
    ]
    if near or (used and whole):
        return "it writes back " + " and ".join(near or used)
    if topic is not None and not topic.search(prose):
        return f"it speaks of none of {data or 'the data it was asked to read'}"
    return None


#: Last words of a sentence that is not finished ("The fifty-day SMA 185.3011 is above the"):
#: articles, prepositions, conjunctions, copulas and comparison words.
_DANGLING = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "and",
        "or",
        "but",
        "nor",
        "is",
        "are",
        "was",
        "were",
        "be",
        "not",
        "than",
        "with",
        "by",
        "for",
        "in",
        "on",
        "at",
        "as",
        "which",
        "that",
        "its",
        "their",
        "from",
        "below",
        "above",
        "into",
        "while",
        "whose",
        # "... the stock's EPS growth over" (the real 0.5B model, cut at the grammar's bound)
        "over",
        "under",
        "about",
        "between",
        "against",
        "through",
        "during",
        "per",
        "within",
        "since",
        "because",
        "if",
        "when",
        "where",
        "who",
        "has",
        "have",
        "had",
        "been",
        "being",
        "these",
        "those",
        "such",
        "very",
        "approximately",
        "around",
    ]
)
_SENTENCE_DONE = re.compile(r"[.!?][\"')\]]*$")
#: A last word cut inside (the real 0.5B model ended a note on "below the two-h0"): letters
#: and digits mixed, or a hyphenated word ending on a single letter; "50-day", "14th", "2x" and
#: "Q4" are whole words.
_WHOLE_MIXED = re.compile(r"\d+(?:st|nd|rd|th|x|-[a-z]+)|[a-z]\d")
_CUT_WORD = re.compile(r"[a-z\d-]*(?:[a-z][a-z\d-]*\d|\d[a-z\d-]*[a-z])[a-z\d-]*|[a-z]+(?:-[a-z]+)*-[b-hj-z]")


#: A last word glued from pieces by a cut (the real 0.5B model ended notes on "beat the估算" and
#: "beat theEst" at the grammar's length bound): Latin letters next to another script, or a
#: function word run into a capitalised one.
_GLUED = re.compile(
    r"[A-Za-z][^\x00-\x7f]|[^\x00-\x7f][A-Za-z]|^(?:the|a|an|of|to|and|or|in|on|at|by|for)[A-Z]"
)


def finished(text: str) -> str:
    """``text`` without a trailing unfinished sentence: one that ends in no ``.``/``!``/``?``
    and either stops on a word that cannot end a sentence (:data:`_DANGLING`: "... is above
    the"), on a word cut inside (:data:`_CUT_WORD`: "two-h0"; :data:`_GLUED`: "theEst"), on an
    open clause (a comma, colon, semicolon, dash or parenthesis) or runs to the grammar's length bound
    (:data:`GRAMMAR_TEXT_MAX`, cut by the server). A sentence merely missing its full stop is
    kept. ``""`` when nothing finished is left (the answer is then no reading,
    :func:`reading_problem`). Raises nothing."""
    stripped = text.strip()
    if not stripped or _SENTENCE_DONE.search(stripped):
        return stripped
    word = re.sub(r"\W+$", "", stripped).rsplit(maxsplit=1)[-1] if re.search(r"\w", stripped) else ""
    last = word.lower()
    open_clause = stripped[-1] in ",;:-("
    cut = (_CUT_WORD.fullmatch(last) is not None and _WHOLE_MIXED.fullmatch(last) is None) or bool(
        _GLUED.search(word)
    )
    if last not in _DANGLING and not open_clause and not cut and len(stripped) < GRAMMAR_TEXT_MAX - 2:
        return stripped
    ends = list(re.finditer(r"[.!?][\"')\]]*(?=\s)", stripped))
    return stripped[: ends[-1].end()] if ends else ""


#: Words that say nothing of their own in the word comparison of :func:`reading_problem`.
_FILLER = frozenset(
    ["a", "an", "the", "is", "are", "was", "were", "be", "it", "its", "this", "that", "and", "of", "to"]
)


def _words(text: str) -> set[str]:
    return {w.strip(".-") for w in re.findall(r"[\w$][\w.$-]*", text.lower())} - {""}


def _fold(text: str) -> str:
    return " ".join(text.lower().split())


def system_prompt(
    *, instructions: str, rules: str, example: dict[str, Any] | None = None, keys: str | None = None
) -> str:
    """An agent's system prompt: its ``instructions``, the grounding ``rules`` and either the
    answer's ``keys`` line (:func:`answer_keys`) or :data:`ANSWER_SHAPE` followed by
    ``example`` as one JSON line. Raises ValueError when neither or both are given."""
    if (example is None) == (keys is None):
        raise ValueError("system_prompt: give the answer's keys line or an example answer, not both")
    shape = keys if keys is not None else f"{ANSWER_SHAPE} {json.dumps(example, separators=(', ', ': '))}"
    return f"{instructions}\n{rules}\n{shape}"


def _statement(text: str, refs: list[str]) -> dict[str, Any]:
    return {"text": text, "source_refs": [r for r in refs if r][:2] or ["none"]}


def chart_example(*, view: dict[str, Any], refs: list[str], seed: str = "") -> dict[str, Any]:
    """A filled :class:`~agents.analysts.models.ChartDecision` answer of the csp chart analyst:
    the computed view's trend and extension (facts), one statement restating its close and
    nearest support, ``recommendation`` drawn by :func:`example_choice` from ``seed``. Raises
    nothing."""

    def pick(key: str, allowed: tuple[str, ...], default: str) -> str:
        value = view.get(key)
        return value if value in allowed else default

    close, support = view.get("close"), view.get("nearest_support")
    text = (
        f"The close {close} is above the nearest support {support}."
        if isinstance(close, int | float) and isinstance(support, int | float) and close > support
        else "The computed view shows no support below the close."
    )
    return {
        "recommendation": example_choice(("pass", "reject"), seed=seed),
        "trend_direction": pick("trend_direction", ("up", "down", "sideways"), "sideways"),
        "trend_quality": pick("trend_quality", ("strong", "moderate", "weak"), "weak"),
        "extension_risk": pick("extension_risk", ("low", "moderate", "high"), "moderate"),
        "rationale": [_statement(text, refs)],
    }


def options_example(*, view: dict[str, Any], refs: list[str], seed: str = "") -> dict[str, Any]:
    """A filled :class:`~agents.analysts.models.OptionsDecision` answer of the csp options
    analyst, ``recommendation`` drawn by :func:`example_choice` from ``seed``. No put has been
    screened when the prompt is written, so a ``select`` shows where the contract comes from
    instead of one: copied as is, it names no passing put and the support check refuses it.
    Raises nothing."""
    recommendation = example_choice(("select", "reject"), seed=seed)
    support = view.get("nearest_support")
    text = (
        f"The chart view puts the nearest support at {support}."
        if isinstance(support, int | float)
        else "The chart view gives no support level."
    )
    return {
        "recommendation": recommendation,
        "contract": "copy from filter_options passing" if recommendation == "select" else None,
        "rationale": [_statement(text, refs)],
    }


def research_example(*, research: dict[str, Any], refs: list[str], seed: str = "") -> dict[str, Any]:
    """A filled :class:`~agents.analysts.models.ResearchDecision` answer of the csp research
    analyst: the research rules' earnings risk (a fact of the calendar) and first reason,
    ``recommendation`` and ``news_risk`` drawn by :func:`example_choice` from ``seed``. Raises
    nothing."""
    reasons = [r for r in research.get("reasons") or [] if r.get("text") and r.get("source_refs")]
    first = (
        {"text": str(reasons[0]["text"])[:GRAMMAR_TEXT_MAX], "source_refs": reasons[0]["source_refs"][:2]}
        if reasons
        else _statement("The earnings calendar shows the next report date.", refs)
    )
    risk = research.get("earnings_risk")
    return {
        "recommendation": example_choice(("pass", "reject"), seed=seed),
        "earnings_risk": risk if risk in ("low", "moderate", "high", "unknown") else "unknown",
        "news_risk": example_choice(("low", "moderate", "high"), seed=seed + "|risk"),
        "rationale": [first],
    }
