"""The option plan's report: its headline (the verdict) and its Markdown section, written from
the JSON of its record as every other report section is written from the JSON report
(``pipeline.report``). Prices USD per share, premium, income, collateral and P&L USD per contract
(100 shares) unless a line says "in all", yields and probabilities in %."""

from __future__ import annotations

from typing import Any

from pipeline.report_format import fmt, money, pct, refs

#: The section heading and the verdict's noun per right.
TITLES = {"put": ("Cash-secured put", "cash-secured put"), "call": ("Covered call", "covered call")}


def _neg(value: Any) -> Any:
    return -value if isinstance(value, int | float) else value


def _pair(rn: Any, rw: Any) -> str:
    return f"{pct(rn, 1)} / {pct(rw, 1)}"


def title_of(record: dict[str, Any]) -> tuple[str, str]:
    """``(section heading, noun)`` of a record (an older csp record has no ``right``: a put)."""
    right = record.get("right") or ("call" if record.get("strategy") == "covered call" else "put")
    return TITLES[right]


def across(rungs: list[dict[str, Any]], strike_keys: tuple[str, ...]) -> str:
    """How a ladder of ``rungs`` spreads its contracts, for the verdict: ``"across 2 strikes"``
    when every rung has its own strike (its own pair of ``strike_keys`` for a spread), else
    ``"across 2 expiries"`` when every rung has its own expiry, else ``"in 2 rungs"``."""
    k = len(rungs)
    noun = "strike pairs" if len(strike_keys) > 1 else "strikes"
    if len({tuple(r.get(key) for key in strike_keys) for r in rungs}) == k:
        return f"across {k} {noun}"
    if len({r.get("expiry") for r in rungs}) == k:
        return f"across {k} expiries"
    return f"in {k} rungs"


def what_to_sell(record: dict[str, Any]) -> str:
    """``"2 GOOG160115P00725000"``, or with a ladder ``"7 calls across 2 strikes: 4 × A, 3 × B"``."""
    s = record.get("suggestion") or {}
    sizing = record.get("sizing") or {}
    rungs = sizing.get("rungs") or []
    n = sizing.get("contracts") or (record.get("position") or {}).get("contracts") or 1
    if len(rungs) > 1:
        _, noun = title_of(record)
        return f"{n} {noun.split()[-1]}s {across(rungs, ('strike',))}: " + ", ".join(
            f"{r['contracts']} × {r['contract']}" for r in rungs
        )
    return f"{n} {s.get('contract')}"


def totals(record: dict[str, Any]) -> list[str]:
    """The whole position's figures for the verdict, the section's bold line and the console's
    card, as the sizing table states them: the net premium in all (more than one contract) and a
    put's collateral with its share of the account (``["net premium 137.70 USD in all",
    "collateral 18,071.00 USD, 18.1 % of the account"]``); ``[]`` before sizing."""
    sizing = record.get("sizing") or {}
    parts = []
    if (sizing.get("contracts") or 0) > 1 and sizing.get("net_premium") is not None:
        parts.append(f"net premium {money(sizing['net_premium'])} USD in all")
    if sizing.get("share_of_account") is not None and record.get("right") == "put":
        share = pct(sizing["share_of_account"], 1)
        parts.append(f"collateral {money(sizing.get('collateral'))} USD, {share} of the account")
    return parts


