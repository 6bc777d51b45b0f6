"""Size and risk of a short option position before its yield (docs/design.md, "Option sizing").

Per contract (USD; ``spot`` in the chain's units, the real-world σ to expiry as the log-return
standard deviation of :mod:`agents.quant.options.probabilities`):

* **max loss**: cash-secured put, the stock at 0: strike × 100 − net premium; covered call, the
  shares at 0: spot × 100 − net premium; put spread (short K₁, long K₂ < K₁): (K₁ − K₂) × 100 −
  net credit.
* **P&L on a −2σ move** (the price ``spot × e^(−2σ)`` at expiry) and on a **−20 % gap**
  (``0.8 × spot``): the position's payoff at expiry at that price plus the net premium (negative:
  a loss). A covered call counts the shares' fall from today's price.
* **return on risk**: net premium / max loss.

Sizing against the account (cash, total value, what is held in the name): the contracts ``n`` of
a put (or a spread) are the most that keep
(1) n × collateral ≤ cash, (2) value already held in the name + n × collateral ≤ ``max_name_pct``
× account (the per-name cap; collateral = strike × 100, or a spread's width × 100), and
(3) n × loss on the −20 % gap ≤ ``max_gap_loss_pct`` × account. A covered call covers the shares
held (one call per 100), with no new capital. When more than one contract fits, they are spread
over a **ladder**: one contract per rung in turn, the rungs the best-ranked contract of each
expiry first, then the next-best strikes, up to :data:`MAX_RUNGS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from agents.data.options.chains import CONTRACT_MULTIPLIER

Kind = Literal["short_put", "covered_call", "put_spread"]
#: The gap stress: a fall of 20 % overnight (earnings misses, guidance cuts and market crashes of
#: large caps reach it; 1987-10-19 was −20.5 % for the S&P 500).
GAP = 0.20
#: Rungs of a ladder at most: beyond four the contracts are too thin to manage separately.
MAX_RUNGS = 4


def _r(value: float | None, digits: int = 2) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    out = round(float(value), digits)
    return 0.0 if out == 0 else out


def payoff_at_expiry(
    *, kind: Kind, price: float, spot: float, strike: float, net: float, long_strike: float | None = None
) -> float:
    """P&L at expiry (USD per contract) of the position at the underlying ``price``: ``net`` is
    the net premium (or credit) received, USD per contract; ``spot`` today's price (a covered call
    counts the shares from it); ``long_strike`` the bought put of a spread."""
    m = CONTRACT_MULTIPLIER
    if kind == "short_put":
        return net - max(strike - price, 0.0) * m
    if kind == "covered_call":
        return (price - spot) * m + net - max(price - strike, 0.0) * m
    assert long_strike is not None
    return net - (max(strike - price, 0.0) - max(long_strike - price, 0.0)) * m


def risk_of(
    *,
    kind: Kind,
    spot: float,
    strike: float,
    net: float,
    sigma_h: float | None,
    long_strike: float | None = None,
) -> dict[str, Any]:
    """Risk numbers of one contract (module docstring): ``{max_loss, pnl_down_2sigma,
    price_down_2sigma, pnl_gap, price_gap, return_on_risk}`` (USD per contract; return a
    fraction); the −2σ entries are ``None`` without a real-world σ (``sigma_h``)."""
    m = CONTRACT_MULTIPLIER
    if kind == "short_put":
        max_loss = strike * m - net
    elif kind == "covered_call":
        max_loss = spot * m - net
    else:
        assert long_strike is not None
        max_loss = (strike - long_strike) * m - net
    down = spot * math.exp(-2.0 * sigma_h) if sigma_h is not None else None
    gap = spot * (1.0 - GAP)

    def pnl(price: float) -> float:
        return payoff_at_expiry(
            kind=kind, price=price, spot=spot, strike=strike, net=net, long_strike=long_strike
        )

    return {
        "max_loss": _r(max_loss),
        "price_down_2sigma": _r(down, 4),
        "pnl_down_2sigma": _r(pnl(down)) if down is not None else None,
        "price_gap": _r(gap, 4),
        "pnl_gap": _r(pnl(gap)),
        "return_on_risk": _r(net / max_loss, 6) if max_loss > 0 else None,
    }


@dataclass(frozen=True)
class Account:
    """What the sizing is measured against: ``cash`` and ``total_value`` (USD) of the account,
    ``held_value`` (USD, at market) and ``held_shares`` already in the symbol; the caps as
    fractions of the total value."""

    cash: float
    total_value: float
    held_value: float
    held_shares: int
    max_name_pct: float
    max_gap_loss_pct: float


def collateral_of(*, kind: Kind, strike: float, long_strike: float | None = None) -> float:
    """Cash a contract ties up, USD: a put its strike × 100, a spread its width × 100, a covered
    call none (the shares are held already)."""
    if kind == "short_put":
        return strike * CONTRACT_MULTIPLIER
    if kind == "put_spread":
        assert long_strike is not None
        return (strike - long_strike) * CONTRACT_MULTIPLIER
    return 0.0


def _rung_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Candidates in rung order: the best row of each expiry (in rank order), then the others."""
    seen: set[str] = set()
    first: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    for row in rows:
        (rest if row["expiry"] in seen else first).append(row)
        seen.add(row["expiry"])
    return (first + rest)[:MAX_RUNGS]


