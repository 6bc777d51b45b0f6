"""The stored ``analyses.state`` without the tool results it repeats: references instead.

A stage copies tool results into the state: ``stock_data.quote`` is the ``get_stock_data``
result, ``stock_data.fundamentals`` one entry of the ``get_fundamentals`` result,
``analysis.technical`` the ``technical_indicators`` result, ``analysis.chart.support_resistance``
and ``.fib`` the chart tools' results. Those results are stored in the analysis's own
``tool_calls`` rows already, so the state column repeated ~6.5 KB of JSON per analysis (and
once more in every checkpoint's row version).

:func:`pack` replaces each object or list of the state whose JSON text (``db.engine.json_dumps``:
the writer's key order, ints and floats as written) is exactly the text of a value inside a
successful tool result of the same analysis by ``{"$result": [tool_call_id, key or index, ...]}``
(the path to that value inside the result). :func:`unpack` puts the values back: the state read
is the state written, key for key and in the same order (what ``finagent replay``, the API and
the reports read). Only values of at least :data:`MIN_BYTES` are replaced (a reference costs
~40-60 bytes).

Rules that keep a reference resolvable:

* Only tool calls of the analysis itself are referenced (``tool_calls.analysis_id``): retention
  deletes an analysis's tool calls only with the analysis (``db.retention``), so a kept state
  never points at a deleted row, and no other analysis's purge can break it.
* The value referenced is the result of the latest successful attempt of the logical call (the
  rule of ``db.repo.get_tool_result``), on write and on read.
* A state that already holds an object shaped like the marker is stored as it is (never
  ambiguous), and so are states written before this rule: they hold no marker and read unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from db.engine import JSON_SCALARS, json_dumps, json_text

#: The marker key: ``{"$result": [tool_call_id, *path]}``.
MARKER: Final = "$result"
#: Objects and lists shorter than this (bytes of JSON) stay inline.
MIN_BYTES: Final = 96


def _is_marker(value: Any) -> bool:
    """Whether ``value`` is shaped like a reference (an object whose only key is :data:`MARKER`)."""
    return not isinstance(value, JSON_SCALARS) and isinstance(value, Mapping) and set(value) == {MARKER}


def _has_marker(value: Any) -> bool:
    """Whether ``value`` holds, anywhere, an object shaped like a reference. The JSON text is
    searched for the marker key first (the C encoder; a walk of a whole state costs ~10 times
    more), and walked only when the key is there."""
    if f'"{MARKER}"' not in json_text(value):
        return False
    return _holds_marker(value)


def _holds_marker(value: Any) -> bool:
    """:func:`_has_marker` by walking ``value``."""
    if isinstance(value, JSON_SCALARS):
        return False
    if isinstance(value, Mapping):
        return _is_marker(value) or any(_holds_marker(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_holds_marker(v) for v in value)
    return False


def _index(results: Mapping[str, Any]) -> dict[str, list[Any]]:
    """JSON text → ``[tool_call_id, *path]`` of every object or list of at least
    :data:`MIN_BYTES` inside ``results`` (``{tool_call_id: result}``); the first place wins."""
    found: dict[str, list[Any]] = {}

    def walk(value: Any, where: list[Any]) -> None:
        if isinstance(value, JSON_SCALARS) or not isinstance(value, Mapping | list):
            return
        text = json_dumps(value)
        if len(text) < MIN_BYTES:
            return
        found.setdefault(text, where)
        items = value.items() if isinstance(value, Mapping) else enumerate(value)
        for key, item in items:
            walk(item, [*where, key])

    for tool_call_id, result in results.items():
        walk(result, [tool_call_id])
    return found


def pack(state: dict[str, Any], results: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` as stored: every object or list (not the state itself) equal, as JSON text, to
    a value inside ``results`` (``{tool_call_id: result}``, the analysis's successful calls)
    replaced by a reference (module docstring). Returns ``state`` itself when nothing was
    replaced or it holds a marker-shaped object; otherwise a new dict (``state`` is not
    modified)."""
    if not results or _has_marker(state):
        return state
    index = _index(results)
    if not index:
        return state
    replaced = False

    def walk(value: Any) -> Any:
        nonlocal replaced
        if not isinstance(value, JSON_SCALARS) and isinstance(value, Mapping | list):
            text = json_dumps(value)
            if len(text) < MIN_BYTES:
                return value
            where = index.get(text)
            if where is not None:
                replaced = True
                return {MARKER: where}
            if isinstance(value, Mapping):
                return {k: walk(v) for k, v in value.items()}
            return [walk(v) for v in value]
        return value

    packed = {k: walk(v) for k, v in state.items()}
    return packed if replaced else state


