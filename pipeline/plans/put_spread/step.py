"""The put credit spread's step of the analysis stage: sell a put, buy a lower one of the same
expiry; the loss is defined (the width less the credit). docs/options.md, "Put credit spreads".

1. The short put: the option plan's analysts (chart → options → research,
   ``agents.analysts.option_plan``) with the request's floors, the yield floor left to the spread
   (a spread's capital is its width, not the strike).
2. The long put, for each passing short put: the put of the same expiry below it whose |delta|
   is nearest ``long_delta`` (default 0.10), or whose strike is nearest ``width`` below; it must
   pass the liquidity floors of the short put's screen (open interest, volume, spread).
3. The spread: sold at the short put's fill, bought at the long put's ask (or its mid plus a tick,
   never above the ask), less a fee per leg: ``credit`` (USD a contract); ``max_loss`` = width × 100
   − credit; income = the credit's time value (the short put's intrinsic value less the long's is
   given back); ``excess_yield`` = income / max loss × 365 / DTE (the margin held, max loss, earns
   the T-bill meanwhile); ``breakeven`` = short strike − credit / 100; probabilities of ending below
   the long strike (max loss) and above the breakeven (POP), risk-neutral and real-world, the POP
   read between the two strikes' probabilities (log-linear in the price). Ranked as the other
   option plans: excess yield × income per unit of the real-world ±1σ move.
4. Events, context (the option plan's), then size and risk against the account: collateral =
   width × 100, the per-name and gap-loss caps (``agents.quant.options.sizing``).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

from agents.analysts.option_plan import (
    Calls,
    OptionPlanInputs,
    context_view,
    error_reason,
    events_view,
    reason,
    research_view,
    run_option_plan,
)
from agents.analysts.outcome import AnalystOutcome
from agents.llm.session import LLMSession
from agents.quant.options.economics import tick_of
from agents.quant.options.sizing import Account, ladder, risk_of
from agents.tools.catalog import run_tool
from agents.tools.envelope import ToolEnvelope
from agents.tools.registry import ToolContext
from core.display import money, percent, ratio, whole
from core.parts import AnalysisResult
from core.state import FinancialAgentState
from pipeline.plans.put_spread.models import DEFAULT_LONG_DELTA, PutSpreadOptions, PutSpreadResult
from pipeline.records import apply_outcome, note

MULTIPLIER = 100
#: Percentages as the report prints them: caps whole, shares of the account and POP to one decimal.
_pct0 = partial(percent, digits=0)
_pct1 = partial(percent, digits=1)
#: Long puts looked at below a short strike: within this fraction of the spot.
LONG_RANGE = 0.20


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None or not math.isfinite(value) else round(float(value), digits)


def buy_price(*, bid: float, ask: float, fill: str) -> float:
    """USD/share a buy order fills at: the ask, or the mid plus a tick but never above the ask."""
    mid = (bid + ask) / 2.0
    if fill == "bid":
        return ask
    return min(ask, max(mid, round(mid + tick_of(mid), 2)))


def _between(
    p_short: float | None, p_long: float | None, *, k_short: float, k_long: float, level: float
) -> float | None:
    """P(below ``level``) for a level between the strikes, read log-linearly between
    P(below K_long) and P(below K_short)."""
    if p_short is None or p_long is None:
        return None
    if level >= k_short:
        return p_short
    if level <= k_long:
        return p_long
    w = (math.log(k_short) - math.log(level)) / (math.log(k_short) - math.log(k_long))
    return p_short + (p_long - p_short) * w


def spread_of(
    short: dict[str, Any], long: dict[str, Any], *, fill: str, fee: float, spot: float
) -> dict[str, Any]:
    """The spread's numbers (module docstring, point 3). Prices USD/share, money USD a contract."""
    k_s, k_l = float(short["strike"]), float(long["strike"])
    bought = buy_price(bid=float(long["bid"]), ask=float(long["ask"]), fill=fill)
    credit = (float(short["fill"]) - bought) * MULTIPLIER - 2 * fee
    width = k_s - k_l
    max_loss = width * MULTIPLIER - credit
    intrinsic = (max(k_s - spot, 0.0) - max(k_l - spot, 0.0)) * MULTIPLIER
    income = credit - intrinsic
    dte = int(short["dte"])
    excess = income / max_loss * 365.0 / dte if max_loss > 0 else None
    breakeven = k_s - credit / MULTIPLIER
    move = short.get("expected_move")
    ppm = (income / MULTIPLIER) / float(move) if move else None

    def pop(kind: str) -> float | None:
        below = _between(
            short.get(f"p_assigned_{kind}"),
            long.get(f"p_assigned_{kind}"),
            k_short=k_s,
            k_long=k_l,
            level=breakeven,
        )
        return None if below is None else 1.0 - below

    return {
        "short": short["contract"],
        "long": long["contract"],
        "expiry": short["expiry"],
        "last_trading_day": short.get("last_trading_day"),
        "dte": dte,
        "short_strike": k_s,
        "long_strike": k_l,
        "width": _r(width),
        "short_fill": short["fill"],
        "long_fill": _r(bought),
        "credit": _r(credit, 2),
        "income": _r(income, 2),
        "max_loss": _r(max_loss, 2),
        "return_on_risk": _r(credit / max_loss, 6) if max_loss > 0 else None,
        "excess_yield": _r(excess, 6),
        "tbill_yield": short.get("tbill_yield"),
        "breakeven": _r(breakeven),
        "pop_rn": _r(pop("rn")),
        "pop_rw": _r(pop("rw")),
        "p_max_loss_rn": long.get("p_assigned_rn"),
        "p_max_loss_rw": long.get("p_assigned_rw"),
        "p_touch_short_rn": short.get("p_touch_rn"),
        "p_touch_short_rw": short.get("p_touch_rw"),
        "expected_move": move,
        "premium_per_move": _r(ppm),
        "score": _r(excess * ppm, 6) if excess and ppm and excess > 0 and ppm > 0 else 0.0,
    }