def headline(record: dict[str, Any] | None) -> str | None:
    """The verdict: ``**Cash-secured put: sell N <contract>** ...`` with the strike, the fill, the
    income a contract and its yield over the T-bill, POP (risk-neutral / real-world), the net
    premium in all and the collateral with its share of the account; a ladder leads with the
    whole position (every rung, the totals) before the first rung's contract figures. Or
    ``**No cash-secured put**: <the first reason>``. ``None`` without a record. Every figure is
    the one the plan's section prints (money to cents, the same percentages)."""
    if not record or not record.get("status"):
        return None
    section, noun = title_of(record)
    if record["status"] == "rejected":
        first = (record.get("reasons") or [{}])[0].get("text", "")
        return f"**No {noun}**: rejected by the {record.get('rejected_by')} analyst: {first} (see {section})."
    s = record.get("suggestion") or {}
    ladder = len((record.get("sizing") or {}).get("rungs") or []) > 1
    whole = totals(record)
    line = f"**{section}: sell {what_to_sell(record)}**: "
    if ladder and whole:
        line += "; ".join(whole) + f"; the first rung, {s.get('contract')}: "
    line += (
        f"strike {money(s.get('strike'))}, last trading day "
        f"{s.get('last_trading_day') or s.get('expiry')} ({s.get('dte')} DTE)"
    )
    if s.get("income") is not None:
        line += (
            f", sold at {money(s.get('fill'))}: income {money(s.get('income'))} USD a contract, "
            f"{pct(s.get('excess_yield'))} a year over the T-bill"
        )
        if s.get("pop_rn") is not None:
            line += f"; POP {pct(s.get('pop_rn'), 1)} (risk-neutral) / {pct(s.get('pop_rw'), 1)} (real-world)"
    elif s.get("net_premium") is not None and s.get("net_weekly_roc") is not None:  # an older record
        line += (
            f", {money(s['net_premium'])} USD a contract after fees at {money(s.get('fill'))} "
            f"({pct(s['net_weekly_roc'])} a week on the collateral)"
        )
    if whole and not ladder:
        line += "; " + "; ".join(whole)
    research = record.get("research") or {}
    if research.get("recommendation") == "not_evaluated":
        line += "; earnings not evaluated"
    events = record.get("events") or {}
    if any(c.get("likely") for c in events.get("early_assignment") or []):
        line += "; early assignment likely before an ex-dividend date"
    elif events.get("dividend") == "not_evaluated" or (record.get("right") == "call" and not events):
        line += "; ex-dividend dates not evaluated"
    return line + f" (see {section})."