def refs(stored: Any) -> set[str]:
    """The ``tool_call_id`` of every reference in a stored state (empty for a state without)."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, JSON_SCALARS):
            return
        if _is_marker(value):
            found.add(str(value[MARKER][0]))
        elif isinstance(value, Mapping):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(stored)
    return found


def unpack(stored: Any, results: Mapping[str, Any]) -> Any:
    """The state :func:`pack` stored, whole again: every reference replaced by the value at its
    path inside ``results[tool_call_id]``. A state without references comes back unchanged.

    Raises ``KeyError`` naming the reference when its tool call or path is missing (a tool-call
    row deleted while the state still referenced it: retention never does that).
    """
    if not refs(stored):
        return stored

    def resolve(where: list[Any]) -> Any:
        tool_call_id, *path = where
        if tool_call_id not in results:
            raise KeyError(f"state reference {where}: tool call {tool_call_id} has no stored result")
        value = results[tool_call_id]
        try:
            for step in path:
                value = value[step]
        except (KeyError, IndexError, TypeError) as exc:
            raise KeyError(f"state reference {where}: no such value in the result") from exc
        return _copy(value)

    def walk(value: Any) -> Any:
        if isinstance(value, JSON_SCALARS):
            return value
        if _is_marker(value):
            return resolve(value[MARKER])
        if isinstance(value, Mapping):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(stored)


def _copy(value: Any) -> Any:
    """A deep copy of a JSON value (two references to one result never share objects)."""
    if isinstance(value, JSON_SCALARS):
        return value
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def latest_results(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``{tool_call_id: result}`` of ``rows`` (dicts with ``tool_call_id``, ``status``,
    ``attempt``, ``result``): the successful attempts with a result, the highest attempt
    winning (``db.repo.get_tool_result``'s rule)."""
    best: dict[str, tuple[int, Any]] = {}
    for row in rows:
        if row.get("status") != "success" or row.get("result") is None:
            continue
        key, attempt = str(row["tool_call_id"]), int(row.get("attempt") or 1)
        if key not in best or attempt >= best[key][0]:
            best[key] = (attempt, row["result"])
    return {key: result for key, (_, result) in best.items()}


#: ``report_json`` keys that SQL reads inside the column (``db.backtest_repo``, ``db.ops_repo``):
#: always stored as they are (and what an archived row keeps of them: ``db.archive.slim_report``).
REPORT_SQL_KEYS: Final = frozenset(
    {
        "p_outperform",
        "score",
        "author",
        "prompt_version",
        "raw_signal",
        "probability",
        "views",
        "details",
        "headline",
        "risk",  # the risk forecast's ranges and VaRs, scored by apps.scorecard_risk
    }
)
#: The pseudo tool-call id under which :func:`pack_report` references the analysis's state.
STATE: Final = "$state"


def pack_report(report_json: dict[str, Any], stored_state: dict[str, Any]) -> dict[str, Any]:
    """``report_json`` as stored: each value (not under a :data:`REPORT_SQL_KEYS` key) that is,
    as JSON text, a value of the state AS STORED with it (``stored_state``: after :func:`pack`)
    is replaced by ``{"$result": ["$state", *path]}``. The report is built from the state, so
    much of it (rationale, risk flags, views, citations) repeats it.

    Only values the stored state holds inline can match (a value holding a reference has
    another JSON text): the recorded report never depends on a ``tool_calls`` row, so a row
    altered after the fact shows in ``finagent replay``'s diff of the report instead of
    changing the record with it. Returns ``report_json`` itself when nothing was replaced."""
    free = {k: v for k, v in report_json.items() if k not in REPORT_SQL_KEYS}
    if _has_marker(report_json) or not free:
        return report_json
    packed = pack(free, {STATE: stored_state})
    if packed is free:
        return report_json
    return {k: packed.get(k, v) for k, v in report_json.items()}


def pack_row(
    state: dict[str, Any], report_json: dict[str, Any] | None, results: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``(state, report_json)`` as one ``analyses`` row stores them: ``state`` packed against
    ``results`` (:func:`pack`), then ``report_json`` (``None`` stays ``None``) packed against
    that stored state (:func:`pack_report`)."""
    stored = pack(state, results)
    return stored, None if report_json is None else pack_report(report_json, stored)


def jsonb_order(value: Any) -> Any:
    """``value`` with every object's keys in PostgreSQL ``jsonb``'s order (shorter keys first,
    then bytewise): what a ``jsonb`` column hands back for a value written in any order."""
    if isinstance(value, Mapping):
        keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
        return {k: jsonb_order(value[k]) for k in keys}
    if isinstance(value, list):
        return [jsonb_order(v) for v in value]
    return value


def unpack_report(stored: Any, state: Any, *, jsonb: bool) -> Any:
    """The ``report_json`` :func:`pack_report` stored, whole again from the analysis's whole
    ``state``; ``jsonb``: the column is PostgreSQL ``jsonb``, so the values put back get its key
    order (the order the column would have handed back). Raises ``KeyError`` for a path the
    state lacks."""
    if not isinstance(stored, Mapping) or not refs(stored):
        return stored
    whole = unpack(stored, {STATE: state})
    # the parts read from the column are in jsonb's order already: sorting again changes nothing
    return jsonb_order(whole) if jsonb else whole