def long_failures(long: dict[str, Any], rules: dict[str, Any]) -> list[str]:
    """The liquidity floors of the short put's screen the long put fails."""
    failed = []
    spread = float(long["ask"]) - float(long["bid"])
    if (
        spread
        > max(float(rules.get("max_spread_abs", 0.0)), float(rules["max_spread_pct"]) * float(long["mid"]))
        + 1e-9
    ):
        failed.append("spread")
    if long["volume"] < rules["min_volume"]:
        failed.append("volume")
    if long.get("open_interest") is None or long["open_interest"] < rules["min_open_interest"]:
        failed.append("open_interest")
    return failed


def choose_long(
    short: dict[str, Any], puts: list[dict[str, Any]], opts: PutSpreadOptions, rules: dict[str, Any]
) -> dict[str, Any] | None:
    """The long put for ``short`` among ``puts`` (rows of its expiry with a delta): by ``width``
    (strike nearest short − width) or ``long_delta`` (|delta| nearest it), below the short strike;
    among the puts that pass the liquidity floors (``rules``) when any does, else among all (the
    caller then names the floor it fails)."""
    below = [p for p in puts if float(p["strike"]) < float(short["strike"]) and p.get("delta") is not None]
    if not below:
        return None
    liquid = [p for p in below if not long_failures(p, rules)]
    below = liquid or below
    if opts.width is not None:
        target = float(short["strike"]) - opts.width
        return min(below, key=lambda p: (abs(float(p["strike"]) - target), -float(p["strike"])))
    want = opts.long_delta or DEFAULT_LONG_DELTA
    return min(below, key=lambda p: (abs(abs(float(p["delta"])) - want), -float(p["strike"])))


def _puts_below(
    calls: Calls, symbol: str, short: dict[str, Any], spot: float
) -> tuple[list[dict[str, Any]], str | None]:
    """The measured puts of ``short``'s expiry within :data:`LONG_RANGE` of the spot below it, and
    the ``get_option_greeks`` call id (or why none)."""
    dte = int(short["dte"])
    chain = calls("get_option_chain", {"symbol": symbol, "dte_min": dte, "dte_max": dte, "right": "put"})
    if not chain.ok or chain.data is None:
        return [], None
    data: dict[str, Any] = chain.data
    floor = float(short["strike"]) - LONG_RANGE * spot
    names = [
        c["contract"]
        for c in data["contracts"]
        if c["expiry"] == short["expiry"] and floor <= float(c["strike"]) < float(short["strike"])
    ]
    strikes = {c["contract"]: float(c["strike"]) for c in data["contracts"]}
    names = sorted(names, key=lambda c: -strikes[c])[:50]
    if not names:
        return [], None
    greeks = calls("get_option_greeks", {"contracts": names})
    if not greeks.ok or greeks.data is None:
        return [], None
    return [
        r for r in greeks.data["contracts"] if "error" not in r or r.get("delta") is not None
    ], greeks.tool_call_id


