"""Prompts a small local model can follow: one filled example answer instead of a JSON schema,
short contexts, and bounded answer schemas that compile to a llama.cpp grammar.

Why (docs/llm.md, "Prompts for small models"): a 0.5B–3B instruct model given a JSON schema as
text tends to echo the schema, or to answer fields it was not asked; given ONE filled example of
the answer, built from this analysis's own numbers and real ``tool_call_id``s, it copies the
shape and replaces the values. The JSON schema still travels, but as the request's
``response_format`` (constrained decoding where the server offers it), in a bounded form
(:func:`grammar_schema`): llama.cpp turns ``maxLength: N`` into N nested optional rules and an
unbounded list into an open repetition, so the grammar form keeps strings short, lists short,
every key required and no ``$ref``.

Copying (docs/llm.md, "Copying the example"): a small model may return the example unchanged,
and an example whose judgement is a fixed "neutral"/HOLD makes that copy look like a sober
reading. So the example's *judgement* (recommendation, outlook, label, signal) is drawn from the
allowed values by a hash of the role, symbol and date (:func:`example_choice`): independent of
the data, reproducible for one analysis (same prompt, same cache key), and different across
analyses. Not the deterministic analyst's own reading either: then a copy and an agreement with
the rules could not be told apart. A model that copies now agrees with the example about as
often as the draw says and with the deterministic reading only by chance, which
``bench/llm_local_model.py`` measures per role. The facts of the example (trend vs the moving
average, the numbers, the refs) stay this analysis's own: copying a fact exactly is what the
grounding rules ask for.

Contexts without tools (``FINAGENT_LLM_MAX_ITERATIONS=0``): the research stage has already
fetched the headlines and fundamentals; :func:`headline_digest` and
:func:`fundamentals_digest` put a short, cited digest of them in the analysts' context.

Nothing here touches the deterministic path: the example answers are built only when a model
is asked.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from typing import Any

from pydantic import BaseModel

#: Longest strings and lists in the grammar form of an answer schema (:func:`grammar_schema`).
#: ``notes``/statement texts: about two sentences; other strings are ids, labels or contracts.
GRAMMAR_TEXT_MAX = 200
GRAMMAR_SHORT_MAX = 48
GRAMMAR_LIST_MAX = 4
#: Fields whose strings are prose (the longer bound): notes, statements, risk notes.
_PROSE_FIELDS = frozenset({"notes", "text", "risks"})

#: The line of every system prompt that shows the example answer (hashed into prompt_version).
ANSWER_SHAPE = (
    "Answer with ONE JSON object with exactly the keys of this example. The example's numbers "
    "and tool_call_ids are this analysis's, but its judgement was drawn at random, not read "
    "from the data: decide your own, write your own notes, and copy any number you use exactly "
    "from the data given. Example:"
)

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
    return out


def grammar_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of ``model``'s answers in a form that compiles to a small llama.cpp grammar.

    ``$ref``/``$defs`` inlined; titles, descriptions and defaults removed; every property
    required, no extra keys; strings at most :data:`GRAMMAR_TEXT_MAX` characters (``notes``,
    ``text``) or :data:`GRAMMAR_SHORT_MAX` (others, enums keep their values); lists at most
    :data:`GRAMMAR_LIST_MAX` items. Every answer it admits also validates as ``model`` (the
    bounds only tighten the model's), so validation is unchanged. Raises nothing."""
    schema = model.model_json_schema()
    bounded: dict[str, Any] = _bound(_inline(schema, schema.get("$defs") or {}))
    bounded["title"] = model.__name__
    return bounded


def _present(values: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: values[k] for k in keys if values.get(k) is not None}


def short_quote(quote: dict[str, Any] | None) -> dict[str, Any]:
    """The quote values an analyst needs (:data:`QUOTE_KEYS` that are not null), from a
    ``get_stock_data`` output; prices in USD, ``market_cap`` in USD. ``{}`` without a quote."""
    return _present(quote or {}, QUOTE_KEYS)


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
    items = list((news or {}).get("news") or [])
    items.sort(key=lambda n: str(n.get("published_at") or ""), reverse=True)
    items.sort(key=lambda n: -float(n.get("impact_score") or 0.0))
    out = []
    for n in items[:limit]:
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


def _side(a: float, b: float) -> str:
    return "above" if a > b else "below" if a < b else "at"


def technical_example(*, technical: dict[str, Any], refs: list[str], seed: str = "") -> dict[str, Any]:
    """A filled :class:`~agents.analysts.models.TechnicalView` answer from this analysis's
    indicators: trend vs the two-hundred-day SMA, levels below/above the close, one true note
    with copied numbers; ``source_refs``: the non-empty ``refs``. ``recommendation`` is drawn
    by :func:`example_choice` from ``seed`` (not read from the data). Raises nothing."""
    ind = technical.get("indicators") or {}
    raw_close, sma50, sma200 = technical.get("close"), ind.get("sma_50"), ind.get("sma_200")
    candidates = (sma50, sma200, ind.get("bb_lower"), ind.get("bb_upper"))
    levels = [v for v in candidates if isinstance(v, int | float)]
    close = float(raw_close) if isinstance(raw_close, int | float) else None
    direction = "sideways"
    note = "The indicators show no clear trend."
    if close is not None and isinstance(sma200, int | float):
        direction = {"above": "up", "below": "down"}.get(_side(close, sma200), "sideways")
        note = f"Close {raw_close} is {_side(close, sma200)} the two-hundred-day SMA {sma200}."
    below = sorted((v for v in levels if close is not None and v < close), reverse=True)[:2]
    above = sorted(v for v in levels if close is not None and v > close)[:2]
    return {
        "recommendation": example_choice(("bullish", "bearish", "neutral"), seed=seed),
        "trend_direction": direction,
        "trend_quality": "moderate",
        "support_levels": below,
        "resistance_levels": above,
        "extension_risk": "moderate",
        "notes": note,
        "source_refs": [r for r in refs if r][:2],
    }


