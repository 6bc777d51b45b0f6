"""Grounding that enforces, per analyst answer, before it is passed on (docs/design.md, "Grounding").

Statements. An LLM answer is cut into statements: each sentence of a free-text field
(``notes``), each item of a list of texts (``missing_data``, ``risks``), each number of a
numeric list (``support_levels``), and each synthesis ``rationale`` item. ``confidence`` is a
judgement in [0, 1], not a fact, and ``source_refs`` are citations: neither is checked.

Rule 1, numbers. Every number a statement prints must match a value of a tool output it cites
(``agents.analysts.grounding``: equal at the decimals printed, a percentage also as a fraction),
and a number read with a measure's name ("RSI 41.2", "the previous close of 186.18") a value
of that measure (``grounding.misattributed``; listed as "41.2 (not the RSI)"). A
rationale item cites its own ``source_refs``; every other statement of an answer cites the
answer's ``source_refs`` plus the outputs the analyst was shown (its context refs); a tool call
the analyst made is a source when the answer cites it. Any other ref is not a source. The
caller gives a statement with unverified numbers one correction round
(:mod:`agents.analysts.llm_agents`); what is still unverified after it is dropped
(:func:`drop_unverified`) and listed with its numbers.

Rule 2, the signal (:func:`signal_support`). The deterministic scorer's rule votes
(``agents.quant.scorer``: RSI, MACD, price vs SMA(50) and SMA(200), SMA alignment, Bollinger; each
vote in [-1, 1] with a weight) are the reference. A statement *restates* a scorer rule when it
prints that rule's identifying values: every value the rule shares with another rule and, when
the rule has values of its own, at least one of them (ADX, which only scales the trend votes, is
ignored). "Close 430.47 is below the fifty-day SMA 441.2" restates price-vs-SMA(50); "Close
430.47 is below the fifty-day SMA" restates nothing (the close alone belongs to three rules).
The support of a signal is ``Σ weight × vote`` over the distinct rules its accepted statements
restate. BUY is accepted only with support > 0, SELL only with support < 0; HOLD claims no edge
and needs none. Otherwise the scorer's signal stands and the reason is recorded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agents.analysts.claims import LabelProblem, contradictions, label_problems
from agents.analysts.grounding import (
    ValueIndex,
    extract_numbers,
    keyed_values,
    matches,
    misattributed,
    printed_value,
    unverified_numbers,
)
from agents.tools.history import history_values
from agents.tools.registry import ToolContext

#: Keys of LLM-written JSON that are not factual numbers: judgements, citations and identifiers
#: (an OCC option symbol such as AAPL140627P00620000 holds digits, not a claim).
NOT_FACTS = frozenset({"confidence", "source_refs", "signal", "recommendation", "contract"})
#: A sentence ends at . ! or ? followed by white space (a decimal point never is).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
#: ADX scales the trend votes (scorer docstring); it does not identify a rule.
_SCALE_KEYS = frozenset({"adx_14"})
#: Longest statement text kept in a "dropped" entry (the full answer stays in the llm_calls row).
MAX_DROPPED_TEXT = 200


@dataclass(frozen=True)
class Dropped:
    """A statement removed because numbers in it match no cited tool output.

    ``part``: where it was (``technical.notes``, ``synthesis.rationale``, ...); ``text``: the
    statement (≤ ``MAX_DROPPED_TEXT`` characters); ``numbers``: the unverified numbers as printed.
    """

    part: str
    text: str
    numbers: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """``{part, text, numbers}`` for records and the report."""
        return {"part": self.part, "text": self.text, "numbers": list(self.numbers)}


@dataclass
class Sources:
    """The cited tool outputs an answer may use, as :class:`ValueIndex` per ``tool_call_id``.

    ``known``: the refs that are sources at all (context refs, the agent's own successful tool
    calls, or the analysis's cited calls); ``base``: those a statement may use without citing
    them (the context the analyst was shown; ``None``: all known); a tool call the agent made
    counts only when its answer cites it. ``load(ref)``: the index of one output (cached).
    """

    known: list[str]
    load: Callable[[str], ValueIndex]
    base: list[str] | None = None
    #: ``load_keys(ref)``: the output's numbers by key (``grounding.keyed_values``) for the
    #: attribution check; ``None``: no attribution check (values only)
    load_keys: Callable[[str], Mapping[str, list[float]]] | None = None
    _cache: dict[str, ValueIndex] = field(default_factory=dict)
    _keys_cache: dict[str, Mapping[str, list[float]]] = field(default_factory=dict)

    @property
    def shown(self) -> list[str]:
        """The refs every non-rationale statement may use uncited: ``base`` (the outputs the
        analyst was shown) or, without it, every known ref."""
        return self.known if self.base is None else self.base

    def keyed(self, refs: Iterable[str]) -> dict[str, list[float]]:
        """The numbers by key of the known refs among ``refs``, merged (:func:`misattributed`'s
        ``keyed``); ``{}`` without ``load_keys``."""
        merged: dict[str, list[float]] = {}
        if self.load_keys is None:
            return merged
        for ref in dict.fromkeys(r for r in refs if r and r in self.known):
            if ref not in self._keys_cache:
                self._keys_cache[ref] = self.load_keys(ref)
            for key, values in self._keys_cache[ref].items():
                merged.setdefault(key, []).extend(values)
        return merged

    def of(self, refs: Iterable[str]) -> list[ValueIndex]:
        """Indexes of the known refs among ``refs`` (unknown refs are ignored: not a source)."""
        out = []
        for ref in dict.fromkeys(r for r in refs if r and r in self.known):
            if ref not in self._cache:
                self._cache[ref] = self.load(ref)
            out.append(self._cache[ref])
        return out


def output_index(ctx: ToolContext, ref: str) -> ValueIndex:
    """The values of the cited output ``ref``: the research history from bars rebuilt and
    digest-checked (``agents.tools.history.history_values``), anything else from its stored
    result (``ctx.result_data``; an output that cannot be loaded has no values)."""
    if ref in ctx.history_checks:
        values = history_values(ctx, ref)
        if values is not None:
            return ValueIndex.of_values(values)
    return ValueIndex(ctx.result_data(ref))


def context_sources(*, ctx: ToolContext, known: Iterable[str], base: Iterable[str] | None = None) -> Sources:
    """:class:`Sources` over ``known`` refs (``base``: see :class:`Sources`), loaded through
    ``ctx`` (one query for all but the rebuilt history)."""
    refs = [r for r in dict.fromkeys(known) if r]
    ctx.prefetch([r for r in refs if r not in ctx.history_checks])
    shown = None if base is None else [r for r in base if r]
    return Sources(
        known=refs,
        load=lambda ref: output_index(ctx, ref),
        base=shown,
        load_keys=lambda ref: _keys_of(ctx, ref),
    )


def _keys_of(ctx: ToolContext, ref: str) -> Mapping[str, list[float]]:
    """The numbers by key of the cited output ``ref`` for the attribution check; ``{}`` for the
    research history (bars name no measure a statement is checked against)."""
    if ref in ctx.history_checks:
        return {}
    return keyed_values(ctx.result_data(ref))


#: Integer constants up to this size may appear in a calculator expression without a source
#: (multipliers and periods such as "2 * atr" or "/ 100"); any other number must be grounded.
MAX_FREE_CONSTANT = 100


def grounded_calculations(
    calls: Iterable[tuple[str, str, Mapping[str, Any] | None]], *, sources: Sources
) -> list[str]:
    """The refs among an analyst's own successful tool ``calls`` (``(name, ref, data)``) that
    may count as sources. A ``calculator`` result is only as good as its inputs, which the
    model chose: it counts only when every number of its expression is a value of the outputs
    the analyst was shown (``sources``) or an integer constant ≤ ``MAX_FREE_CONSTANT``; else
    "987.65 * 1" would launder an invented number into a tool output. Other tools read data
    and always count."""
    pool = sources.of(sources.shown)
    out = []
    for name, ref, data in calls:
        if name == "calculator":
            expression = str((data or {}).get("expression", ""))
            free = [
                p
                for p in extract_numbers(expression)
                if not (p.decimals == 0 and not p.percent and abs(p.value) <= MAX_FREE_CONSTANT)
            ]
            if any(not any(index.has(p) for index in pool) for p in free):
                continue
        out.append(ref)
    return out


def _split_sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text.strip()) if s]


def unverified_of(
    result: Mapping[str, Any], *, sources: Sources, name: str, labels: tuple[str, ...] = ()
) -> list[Dropped]:
    """Every statement of the answer ``result`` (module docstring) with unverified numbers, as
    :class:`Dropped` entries (nothing is removed here). ``name`` prefixes the parts.
    ``labels``: the answer keys whose labels and levels the cited outputs can contradict
    (the model's ``CHECKED_LABELS``; ``claims.label_problems``): each contradicted one is an
    entry too, its ``text`` the label or level as printed."""
    found, problems = _problems_of(result, sources=sources, name=name, labels=labels)
    return found + [_label_entry(name, p, replaced=False) for p in problems]


def _label_entry(name: str, problem: LabelProblem, *, replaced: bool) -> Dropped:
    """The :class:`Dropped` entry of a contradicted label or level; ``replaced``: the entry
    also says that the data's label now stands (after the correction round, never in the
    request itself, which must not hand the model the answer)."""
    why = problem.why
    if replaced and problem.data_label is not None:
        why += f"; the data's {problem.data_label} is used"
    return Dropped(f"{name}.{problem.key}", problem.given, (why,))


def _problems_of(
    result: Mapping[str, Any], *, sources: Sources, name: str, labels: tuple[str, ...]
) -> tuple[list[Dropped], list[LabelProblem]]:
    """The statements of ``result`` with unverified numbers or misreadings, and its labels and
    levels among ``labels`` that the outputs contradict (one pass for :func:`unverified_of` and
    :func:`drop_unverified`)."""
    refs = [*result.get("source_refs", []), *sources.shown]
    pool = sources.of(refs)
    keyed = sources.keyed(refs)
    found: list[Dropped] = []
    for key, value in result.items():
        if key in NOT_FACTS or value is None or isinstance(value, bool):
            continue
        part = f"{name}.{key}"
        if key == "rationale" and isinstance(value, list):
            for item in value:
                text = str(item.get("text", ""))
                cited = item.get("source_refs", [])
                unverified = unverified_numbers(text, sources.of(cited))
                missing = _located(unverified, sources=sources, cited=cited)
                missing += _misread(text, sources.keyed(cited), unverified)
                if missing:
                    found.append(Dropped(part, text[:MAX_DROPPED_TEXT], tuple(missing)))
        elif isinstance(value, str):
            for sentence in _split_sentences(value):
                missing = unverified_numbers(sentence, pool)
                missing += _misread(sentence, keyed, missing)
                if missing:
                    found.append(Dropped(part, sentence[:MAX_DROPPED_TEXT], tuple(missing)))
        elif isinstance(value, list):
            for item in value:
                if not (isinstance(item, str) or _is_number(item)):
                    continue
                text = item if isinstance(item, str) else printed_value(item)
                missing = unverified_numbers(text, pool)
                if missing:
                    found.append(Dropped(part, text[:MAX_DROPPED_TEXT], tuple(missing)))
        elif _is_number(value):
            missing = unverified_numbers(printed_value(value), pool)
            if missing:
                found.append(Dropped(part, printed_value(value), tuple(missing)))
    return found, label_problems(result, keyed, keys=labels)


def _located(numbers: list[str], *, sources: Sources, cited: Iterable[str]) -> list[str]:
    """``numbers`` (a rationale item's unverified numbers as printed), each found in a known
    output the item does not cite written ``"186.18 (in <ref>, not cited)"``: the correction
    request then says which ref to add, and the report why the item was dropped. The real
    0.5B model restated an analyst's "previous close 186.18" citing only the indicators
    (docs/benchmarks.md, seventh run). The first such ref in ``sources.known`` order is named."""
    skip = set(cited)
    others = [r for r in sources.known if r and r not in skip]
    out = []
    for number in numbers:
        where = next((r for r in others if not unverified_numbers(number, sources.of([r]))), None)
        out.append(f"{number} (in {where}, not cited)" if where else number)
    return out


def _misread(text: str, keyed: Mapping[str, list[float]], unverified: list[str]) -> list[str]:
    """What ``text`` misreads beyond its ``unverified`` numbers: numbers read with the wrong
    measure (``grounding.misattributed``) and claims the outputs contradict
    (``claims.contradictions``), each as one line for the correction round and the report."""
    # a problem reads "<number as printed> (not ...)"; the number may hold a space ("2.48 %")
    wrong = [m for m in misattributed(text, keyed) if m.split(" (not ")[0] not in unverified]
    return wrong + contradictions(text, keyed)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def count_numbers(result: Mapping[str, Any]) -> int:
    """How many numbers the statements of ``result`` print (what grounding checked)."""
    count = 0
    for key, value in result.items():
        if key in NOT_FACTS or value is None or isinstance(value, bool):
            continue
        if key == "rationale" and isinstance(value, list):
            count += sum(len(extract_numbers(str(item.get("text", "")))) for item in value)
        elif isinstance(value, str):
            count += len(extract_numbers(value))
        elif isinstance(value, list):
            count += sum(
                len(extract_numbers(i if isinstance(i, str) else printed_value(i)))
                for i in value
                if isinstance(i, str) or _is_number(i)
            )
        elif _is_number(value):
            count += 1
    return count


def drop_unverified(
    result: dict[str, Any], *, sources: Sources, name: str, labels: tuple[str, ...] = ()
) -> tuple[dict[str, Any], list[Dropped]]:
    """``result`` without its statements holding unverified numbers, and what was dropped.

    Sentences are removed from texts, items from lists (a contradicted price level too); a
    contradicted label of ``labels`` (:func:`unverified_of`) is replaced by the label the data
    gives, its entry saying so; a numeric field that is not in a list (none of the analysts'
    models has one besides ``confidence``) is left for the caller to judge. The returned dict
    is a copy; the answer's model may no longer validate it (e.g. a synthesis with no
    rationale left), which the caller checks.
    """
    found, problems = _problems_of(result, sources=sources, name=name, labels=labels)
    dropped = found + [_label_entry(name, p, replaced=True) for p in problems]
    if not dropped:
        return dict(result), []
    relabel = {p.key: p.data_label for p in problems if p.data_label is not None}
    bad = {(d.part, d.text) for d in dropped}
    out: dict[str, Any] = {}
    for key, value in result.items():
        part = f"{name}.{key}"
        if key in NOT_FACTS or value is None or isinstance(value, bool):
            out[key] = value
        elif key in relabel:
            out[key] = relabel[key]
        elif key == "rationale" and isinstance(value, list):
            out[key] = [i for i in value if (part, str(i.get("text", ""))[:MAX_DROPPED_TEXT]) not in bad]
        elif isinstance(value, str):
            kept = [s for s in _split_sentences(value) if (part, s[:MAX_DROPPED_TEXT]) not in bad]
            out[key] = " ".join(kept)
        elif isinstance(value, list):
            out[key] = [
                i
                for i in value
                if not (
                    (isinstance(i, str) and (part, i[:MAX_DROPPED_TEXT]) in bad)
                    or (_is_number(i) and (part, printed_value(i)) in bad)
                )
            ]
        else:
            out[key] = value
    return out, dropped


@dataclass(frozen=True)
class SignalCheck:
    """The verdict of :func:`signal_support` on an LLM signal.

    ``accepted``: whether the signal stands; ``support``: ``Σ weight × vote`` of the restated
    rules (4 dp); ``restated``: ``{rule: vote}`` of those rules; ``reason``: one line saying why.
    """

    signal: str
    accepted: bool
    support: float
    restated: dict[str, float]
    reason: str

    def to_json(self) -> dict[str, Any]:
        """``{signal, accepted, support, restated, reason}``."""
        return {
            "signal": self.signal,
            "accepted": self.accepted,
            "support": self.support,
            "restated": dict(self.restated),
            "reason": self.reason,
        }


def restated_rules(text: str, components: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The scorer components (``agents.quant.scorer.Component`` dumps: ``name, values, vote, weight``)
    that statement ``text`` restates (rule 2 of the module docstring)."""
    printed = extract_numbers(text)
    keys_of = {str(c["name"]): set(c.get("values", {})) - _SCALE_KEYS for c in components}
    out = []
    for comp in components:
        name = str(comp["name"])
        keys = keys_of[name]
        if not keys:
            continue
        shared = {k for k in keys if any(k in other for n, other in keys_of.items() if n != name)}
        own = keys - shared
        values = comp.get("values", {})

        def shown(key: str, values: Mapping[str, Any] = values) -> bool:
            return any(matches(p, float(values[key])) for p in printed)

        if all(shown(k) for k in shared) and (not own or any(shown(k) for k in own)):
            out.append(comp)
    return out


def signal_support(
    *, signal: str, statements: list[Mapping[str, Any]], components: list[Mapping[str, Any]]
) -> SignalCheck:
    """Whether the LLM ``signal`` is supported by its accepted rationale ``statements``
    (``{text, source_refs}``), the scorer ``components`` being the reference (rule 2 of the
    module docstring). Raises nothing."""
    restated: dict[str, float] = {}
    weight: dict[str, float] = {}
    for item in statements:
        for comp in restated_rules(str(item.get("text", "")), components):
            restated[str(comp["name"])] = float(comp["vote"])
            weight[str(comp["name"])] = float(comp["weight"])
    support = round(sum(weight[n] * v for n, v in restated.items()), 4) + 0.0
    votes = ", ".join(f"{n} {v:+g}" for n, v in restated.items()) or "none"
    if signal == "HOLD":
        return SignalCheck(signal, True, support, restated, "HOLD claims no edge and needs no support")
    wanted = 1.0 if signal == "BUY" else -1.0
    if support * wanted > 0:
        return SignalCheck(
            signal,
            True,
            support,
            restated,
            f"its statements restate scorer rules with net support {support:+g}",
        )
    if not restated:
        why = f"{signal} rests on no statement that restates a scorer rule"
    else:
        lean = "bearish" if support < 0 else "bullish" if support > 0 else "neutral"
        why = f"{signal} rests on statements whose scorer rules vote {lean} (net {support:+g}: {votes})"
    return SignalCheck(signal, False, support, restated, why)