def _pair_spreads(
    calls: Calls,
    inputs: OptionPlanInputs,
    opts: PutSpreadOptions,
    shorts: list[dict[str, Any]],
    *,
    spot: float,
    rules: dict[str, Any],
    fill: str,
    fee: float,
    min_excess: float,
) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """Step 2 and 3 of the module docstring for each short put of ``shorts`` (screen rows; the
    puts of each expiry fetched once through ``calls``; ``spot`` USD, ``rules`` the screen's
    floors, ``fill``/``fee`` as in :func:`spread_of`, ``min_excess`` the yield floor a year).
    Returns ``(spreads passing [{spread, short, long}], the get_option_greeks call ids, why each
    other short put has no spread)``."""
    spreads: list[dict[str, Any]] = []
    refs: list[str] = []
    by_expiry: dict[str, list[dict[str, Any]]] = {}
    missed: list[str] = []
    for short in shorts:
        if short["expiry"] not in by_expiry:
            puts, ref = _puts_below(calls, inputs.symbol, short, spot)
            by_expiry[short["expiry"]] = puts
            if ref:
                refs.append(ref)
        long = choose_long(short, by_expiry[short["expiry"]], opts, rules)
        if long is None:
            missed.append(f"{short['contract']}: no put below it")
            continue
        failed = long_failures(long, rules)
        spread = spread_of(short, long, fill=fill, fee=fee, spot=spot)
        if spread["excess_yield"] is None or (spread["income"] or 0) <= 0:
            failed.append("no_time_value")
        elif spread["excess_yield"] < min_excess:
            failed.append("excess_yield")
        if failed:
            missed.append(
                f"{short['contract']} / {long['contract']} ({money(long['bid'])}/{money(long['ask'])}, OI "
                f"{whole(long.get('open_interest'))}, volume {whole(long['volume'])}; credit "
                f"{money(spread['credit'])}): {', '.join(failed)}"
            )
            continue
        spreads.append({"spread": spread, "short": short, "long": long})
    return spreads, refs, missed


def _no_spread_text(n_shorts: int, missed: list[str], min_excess: float) -> str:
    """Why none of the ``n_shorts`` short puts has a spread: the floors a long put must pass and
    the yield floor ``min_excess`` (a year), then the first four of ``missed``."""
    return (
        (
            "the only short put that passes the screen has no long put below it that passes the liquidity "
            if n_shorts == 1
            else f"none of the {n_shorts} short puts that pass the screen has a long put "
            "below it that "
            "passes the liquidity "
        )
        + f"floors (open interest, volume, spread) with a yield over the T-bill of at least "
        f"{_pct0(min_excess)} "
        "a year; the closest: " + "; ".join(missed[:4])
    )


def _prob(value: float | None) -> str:
    """A probability as a percentage to one decimal (``0.8062`` → ``"80.6 %"``); ``n/a`` without one."""
    return _pct1(value)


def _spread_text(s: dict[str, Any], opts: PutSpreadOptions) -> str:
    """The chosen spread ``s`` (:func:`spread_of`) in one sentence: its legs and fills (USD a
    share), the rule that chose the long put, credit, width, max loss (USD a contract), return on
    risk, yield over the T-bill (a year), breakeven and the probabilities (in %); money to cents
    (``core.display.money``)."""
    rule = (
        f"width {money(opts.width)}"
        if opts.width is not None
        else f"|delta| nearest {ratio(opts.long_delta or DEFAULT_LONG_DELTA)}"
    )
    return (
        f"sell {s['short']} at {money(s['short_fill'])}, buy {s['long']} at {money(s['long_fill'])} (the "
        f"long put by {rule}): credit {money(s['credit'])} USD a contract on a width of "
        f"{money(s['width'])}, max loss {money(s['max_loss'])} USD, return on risk "
        f"{percent(s['return_on_risk'])}, income yield {percent(s['excess_yield'])} a year over the T-bill; "
        f"breakeven {money(s['breakeven'])}; POP {_prob(s['pop_rn'])} risk-neutral / {_prob(s['pop_rw'])} "
        f"real-world, P(max loss) {_prob(s['p_max_loss_rn'])} / {_prob(s['p_max_loss_rw'])}"
    )