def fundamental_example(
    *,
    quote: dict[str, Any] | None,
    refs: list[str],
    seed: str = "",
    fundamentals: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A filled :class:`~agents.analysts.models.FundamentalView` answer: a note restating one
    value (the digest's P/E, else the quote's, else its first value), ``outlook`` drawn by
    :func:`example_choice` from ``seed``; ``fundamentals``: :func:`fundamentals_digest`.
    Raises nothing."""
    digest = fundamentals or {}
    pe = digest.get("pe_ratio", (quote or {}).get("pe_ratio"))
    note = "No valuation ratio is given."
    if pe is not None:
        note = f"The P/E ratio is {pe}."
    elif digest:
        key, value = next(iter(digest.items()))
        note = f"The {key.replace('_', ' ')} is {value}."
    missing = [k.replace("_", " ") for k in ("gross_margin", "debt_to_equity") if k not in digest][:1]
    return {
        "outlook": example_choice(("positive", "negative", "neutral"), seed=seed),
        "missing_data": missing,
        "notes": note,
        "source_refs": [r for r in refs if r][:2],
    }


def sentiment_example(
    *, refs: list[str], seed: str = "", headlines: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A filled :class:`~agents.analysts.models.SentimentView` answer (no number): ``label``
    drawn by :func:`example_choice` from ``seed``; the note names the first headline's source
    when ``headlines`` (:func:`headline_digest`) has one. Raises nothing."""
    first = (headlines or [{}])[0] if headlines else {}
    source = first.get("source")
    note = (
        f"One headline is from {source}; weigh what the titles report."
        if source
        else ("Say which headlines matter and why.")
    )
    return {
        "label": example_choice(("positive", "negative", "neutral"), seed=seed),
        "news_risk": example_choice(("low", "moderate", "high"), seed=seed + "|risk"),
        "missing_data": [],
        "notes": note,
        "source_refs": [r for r in refs if r][:2],
    }


def synthesis_example(deterministic_rec: dict[str, Any], *, seed: str = "") -> dict[str, Any]:
    """A filled :class:`~agents.analysts.models.SynthesisView` answer: a signal drawn by
    :func:`example_choice` from ``seed`` (not the scorer's: a copy must not pass for agreement),
    one rationale statement whose text is :data:`SYNTHESIS_RATIONALE_PLACEHOLDER` and whose
    refs are those of one of the scorer's rules (one voting the signal's way first: BUY
    bullish, SELL bearish, HOLD any vote), a confidence of 0.5 and the risk assessor's first flag
    as a risk note. A drawn BUY/SELL that no rule votes for becomes HOLD: the example must be an
    answer the signal check would accept. Raises nothing."""
    components = [
        c for c in deterministic_rec.get("components") or [] if c.get("text") and c.get("source_refs")
    ]
    signal = example_choice(("BUY", "HOLD", "SELL"), seed=seed)
    way = {"BUY": 1, "SELL": -1}.get(signal, 0)
    if way and not any((c.get("vote") or 0) * way > 0 for c in components):
        signal, way = "HOLD", 0

    def rank(c: dict[str, Any]) -> int:
        vote = c.get("vote") or 0
        agrees = vote * way > 0 if way else vote != 0
        return 0 if agrees else 1

    ranked = sorted(components, key=rank)
    # the statement's text is a placeholder, its refs the rule's: shown a rule statement, the
    # real 0.5B model wrote it back verbatim in 6 of 6 answers; shown the placeholder, it wrote
    # its own restatement in 5 of 6, grounded (docs/benchmarks.md, "The real 0.5B model with
    # the copy guard"). An answer that writes the placeholder back is a copy like any other.
    placeholder = SYNTHESIS_RATIONALE_PLACEHOLDER
    rationale = [{"text": placeholder, "source_refs": list(c["source_refs"])[:2]} for c in ranked[:1]]
    flags = [f["text"] for f in deterministic_rec.get("risk_flags") or [] if f.get("text")]
    return {
        "signal": signal,
        "confidence": 0.5,
        "rationale": rationale or [{"text": "No rule votes either way.", "source_refs": ["none"]}],
        "risks": flags[:1],
    }


#: The text of the synthesis example's rationale statement (:func:`synthesis_example`): what to
#: write, not something to copy (hashed into prompt_version).
SYNTHESIS_RATIONALE_PLACEHOLDER = (
    "(one statement of your own: restate a rule above that votes for your signal, with its numbers)"
)


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
    a, b = (" ".join(t.lower().split()) for t in (answer, example))
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


def system_prompt(*, instructions: str, rules: str, example: dict[str, Any]) -> str:
    """An agent's system prompt: its ``instructions``, the grounding ``rules`` and
    :data:`ANSWER_SHAPE` followed by ``example`` as one JSON line."""
    return f"{instructions}\n{rules}\n{ANSWER_SHAPE} {json.dumps(example, separators=(', ', ': '))}"


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
