"""The probability that the daily close touches a level before a horizon.

Reflection principle: for a driftless Brownian motion, ``P(min_{s≤T} X_s ≤ b) = 2 P(X_T ≤ b)``
for a barrier ``b < 0``. Closes are watched once a day, so they touch less often; Broadie,
Glasserman and Kou (1997, *Mathematical Finance* 7) correct for discrete monitoring by moving the
barrier away by ``β σ √Δt`` with ``β = −ζ(1/2)/√(2π) ≈ 0.5826`` (σ√Δt: one session's σ). Here:

``P(touch b within h sessions) ≈ max(P(X_h ≤ b), min(1, 2 F_h(b − β σ₁)))``

with ``F_h`` the forecast distribution of the ``h``-session log return (its fat tails and any
earnings jump included) and ``σ₁`` the next session's σ; at ``h = 1`` the single close is the only
one watched, so the probability is ``P(X_1 ≤ b)``. Levels above the close mirror it with the
upper tail.
"""

from __future__ import annotations

from typing import Final

import numpy as np

#: −ζ(1/2)/√(2π) (Broadie, Glasserman and Kou 1997).
BGK_BETA: Final = 0.5826


def touch_from_cdf(*, f_end: np.ndarray, f_shifted: np.ndarray, horizons: np.ndarray) -> np.ndarray:
    """The module's approximation from the probability of ending beyond the level (``f_end``)
    and of ending beyond the shifted level (``f_shifted``), arrays ``(n, len(horizons))`` (or
    broadcastable); ``horizons`` in sessions."""
    f_end = np.asarray(f_end, dtype=np.float64)
    refl = np.minimum(1.0, 2.0 * np.asarray(f_shifted, dtype=np.float64))
    out = np.maximum(f_end, refl)
    one = np.asarray(horizons) == 1
    return np.asarray(np.where(one, f_end, out), dtype=np.float64)