def run_spread(
    inputs: OptionPlanInputs, opts: PutSpreadOptions, *, fill: str, fee: float, min_excess: float
) -> AnalystOutcome[dict[str, Any]]:
    """Steps 1-3 of the module docstring: the record with the spread chosen, or rejected (by
    ``spread`` when no short put has one, by ``research`` on the chosen one's expiry). Tool
    failures become reasons; nothing is raised for them."""
    base = run_option_plan(inputs)
    record = dict(base.value)
    record["strategy"] = "put credit spread"
    calls = Calls(inputs.run)
    if record.get("status") != "suggested":
        return AnalystOutcome(value=record, tool_calls=base.tool_calls)
    options = record["options"]
    spot = float(options["spot"])
    rules = options.get("rules") or {}
    shorts = options.get("candidates") or [record["suggestion"]]
    spreads, refs, missed = _pair_spreads(
        calls, inputs, opts, shorts, spot=spot, rules=rules, fill=fill, fee=fee, min_excess=min_excess
    )
    record["options"] = {k: v for k, v in options.items() if k != "candidates"}
    record["options"]["spread_refs"] = refs
    if not spreads:
        record.update(
            status="rejected",
            rejected_by="spread",
            reasons=[
                reason(
                    _no_spread_text(len(shorts), missed, min_excess), [*options.get("source_refs", []), *refs]
                )
            ],
        )
        record.pop("suggestion", None)
        record.pop("alternatives", None)
        return AnalystOutcome(value=record, tool_calls=(*base.tool_calls, *calls.records))
    spreads.sort(key=lambda x: (-(x["spread"]["score"] or 0.0), -(x["spread"]["excess_yield"] or 0.0)))
    best = spreads[0]
    s = best["spread"]
    research = research_view(
        expiry=s["last_trading_day"] or s["expiry"],
        noun="put",
        earnings=inputs.earnings,
        earnings_ref=inputs.earnings_ref,
        as_of=inputs.as_of,
        dropped=(options.get("failed_counts") or {}).get("earnings"),
    )
    record["research"] = research
    text = _spread_text(s, opts)
    record.update(
        suggestion={**best["short"], "iv_hv_ratio": options.get("iv_hv_ratio"), "hv": options.get("hv")},
        long=best["long"],
        spread=s,
        alternatives=[x["spread"] for x in spreads[1:4]],
        candidates=spreads[:10],
    )
    record["reasons"] = [
        *record["chart"]["reasons"],
        reason(text, [*options.get("source_refs", []), *refs]),
        *research["reasons"],
    ]
    if research["recommendation"] == "reject":
        record.update(status="rejected", rejected_by="research", reasons=research["reasons"])
    return AnalystOutcome(value=record, tool_calls=(*base.tool_calls, *calls.records))


def _events_and_context(
    inputs: OptionPlanInputs, record: dict[str, Any], calls: Calls
) -> list[dict[str, Any]]:
    """Store the events (dividend, split; only with ``inputs.check_events``) and the context of
    ``record``'s suggestion in it (the option plan's views, through ``calls``). Returns their
    reasons, events first."""
    extra: list[dict[str, Any]] = []
    if inputs.check_events:
        events = events_view(
            symbol=inputs.symbol,
            suggestion=record["suggestion"],
            right="put",
            as_of=inputs.as_of,
            calls=calls,
        )
        record["events"] = {k: events.get(k) for k in ("dividend", "split", "events")}
        extra += events["reasons"]
    cutoff = (record.get("research") or {}).get("cutoff") or {}
    context = context_view(
        symbol=inputs.symbol,
        suggestion=record["suggestion"],
        earnings_date=cutoff.get("earnings_date"),
        calls=calls,
    )
    record["context"] = {k: v for k, v in context.items() if k != "reasons"}
    extra += context["reasons"]
    return extra


