"""The fee model of the paper broker.

``fee = min(max(quantity * per_share, minimum), max_fraction * quantity * price)`` USD, rounded
to the cent; zero for a zero-share fill. Defaults (settings ``broker_fee_*``): 0.005 USD per
share, 1 USD minimum, capped at 1 % of the trade value: Interactive Brokers' "fixed" pricing
for US stocks (exchange and regulatory fees left out).
"""

from __future__ import annotations

from dataclasses import dataclass

from core.settings import Settings


@dataclass(frozen=True)
class FeeModel:
    """Per-share commission with a minimum and a cap. USD; ``max_fraction`` is a fraction."""

    per_share: float = 0.005
    minimum: float = 1.0
    max_fraction: float = 0.01

    @classmethod
    def from_settings(cls, settings: Settings) -> FeeModel:
        """The model configured by ``broker.fee_per_share``, ``_minimum`` and ``_max_fraction``."""
        return cls(
            per_share=settings.broker.fee_per_share,
            minimum=settings.broker.fee_minimum,
            max_fraction=settings.broker.fee_max_fraction,
        )

    def fee(self, *, quantity: int, price: float) -> float:
        """USD fee of filling ``quantity`` shares at ``price`` USD (module formula)."""
        if quantity <= 0:
            return 0.0
        raw = max(quantity * self.per_share, self.minimum)
        return round(min(raw, self.max_fraction * quantity * price), 2)
