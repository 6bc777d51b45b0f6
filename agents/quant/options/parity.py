"""The underlying's price implied by the chain's own quotes (put-call parity), for when the
quoted underlying is stale or disagrees with the options.

European put-call parity with a continuous dividend yield (Hull, "Properties of stock options"):
``C − P = S·e^(−qT) − K·e^(−rT)``, so each strike with a two-sided call and put gives
``S = (C − P + K·e^(−rT))·e^(qT)`` from the mids. The estimate is the median over the
:data:`NEAR_STRIKES` strikes where the call and put mids are closest (near the money, where both
are liquid and the early-exercise premium of American options is smallest), on the nearest
expiry with DTE ≥ 1 that has at least :data:`MIN_PAIRS` such strikes (the same-day expiry is
skipped: its mids are after-the-close leftovers). On the CBOE SPY chain of 2025-05-16 (preamble
"Last 589.25", an after-hours print) this gives about 593.9 from the 2025-05-19 expiry.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from datetime import date

from agents.data.market_calendar import last_session_on_or_before
from agents.data.options.chains import OptionChain

#: Strikes (closest call/put mids) whose implied spots are pooled by the median.
NEAR_STRIKES = 5
#: Fewest usable strikes an expiry needs to give an estimate.
MIN_PAIRS = 3


class ParityError(ValueError):
    """No expiry has enough two-sided call/put pairs for a parity estimate."""


@dataclass(frozen=True)
class ParitySpot:
    """``spot`` (USD, median of ``per_strike``), the ``expiry``/``dte`` used, ``strikes`` and the
    spot each implies (``per_strike``, USD), at rate ``r`` and dividend yield ``q`` (fractions/year)."""

    spot: float
    expiry: date
    dte: int
    strikes: tuple[float, ...]
    per_strike: tuple[float, ...]
    r: float
    q: float


def parity_spot(chain: OptionChain, *, r: float, q: float) -> ParitySpot:
    """The parity spot of ``chain`` (module docstring). Raises :class:`ParityError`."""
    expiries = sorted({c.expiry for c in chain.contracts if c.dte(chain.quote_date) >= 1})
    for expiry in expiries:
        t = (last_session_on_or_before(expiry) - chain.quote_date).days / 365.0
        # a bid of 0 is no market: its mid is half the ask, not a price
        calls = {
            c.strike: c.mid for c in chain.contracts if c.expiry == expiry and c.right == "call" and c.bid > 0
        }
        puts = {
            c.strike: c.mid for c in chain.contracts if c.expiry == expiry and c.right == "put" and c.bid > 0
        }
        both = sorted(set(calls) & set(puts), key=lambda k: (abs(calls[k] - puts[k]), k))[:NEAR_STRIKES]
        if len(both) < MIN_PAIRS:
            continue
        implied = [(calls[k] - puts[k] + k * math.exp(-r * t)) * math.exp(q * t) for k in both]
        return ParitySpot(
            spot=float(statistics.median(implied)),
            expiry=expiry,
            dte=(last_session_on_or_before(expiry) - chain.quote_date).days,
            strikes=tuple(both),
            per_strike=tuple(implied),
            r=r,
            q=q,
        )
    raise ParityError(
        f"the {chain.quote_date} chain of {chain.symbol} has no expiry with {MIN_PAIRS} strikes quoted "
        "two-sided for both the call and the put"
    )
