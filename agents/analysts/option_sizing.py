"""The option plan's size and risk step (:mod:`agents.analysts.option_plan`): the pick against the
account (:mod:`agents.quant.options.sizing`) and a covered call's return if called away."""

from __future__ import annotations

from functools import partial
from typing import Any

from agents.analysts.option_common import (
    CONTRACT_SHARES,
    OptionPlanInputs,
    Runner,
    _fmt,
    error_reason,
    reason,
)
from core.display import percent

#: Percentages as the report prints them: caps whole, shares of the account to one decimal.
_pct0 = partial(percent, digits=0)
_pct1 = partial(percent, digits=1)


def _sigma_h(row: dict[str, Any], spot: float) -> float | None:
    move = row.get("expected_move")
    return float(move) / spot if move else None


def _account_terms(inputs: OptionPlanInputs, pf: dict[str, Any]) -> tuple[float, float, str, float, int]:
    """The account the plan is sized against from ``get_portfolio``'s ``portfolio`` ``pf``:
    ``(cash, total value (USD), its description for the reasons, market value (USD) and shares
    of inputs.symbol held)``; ``inputs.account_value`` (all in cash) replaces the paper account's
    cash and total. Raises KeyError or ValueError on a malformed portfolio."""
    held = [p for p in pf["positions"] if p["symbol"] == inputs.symbol]
    held_value = sum(float(p["market_value"]) for p in held)
    held_shares = sum(int(p["quantity"]) for p in held)
    if inputs.account_value is not None:
        cash = total = float(inputs.account_value)
        source = f"an account of {_fmt(total)} USD in cash (the request's account_value)"
    else:
        cash, total = float(pf["cash"]), float(pf["total_value"])
        source = f"the paper account ({_fmt(cash)} USD cash, {_fmt(total)} USD in all)"
    return cash, total, source, held_value, held_shares


def _no_fit_text(
    inputs: OptionPlanInputs,
    sized: dict[str, Any],
    pick: dict[str, Any],
    *,
    source: str,
    held_value: float,
    total: float,
) -> str:
    """Why no contract of ``pick`` (the first candidate with its ``risk``) fits, by the limit
    ``sized`` (:func:`agents.quant.options.sizing.ladder`) found binding: the loss on a 20 % gap
    over its cap, collateral over the cash, or collateral over the per-name cap (with
    ``held_value`` USD already held, and the account size it would fit; ``total``: the account's
    value in USD, ``source`` its description)."""
    one = pick["risk"]
    coll = float(pick["strike"]) * CONTRACT_SHARES
    limits = sized["limits"]
    if sized["binding"] == "gap":
        return (
            f"no contract fits: one {pick['contract']} loses {_fmt(-float(one['pnl_gap']))} USD if "
            f"{inputs.symbol} gaps 20 % down, over the {_pct0(limits['gap_cap_pct'])} cap on such a loss "
            f"({_fmt(float(limits['gap_cap_usd']))} USD of {source})"
        )
    if sized["binding"] == "cash":
        return (
            f"no contract fits: one {pick['contract']} secures {_fmt(coll)} USD, more than the cash of "
            f"{source}"
        )
    needed = (coll + held_value) / inputs.max_name_pct
    return (
        f"no contract fits: one {pick['contract']} secures {_fmt(coll)} USD, {_pct1(coll / total)} of "
        f"{source}, "
        f"over the {_pct0(inputs.max_name_pct)} per-name cap ({_fmt(float(limits['name_cap_usd']))} USD"
        + (f", {_fmt(held_value)} USD of it held in {inputs.symbol} already" if held_value else "")
        + f"); it fits an account of {_fmt(needed)} USD or more, and a put spread (--type "
        "put_spread) "
        "risks only its width"
    )