def _stored_table(s: dict[str, Any]) -> list[str]:
    """The table of a contract stored before income and real-world probabilities existed: the
    fields it has (its premium and ROC were on the mid, its POP risk-neutral)."""
    rows = [
        ("bid / ask / mid", f"{money(s.get('bid'))} / {money(s.get('ask'))} / {money(s.get('mid'))}"),
        ("delta (BSM at the IV) / IV", f"{fmt(s.get('delta'))} / {pct(s.get('iv'), 1)}"),
        ("IV/HV (at the money)", f"{fmt(s.get('iv_hv_ratio'))} (HV {pct(s.get('hv'), 1)})"),
        ("probability of profit (at the mid)", pct(s.get("pop"), 1)),
        ("breakeven / premium / collateral", f"{money(s.get('breakeven'))} / {money(s.get('premium'))} / "
         f"{money(s.get('collateral'))} USD"),
        ("ROC weekly / annualised (on the whole premium)", f"{pct(s.get('weekly_roc'))} / "
         f"{pct(s.get('annualized_roc'), 1)}"),
    ]  # fmt: skip
    if s.get("fill") is not None:
        rows.append(("fill / net premium", f"{money(s.get('fill'))} / {money(s.get('net_premium'))} USD"))
    return ["| field | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows), ""]


def _contract_table(s: dict[str, Any], record: dict[str, Any]) -> list[str]:
    if s.get("income") is None:  # a record stored before the option plan's economics
        return _stored_table(s)
    right = record.get("right") or "put"
    opts = record.get("options") or {}
    rows = [
        ("bid / ask / mid (spread)", f"{money(s.get('bid'))} / {money(s.get('ask'))} / {money(s.get('mid'))} "
         f"({money(s.get('spread'))}, {pct(s.get('spread_pct'), 1)})"),
        ("volume, open interest", f"{fmt(s.get('volume'))}, {fmt(s.get('open_interest'))}"),
        ("sold at (fill) / intrinsic / time value", f"{money(s.get('fill'))} / {money(s.get('intrinsic'))} / "
         f"{money(s.get('extrinsic'))}"),
        ("net premium / income (time value less fees)", f"{money(s.get('net_premium'))} / "
        f"{money(s.get('income'))} USD"),
        ("capital", f"{money(s.get('capital'))} USD "
        f"({'strike × 100, in T-bills meanwhile' if right == 'put' else 'the shares at the spot'})"),
        ("income yield a year / T-bill / total", f"{pct(s.get('excess_yield'))} / "
        f"{pct(s.get('tbill_yield'))} / "
         f"{pct(s.get('total_yield'))}"),
        ("breakeven at expiry", money(s.get("breakeven"))),
        ("POP (risk-neutral / real-world)", _pair(s.get("pop_rn"), s.get("pop_rw"))),
        ("P(assigned)" if right == "put" else "P(called)",
         _pair(s.get("p_assigned_rn"), s.get("p_assigned_rw"))),
        ("P(touch the strike before expiry)", _pair(s.get("p_touch_rn"), s.get("p_touch_rw"))),
        ("±1σ move to expiry, real-world / IV vs strike distance",
         f"±{money(s.get('expected_move'))} / ±{money(s.get('expected_move_iv'))} vs "
         f"{money(s.get('strike_distance'))} "
         f"({fmt(s.get('distance_sigma'))}σ)"),
        ("income per unit of the ±1σ move", fmt(s.get("premium_per_move"))),
        ("IV (from the mid) / delta / theta a day (per contract)",
         f"{pct(s.get('iv'), 1)} / {fmt(s.get('delta'))} / {money(_neg(s.get('theta_per_contract')))} USD "
         "earned"),
        ("at-the-money IV against the forecast σ / HV", f"{fmt(opts.get('iv_forecast_ratio'))} / "
         f"{fmt(s.get('iv_hv_ratio'))} (σ {pct(opts.get('sigma_forecast'), 1)}, HV "
         f"{pct(s.get('hv'), 1)})"),
    ]  # fmt: skip
    if s.get("source_iv") is not None:
        rows.append(
            (
                "chain's own IV / delta (difference)",
                f"{pct(s.get('source_iv'), 1)} / {fmt(s.get('source_delta'))} "
                f"({pct(s.get('iv_diff'), 1)} / {fmt(s.get('delta_diff'))})",
            )
        )
    position = record.get("position") or {}
    called = s.get("if_called")
    if right == "call" and called:
        rows.append(
            (
                "if called: gain on the cost basis / from today (per contract)",
                f"{money(called['gain'])} USD, {pct(called['return_on_basis'])} on "
                f"{money(position.get('cost_basis'))} "
                f"a share ({pct(called['annualized'], 1)} a year) / {money(called.get('from_today'))} USD",
            )
        )
    return ["| field | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows), ""]


def _sizing_lines(record: dict[str, Any]) -> list[str]:
    sizing = record.get("sizing") or {}
    if not sizing.get("rungs"):
        return []
    one = sizing.get("per_contract") or {}
    pick_strike = float((record.get("suggestion") or {}).get("strike") or 0.0)
    lines = [
        "Size and risk:",
        "",
        f"| | per contract ({one.get('contract')}) | in all |",
        "|---|---|---|",
        f"| contracts | 1 | {fmt(sizing.get('contracts'))} |",
        f"| net premium | {money((record.get('suggestion') or {}).get('net_premium'))} | "
        f"{money(sizing.get('net_premium'))} |",
        *(
            [f"| collateral | {money(pick_strike * 100)} | {money(sizing.get('collateral'))} |"]
            if record.get("right") != "call"
            else []
        ),
        f"| max loss | {money(one.get('max_loss'))} | {money(sizing.get('max_loss'))} |",
        f"| P&L on a −2σ move (to {money(one.get('price_down_2sigma'))}) | "
        f"{money(one.get('pnl_down_2sigma'))} | "
        f"{money(sizing.get('pnl_down_2sigma'))} |",
        f"| P&L on a −20 % gap (to {money(one.get('price_gap'))}) | {money(one.get('pnl_gap'))} | "
        f"{money(sizing.get('pnl_gap'))} |",
        f"| return on risk | {pct(one.get('return_on_risk'))} | |",
        "",
    ]
    if len(sizing["rungs"]) > 1:
        lines += [
            "Ladder:",
            "",
            "| contract | expiry | strike | contracts | collateral | net premium | P&L −20 % gap |",
            "|---|---|---|---|---|---|---|",
            *(
                f"| {r['contract']} | {r['expiry']} | {money(r['strike'])} | {r['contracts']} | "
                f"{money(r['collateral'])} | {money(r['net_premium'])} | {money(r['pnl_gap'])} |"
                for r in sizing["rungs"]
            ),
            "",
        ]
    limits = sizing.get("limits") or {}
    lines += [
        f"Sized against {sizing.get('account_source')}: per-name cap {pct(limits.get('name_cap_pct'), 0)} "
        f"({money(limits.get('name_cap_usd'))} USD), gap-loss cap {pct(limits.get('gap_cap_pct'), 0)} "
        f"({money(limits.get('gap_cap_usd'))} USD)"
        + (f"; bound by {sizing['binding']}" if sizing.get("binding") else "")
        + ".",
        "",
    ]
    return lines


def _context_lines(record: dict[str, Any]) -> list[str]:
    ctx = record.get("context") or {}
    cone = ctx.get("hv_cone") or {}
    lines: list[str] = []
    if cone:
        lines += [
            "HV cone (two years of adjusted closes):",
            "",
            "| window | HV now | min | 25 % | median | 75 % | max |",
            "|---|---|---|---|---|---|---|",
            *(
                f"| {w} sessions | {pct(c['hv'], 1)} | {pct(c['min'], 1)} | {pct(c['q25'], 1)} | "
                f"{pct(c['median'], 1)} | {pct(c['q75'], 1)} | {pct(c['max'], 1)} |"
                for w, c in cone.items()
                if c
            ),
            "",
        ]
    return lines


def contract_rows(rows: list[dict[str, Any]]) -> list[str]:
    """The alternatives' table (one row per contract)."""
    if rows and all(r.get("income") is not None for r in rows):
        lines = [
            "| contract | last trading day | strike | DTE | bid / ask | OI | delta | fill | income | yield "
            "over T-bill "
            "| POP rn / rw | per ±1σ |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            lines.append(
                f"| {r['contract']} | {r.get('last_trading_day') or r['expiry']} | {money(r['strike'])} | "
                f"{r['dte']} | "
                f"{money(r['bid'])} / {money(r['ask'])} | {fmt(r.get('open_interest'))} | "
                f"{fmt(r.get('delta'))} | "
                f"{money(r.get('fill'))} | {money(r.get('income'))} | {pct(r.get('excess_yield'), 1)} | "
                f"{_pair(r.get('pop_rn'), r.get('pop_rw'))} | {fmt(r.get('premium_per_move'))} |"
            )
        return lines
    lines = [  # an older record: its own columns
        "| contract | expiry | strike | DTE | bid / ask / mid | delta | IV | POP | weekly ROC |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['contract']} | {r['expiry']} | {money(r['strike'])} | {r['dte']} | "
            f"{money(r.get('bid'))} / "
            f"{money(r.get('ask'))} / {money(r.get('mid'))} | {fmt(r.get('delta'))} | "
            f"{pct(r.get('iv'), 1)} | "
            f"{pct(r.get('pop'), 1)} | {pct(r.get('net_weekly_roc', r.get('weekly_roc')))} |"
        )
    return lines


def authors(record: dict[str, Any]) -> list[str]:
    """Which author decided each analyst's step (``decided_by`` of an LLM-session run) and, for
    every step whose model was asked, why it was not followed and the statements grounding dropped."""
    decided = record.get("decided_by")
    if not decided:
        return []
    records = {step: (record.get(step) or {}).get("llm") or {} for step in decided}
    parts = [
        f"{step}: {who}"
        + (f" ({records[step].get('model')})" if who == "llm" and records[step].get("model") else "")
        for step, who in decided.items()
    ]
    lines = [f"- Decided by: {', '.join(parts)}."]
    for step, llm in records.items():
        if llm.get("error") and llm.get("source") != "skipped":
            lines.append(f"- {step.capitalize()} analyst LLM not followed: {llm['error']}")
        dropped = (llm.get("grounding") or {}).get("dropped") or []
        if dropped:
            lines.append(
                f"- Dropped from the {step} analyst (numbers matching no cited tool output): "
                + "; ".join(f"{d['text']!r} ({', '.join(d['numbers'])})" for d in dropped)
            )
    return [*lines, ""]


def sell_line(record: dict[str, Any], right: str) -> str:
    """The section's bold line, the whole position as the headline states it: every rung and the
    totals (:func:`totals`) before the first rung's contract figures for a ladder, ``"**Sell 2
    puts across 2 strikes: 1 × A, 1 × B**: net premium 137.70 USD in all; collateral 18,071.00
    USD, 18.1 % of the account; the first rung, A: put, strike 90.71, expiry ..."``; one contract
    (or several of one) its strike and expiry, then the totals."""
    s = record.get("suggestion") or {}
    whole = totals(record)
    ladder = len((record.get("sizing") or {}).get("rungs") or []) > 1
    contract = (
        f"{right}, strike {money(s.get('strike'))}, expiry {s.get('expiry')} (last trading day "
        f"{s.get('last_trading_day') or s.get('expiry')}, {s.get('dte')} DTE)"
    )
    line = f"**Sell {what_to_sell(record)}**: "
    if ladder and whole:
        return line + "; ".join(whole) + f"; the first rung, {s.get('contract')}: {contract}"
    return line + contract + "".join(f"; {t}" for t in whole)


def section(record: dict[str, Any] | None) -> list[str]:
    """The plan's section of a record (``None``: none): the position (calls), the contract to sell
    with its fill, income, yields, probabilities and moves, size and risk with the ladder, the
    desk's context, up to 3 alternatives; or who rejected and why; every reason with its
    citations."""
    if not record:
        return []
    heading, noun = title_of(record)
    right = "call" if noun == "covered call" else "put"
    lines = [f"## {heading}", ""]
    options = record.get("options") or {}
    lines += authors(record)
    pos = record.get("position") or {}
    if pos.get("cost_basis") is not None:
        lines += [
            f"Shares covered: {pos.get('shares')} at cost basis {money(pos['cost_basis'])} "
            f"({pos.get('source')}).",
            "",
        ]
    if options.get("spot") is not None:
        parity = options.get("parity_spot") or {}
        model = options.get("real_world") or {}
        lines += [
            f"Priced at spot {money(options['spot'])} ({options.get('spot_source')}"
            + (f"; put-call parity {money(parity.get('spot'))} on {parity.get('expiry')}" if parity else "")
            + f"), rate {pct(options.get('risk_free_rate'))} ({options.get('risk_free_rate_source')}); "
            f"real-world model: {model.get('source') or model.get('error')}.",
            "",
        ]
    s = record.get("suggestion")
    if record.get("status") == "suggested" and s:
        lines += [
            f"{sell_line(record, right)} {refs(options.get('source_refs'))}",
            "",
            *_contract_table(s, record),
            *_sizing_lines(record),
        ]
        if record.get("alternatives"):
            lines += ["Alternatives:", "", *contract_rows(record["alternatives"]), ""]
        lines += _context_lines(record)
        lines += ["Reasons:", ""]
    else:
        lines += [f"**Rejected by the {record.get('rejected_by')} analyst.**", ""]
        if record.get("rejected_by") == "sizing" and s:
            lines += [
                f"The screen's pick, which does not fit the account: {s['contract']} ({right}, strike "
                f"{money(s['strike'])}, last trading day {s.get('last_trading_day') or s['expiry']}, "
                f"{s['dte']} DTE) "
                f"{refs(options.get('source_refs'))}",
                "",
                *_contract_table(s, record),
            ]
        lines += ["Rejection reasons:", ""]
    lines += [f"- {r['text']} {refs(r.get('source_refs'))}".rstrip() for r in record.get("reasons") or []]
    lines.append("")
    scale = options.get("price_scale") or {}
    if scale.get("factor") not in (None, 1.0):
        lines += [
            f"Units: the chain's underlying is {money(scale.get('chain_underlying'))} and the bars' close "
            f"{money(scale.get('bars_close'))}; {scale.get('note')} (factor {fmt(scale.get('factor'))}).",
            "",
        ]
    misses = options.get("nearest_misses") or []
    if record.get("status") != "suggested" and misses:
        lines += ["Nearest misses (rules failed):", ""]
        lines += [
            f"- {m['contract']} strike {money(m['strike'])}, {m['dte']} DTE, delta {fmt(m.get('delta'))}, "
            f"yield over the T-bill {pct(m.get('excess_yield'), 1)}, spread {money(m.get('spread'))} "
            f"({pct(m.get('spread_pct'), 1)}), volume {fmt(m.get('volume'))}, OI "
            f"{fmt(m.get('open_interest'))}: "
            f"{', '.join(m.get('failed') or [])}"
            for m in misses
        ]
        lines.append("")
    return lines