def _spread_account(inputs: OptionPlanInputs, pf: dict[str, Any]) -> tuple[float, float, float, str]:
    """``(cash, total value, market value held in inputs.symbol (USD), the account's
    description)`` from ``get_portfolio``'s ``portfolio`` ``pf``; ``inputs.account_value`` (all in
    cash) replaces the paper account's cash and total. Raises KeyError on a malformed one."""
    held = sum(float(p["market_value"]) for p in pf["positions"] if p["symbol"] == inputs.symbol)
    if inputs.account_value is not None:
        cash = total = float(inputs.account_value)
        source = f"an account of {total:,.2f} USD in cash (the request's account_value)"
    else:
        cash, total = float(pf["cash"]), float(pf["total_value"])
        source = f"the paper account ({cash:,.2f} USD cash, {total:,.2f} USD in all)"
    return cash, total, held, source


def _sizing_rows(candidates: list[dict[str, Any]], spot: float) -> list[dict[str, Any]]:
    """The ladder's rows of the candidate spreads (``{spread, short, long}``, best first): both
    contracts and strikes, the credit as net premium (USD a contract) and the risk of one spread
    (:func:`agents.quant.options.sizing.risk_of`; ``spot`` USD, σ from the expected move)."""
    rows = []
    for c in candidates:
        sp = c["spread"]
        move = sp.get("expected_move")
        rows.append(
            {
                "contract": sp["short"],
                "long_contract": sp["long"],
                "expiry": sp["expiry"],
                "strike": sp["short_strike"],
                "long_strike": sp["long_strike"],
                "net_premium": sp["credit"],
                "risk": risk_of(
                    kind="put_spread",
                    spot=spot,
                    strike=sp["short_strike"],
                    net=sp["credit"],
                    sigma_h=float(move) / spot if move else None,
                    long_strike=sp["long_strike"],
                ),
            }
        )
    return rows


def _no_fit_why(
    inputs: OptionPlanInputs, sized: dict[str, Any], s: dict[str, Any], one: dict[str, Any], source: str
) -> str:
    """Why not one spread ``s`` fits (``sized``: the ladder with 0 contracts; ``one``: the risk of
    one spread): its loss on a 20 % gap over the cap, or its margin (width × 100 USD) over the
    per-name cap or the cash of the account ``source`` describes."""
    limits = sized["limits"]
    if sized["binding"] == "gap":
        return (
            f"it loses {-float(one['pnl_gap']):,.2f} USD if {inputs.symbol} gaps 20 % down, over the "
            f"{_pct0(limits['gap_cap_pct'])} cap on such a loss ({float(limits['gap_cap_usd']):,.2f} "
            f"USD of {source})"
        )
    return (
        f"its {s['width'] * MULTIPLIER:,.2f} USD of margin is over the {_pct0(inputs.max_name_pct)} "
        f"per-name cap or the cash of {source}"
    )


def _sized_text(inputs: OptionPlanInputs, sized: dict[str, Any], one: dict[str, Any], source: str) -> str:
    """The sizing in one sentence (``sized``: the ladder, over 0 contracts; ``one``: the risk of
    one spread): spreads and rungs, margin and its share of the account against the per-name cap,
    credit, max loss, P&L on a −2σ move and a −20 % gap (USD) and the return on risk."""
    n = sized["contracts"]
    rungs = sized["rungs"]
    ladder_text = (
        " in one rung"
        if len(rungs) == 1
        else " over a ladder of "
        + ", ".join(f"{r['contracts']} × {r['contract']} / {r['long_contract']}" for r in rungs)
    )
    down = sized.get("pnl_down_2sigma")
    return (
        f"size {n} spread{'s' if n != 1 else ''}{ladder_text}: margin {sized['collateral']:,.2f} USD "
        f"({_pct1(sized['share_of_account'])} of {source}; cap {_pct0(inputs.max_name_pct)}), credit "
        f"{sized['net_premium']:,.2f} "
        f"USD; max loss {sized['max_loss']:,.2f} USD, P&L on a −2σ move "
        + (f"{down:,.2f} USD" if down is not None else "not evaluated")
        + f", on a −20 % gap {sized['pnl_gap']:,.2f} USD (cap {_pct0(inputs.max_gap_loss_pct)} of the "
        "account); "
        f"return on risk {percent(one['return_on_risk'])} a spread"
    )


