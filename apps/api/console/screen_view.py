"""The option screen's rows for the console: the chain slice a ``filter_options`` or
``filter_calls`` call returned and the best passing contract of each expiry, shared by the
cash-secured put / covered call section (``views.options_view``) and the put credit spread's
(``put_spread_view``), whose short puts come from the same screen."""

from __future__ import annotations

from typing import Any

#: The screen's header fields the sections show above its rows.
HEADER = ("quote_date", "underlying_price", "screened", "passing_count", "rules", "failed_counts", "source")


def screen_parts(screen: dict[str, Any] | None) -> dict[str, Any]:
    """``{ladder, screen, slice}`` of the stored result ``screen`` of a screen call (``None`` when
    there is none): ``ladder`` the best passing contract of each expiry (the first of that expiry
    in the screen's ranking, by its ``score``; among the rows the screen returned, which are at
    most its ``limit``), by expiry; ``slice`` the rows the screen returned (the passing contracts
    with ``passes`` true, then the nearest misses with the rules they fail in ``failed``);
    ``screen`` its header (:data:`HEADER`: quote date, underlying, screened and passing counts,
    rules, failed counts, source), ``None`` without a screen. Prices USD a share, as stored."""
    screen = screen or {}
    passing = list(screen.get("passing") or [])
    ladder: dict[str, dict[str, Any]] = {}
    for row in passing:  # ranked best first: the first of an expiry is its best
        ladder.setdefault(str(row["expiry"]), row)
    rows = [{**r, "passes": True, "failed": []} for r in passing] + [
        {**r, "passes": False, "failed": list(r.get("failed") or [])}
        for r in screen.get("nearest_misses") or []
    ]
    return {
        "ladder": [ladder[k] for k in sorted(ladder)],
        "screen": {k: screen.get(k) for k in HEADER} if screen else None,
        "slice": rows,
    }


def screen_ref_of(record: dict[str, Any], tool: str) -> str | None:
    """The id of the ``tool`` call (``filter_options`` or ``filter_calls``) among the options
    analyst's citations of an option plan's ``record``; ``None`` when it cites none."""
    refs = (record.get("options") or {}).get("source_refs") or []
    return next((str(r) for r in refs if str(r).startswith(tool + "_")), None)