def _sized_text(
    inputs: OptionPlanInputs,
    sized: dict[str, Any],
    one: dict[str, Any],
    *,
    source: str,
    position: dict[str, Any],
    spot: float,
    total: float,
) -> str:
    """The reason for ``sized["contracts"]`` > 0 contracts over its rungs: for a put the
    collateral and its share of the account against the per-name cap, net premium, max loss,
    P&L on a −2σ move and a −20 % gap (USD) and the return on risk of ``one`` (the pick's risk per
    contract); for a call the shares covered of ``position`` (worth shares × ``spot`` USD, their
    share of ``total`` against the cap), net premium and the P&L of shares and calls."""
    n = sized["contracts"]
    rungs = sized["rungs"]
    ladder_text = (
        " in one rung"
        if len(rungs) == 1
        else " over a ladder of " + ", ".join(f"{r['contracts']} × {r['contract']}" for r in rungs)
    )
    down = sized.get("pnl_down_2sigma")
    if inputs.right == "put":
        return (
            f"size {n} contract{'s' if n != 1 else ''}{ladder_text}: collateral "
            f"{_fmt(sized['collateral'])} USD "
            f"({_pct1(sized['share_of_account'])} of {source} with what is held in {inputs.symbol}; cap "
            f"{_pct0(inputs.max_name_pct)}), net premium {_fmt(sized['net_premium'])} USD; max loss "
            f"{_fmt(sized['max_loss'])} USD (the stock at 0), P&L on a −2σ move "
            + (f"{_fmt(down)} USD" if down is not None else "not evaluated (no real-world σ)")
            + f", on a −20 % gap {_fmt(sized['pnl_gap'])} USD (cap {_pct0(inputs.max_gap_loss_pct)} of the "
            "account); "
            f"return on risk {percent(one['return_on_risk'])} a contract"
        )
    shares_value = float(position.get("shares") or 0) * spot
    return (
        f"{n} call{'s' if n != 1 else ''}{ladder_text} cover {n * CONTRACT_SHARES} of the "
        f"{position.get('shares')} shares (worth {_fmt(shares_value)} USD, {_pct1(shares_value / total)} of "
        f"{source}; per-name cap {_pct0(inputs.max_name_pct)}"
        + (
            ": the shares are over it, and the calls' premium does not change that"
            if shares_value > inputs.max_name_pct * total
            else ""
        )
        + f"); net premium {_fmt(sized['net_premium'])} USD; P&L of shares and calls on a −2σ move "
        + (f"{_fmt(down)} USD" if down is not None else "not evaluated")
        + f", on a −20 % gap {_fmt(sized['pnl_gap'])} USD"
    )


def size_plan(
    *, inputs: OptionPlanInputs, record: dict[str, Any], candidates: list[dict[str, Any]], calls: Runner
) -> dict[str, Any]:
    """Size and risk of the pick against the account (:mod:`agents.quant.options.sizing`; the
    paper portfolio from ``get_portfolio``, or ``inputs.account_value`` all in cash): the
    contracts and their ladder over ``candidates`` (the pick first), the risk per contract and in
    all, and the reasons; ``contracts`` 0 means it does not fit (one sentence says why). A failed
    ``get_portfolio`` gives ``{contracts: None, reasons}``; nothing is raised for it."""
    from agents.quant.options.sizing import Account, Kind, ladder, risk_of

    spot = float((record.get("options") or {}).get("spot") or candidates[0]["strike"])
    kind: Kind = "short_put" if inputs.right == "put" else "covered_call"
    env = calls("get_portfolio", {})
    if not env.ok or env.data is None:
        return {"contracts": None, "reasons": [error_reason(env, "paper portfolio")]}
    cash, total, source, held_value, held_shares = _account_terms(inputs, env.data["portfolio"])
    rows = []
    for row in candidates:
        rows.append(
            {
                **row,
                "risk": risk_of(
                    kind=kind, spot=spot, strike=float(row["strike"]), net=float(row["net_premium"]),
                    sigma_h=_sigma_h(row, spot),
                ),
            }
        )  # fmt: skip
    position = record.get("position") or {}
    if inputs.right == "call":
        # the shares are held already (given or in the portfolio): their value against the cap
        held_value = max(held_value, float(position.get("shares") or 0) * spot)
    account = Account(
        cash=cash,
        total_value=total,
        held_value=held_value if inputs.right == "put" else 0.0,
        held_shares=held_shares,
        max_name_pct=inputs.max_name_pct,
        max_gap_loss_pct=inputs.max_gap_loss_pct,
    )
    wanted = int(position.get("contracts") or 0) if inputs.right == "call" else None
    sized = ladder(kind=kind, ranked=rows, account=account, spot=spot, contracts_wanted=wanted)
    sized["account_source"] = source
    sized["per_contract"] = {"contract": rows[0]["contract"], **rows[0]["risk"]}
    pick = rows[0]
    refs = [env.tool_call_id, *((record.get("options") or {}).get("source_refs") or [])]
    if sized["contracts"] == 0:
        text = _no_fit_text(inputs, sized, pick, source=source, held_value=held_value, total=total)
    else:
        text = _sized_text(
            inputs, sized, pick["risk"], source=source, position=position, spot=spot, total=total
        )
    sized["reasons"] = [reason(text, refs)]
    return sized


def if_called(*, suggestion: dict[str, Any], cost_basis: float) -> dict[str, Any]:
    """A covered call's return if the shares are called away at expiry, on the cost basis:
    ``{gain (USD a contract: (strike − basis) × 100 + net premium), return_on_basis (fraction),
    annualized (× 365 / DTE), from_today (USD a contract: (strike − spot) × 100 + net premium)}``."""
    strike, net = float(suggestion["strike"]), float(suggestion.get("net_premium") or 0.0)
    gain = (strike - cost_basis) * CONTRACT_SHARES + net
    ret = gain / (cost_basis * CONTRACT_SHARES)
    spot = float(suggestion["capital"]) / CONTRACT_SHARES if suggestion.get("capital") else None
    return {
        "gain": round(gain, 2),
        "return_on_basis": round(ret, 6),
        "annualized": round(ret * 365.0 / max(int(suggestion["dte"]), 1), 6),
        "from_today": round((strike - spot) * CONTRACT_SHARES + net, 2) if spot else None,
    }