def _place(
    *,
    kind: Kind,
    rungs: list[dict[str, Any]],
    account: Account,
    cap_usd: float,
    gap_cap: float,
    contracts_wanted: int | None,
) -> tuple[list[int], int, str | None]:
    """One contract at a time round the ``rungs`` (module docstring) until every rung is stopped
    by a limit (cash, the name cap ``cap_usd``, the gap-loss cap ``gap_cap``; USD) or
    ``contracts_wanted`` are placed. Returns ``(contracts per rung, contracts placed, the first
    limit that stopped one: "cash" | "name_cap" | "gap" | None)``."""
    counts = [0] * len(rungs)
    used_cash = used_gap = 0.0
    binding = None
    placed = 0
    if rungs:
        k = 0
        stalled = 0
        while stalled < len(rungs):
            row = rungs[k % len(rungs)]
            coll = collateral_of(kind=kind, strike=float(row["strike"]), long_strike=row.get("long_strike"))
            gap_loss = max(0.0, -float(row["risk"]["pnl_gap"] or 0.0))
            why = None
            if contracts_wanted is not None and placed >= contracts_wanted:
                break
            if kind != "covered_call":
                if used_cash + coll > account.cash + 1e-9:
                    why = "cash"
                elif account.held_value + used_cash + coll > cap_usd + 1e-9:
                    why = "name_cap"
                elif used_gap + gap_loss > gap_cap + 1e-9:
                    why = "gap"
            if why is None:
                counts[k % len(rungs)] += 1
                used_cash += coll
                used_gap += gap_loss
                placed += 1
                stalled = 0
            else:
                binding = binding or why
                stalled += 1
            k += 1
    return counts, placed, binding


def ladder(
    *,
    kind: Kind,
    ranked: list[dict[str, Any]],
    account: Account,
    spot: float,
    contracts_wanted: int | None = None,
) -> dict[str, Any]:
    """Contracts and rungs (module docstring) over ``ranked`` (passing rows, best first; each with
    ``strike``, ``net_premium`` and, for a spread, ``long_strike``; its risk from :func:`risk_of`
    under ``risk``). A covered call places ``contracts_wanted`` (the shares held / 100).

    Returns ``{contracts, rungs: [{contract, expiry, strike, contracts, collateral, net_premium,
    max_loss, pnl_gap, pnl_down_2sigma}], collateral, net_premium, max_loss, pnl_gap,
    pnl_down_2sigma, limits: {by_cash, by_name_cap, by_gap, name_cap_usd, gap_cap_usd},
    binding}`` (USD; ``binding`` names the limit that stopped the sizing)."""
    cap_usd = account.max_name_pct * account.total_value
    gap_cap = account.max_gap_loss_pct * account.total_value
    rungs = _rung_order(ranked)
    counts, placed, binding = _place(
        kind=kind,
        rungs=rungs,
        account=account,
        cap_usd=cap_usd,
        gap_cap=gap_cap,
        contracts_wanted=contracts_wanted,
    )
    out_rungs = []
    totals = {"collateral": 0.0, "net_premium": 0.0, "max_loss": 0.0, "pnl_gap": 0.0, "pnl_down_2sigma": 0.0}
    have_2sigma = True
    for row, n in zip(rungs, counts, strict=True):
        if n == 0:
            continue
        coll = collateral_of(kind=kind, strike=float(row["strike"]), long_strike=row.get("long_strike"))
        risk = row["risk"]
        rung = {
            "contract": row["contract"],
            "expiry": row["expiry"],
            "strike": row["strike"],
            "contracts": n,
            "collateral": _r(n * coll),
            "net_premium": _r(n * float(row["net_premium"])),
            "max_loss": _r(n * float(risk["max_loss"])),
            "pnl_gap": _r(n * float(risk["pnl_gap"])),
            "pnl_down_2sigma": _r(n * float(risk["pnl_down_2sigma"]))
            if risk.get("pnl_down_2sigma") is not None
            else None,
        }
        if row.get("long_contract"):
            rung["long_contract"] = row["long_contract"]
            rung["long_strike"] = row.get("long_strike")
        out_rungs.append(rung)
        for key in totals:
            if rung[key] is None:
                have_2sigma = False
            else:
                totals[key] += float(rung[key])
    one = rungs[0] if rungs else None
    one_coll = (
        collateral_of(kind=kind, strike=float(one["strike"]), long_strike=one.get("long_strike"))
        if one
        else 0.0
    )
    one_gap = max(0.0, -float(one["risk"]["pnl_gap"] or 0.0)) if one else 0.0
    return {
        "contracts": placed,
        "rungs": out_rungs,
        **{k: _r(v) for k, v in totals.items() if k != "pnl_down_2sigma"},
        "pnl_down_2sigma": _r(totals["pnl_down_2sigma"]) if have_2sigma and out_rungs else None,
        "limits": {
            "cash": _r(account.cash),
            "account_value": _r(account.total_value),
            "held_value": _r(account.held_value),
            "name_cap_pct": account.max_name_pct,
            "name_cap_usd": _r(cap_usd),
            "gap_cap_pct": account.max_gap_loss_pct,
            "gap_cap_usd": _r(gap_cap),
            "by_cash": int(account.cash // one_coll) if one_coll > 0 else None,
            "by_name_cap": int(max(0.0, cap_usd - account.held_value) // one_coll) if one_coll > 0 else None,
            "by_gap": int(gap_cap // one_gap) if one_gap > 0 else None,
        },
        "binding": binding,
        "share_of_account": _r((account.held_value + totals["collateral"]) / account.total_value, 4)
        if account.total_value > 0
        else None,
        "spot": spot,
    }