def finish_spread(inputs: OptionPlanInputs, record: dict[str, Any]) -> AnalystOutcome[dict[str, Any]]:
    """Step 4 of the module docstring on a suggested record; no spread fitting → ``sizing``
    (and a failed ``get_portfolio``: a cited rejection, nothing raised)."""
    calls = Calls(inputs.run)
    candidates = record.pop("candidates", None) or []
    if record.get("status") != "suggested":
        return AnalystOutcome(value=record, tool_calls=())
    s = record["spread"]
    extra = _events_and_context(inputs, record, calls)
    spot = float(record["options"]["spot"])
    env = calls("get_portfolio", {})
    if not env.ok or env.data is None:
        record.update(status="rejected", rejected_by="sizing", reasons=[error_reason(env, "paper portfolio")])
        return AnalystOutcome(value=record, tool_calls=tuple(calls.records))
    cash, total, held, source = _spread_account(inputs, env.data["portfolio"])
    rows = _sizing_rows(candidates, spot)
    account = Account(
        cash=cash,
        total_value=total,
        held_value=held,
        held_shares=0,
        max_name_pct=inputs.max_name_pct,
        max_gap_loss_pct=inputs.max_gap_loss_pct,
    )
    sized = ladder(kind="put_spread", ranked=rows, account=account, spot=spot)
    sized["account_source"] = source
    sized["per_contract"] = {"contract": rows[0]["contract"], **rows[0]["risk"]}
    record["sizing"] = sized
    refs = [env.tool_call_id, *record["options"].get("source_refs", [])]
    one = rows[0]["risk"]
    if sized["contracts"] == 0:
        why = _no_fit_why(inputs, sized, s, one, source)
        record.update(
            status="rejected",
            rejected_by="sizing",
            reasons=[reason(f"no spread fits: one {s['short']} / {s['long']} spread: {why}", refs)],
        )
        return AnalystOutcome(value=record, tool_calls=tuple(calls.records))
    record["reasons"] = [*record["reasons"], reason(_sized_text(inputs, sized, one, source), refs), *extra]
    return AnalystOutcome(value=record, tool_calls=tuple(calls.records))


def put_spread_plan(state: FinancialAgentState, ctx: ToolContext, llm: LLMSession | None) -> None:
    """Run the plan (deterministic; a model configured changes nothing yet) and store its record
    (a :class:`PutSpreadResult`) in ``state.plan_result``; a tool failure is a cited rejection."""
    if state.analysis is None:
        state.analysis = AnalysisResult()
    analysis, stock = state.analysis, state.stock_data
    opts = PutSpreadOptions.model_validate(state.plan_options or {})
    o = ctx.settings.options

    def run(name: str, arguments: dict[str, Any]) -> ToolEnvelope:
        return run_tool(name=name, arguments=arguments, ctx=ctx)

    assert state.as_of is not None
    min_excess = opts.min_excess_yield if opts.min_excess_yield is not None else o.min_excess_yield
    inputs = OptionPlanInputs(
        symbol=state.stock_symbol,
        as_of=state.as_of,
        right="put",
        technical=analysis.technical,
        technical_ref=analysis.technical_ref,
        chart=analysis.chart.model_dump() if analysis.chart is not None else None,
        earnings=stock.earnings if stock is not None else None,
        earnings_ref=stock.earnings_ref if stock is not None else None,
        run=run,
        hv_period=o.hv_period,
        min_iv_forecast=o.min_iv_hv,
        screen={**opts.screen(), "min_excess_yield": 0.0},  # the yield floor is the spread's
        account_value=opts.account_value,
        max_name_pct=opts.max_name_pct or o.max_collateral_pct,
        max_gap_loss_pct=opts.max_gap_loss_pct or o.max_gap_loss_pct,
        check_events=o.dividends_dir is not None,
    )
    record = apply_outcome(
        state,
        ctx=ctx,
        outcome=run_spread(inputs, opts, fill=o.fill, fee=o.fee_per_contract, min_excess=min_excess),
    )
    record = apply_outcome(state, ctx=ctx, outcome=finish_spread(inputs, record))
    result = PutSpreadResult.model_validate(record)
    state.plan_result = result.model_dump(mode="json")
    if result.status == "suggested" and result.spread is not None:
        sp = result.spread
        note(
            state,
            stage="analysis",
            content=f"Put spread: sell {sp['short']}, buy {sp['long']} ({sp['credit']} USD credit).",
        )
    else:
        first = result.reasons[0].text if result.reasons else ""
        note(
            state,
            stage="analysis",
            content=f"Put spread rejected by the {result.rejected_by} analyst: {first}",
        )
