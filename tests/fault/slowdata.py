"""A market-data plug-in for the fault tests: the embedded provider, slowed down.

    FINAGENT_DATA_PROVIDER=tests.fault.slowdata:SlowEmbeddedProvider
    FINAGENT_CHAOS_BARS_DELAY=0.3      # seconds added to every ``bars`` call

On this machine a whole analysis costs ~0.1 s of CPU (docs/benchmarks.md: 12-19 analyses/s on
2 cores), so a batch of 25 would be over before a fault could land in the middle of a stage.
The delay stands in for a remote data source's latency (the yfinance and Alpaca providers spend
most of a stage waiting on the network); it keeps a prefork child inside a stage long enough
to be killed there, without changing any product code (the ``module:attribute`` plug-in path
of ``agents.data.routing``).
"""

from __future__ import annotations

import os
import time
from datetime import date

import pandas as pd

from agents.data.market.embedded import EmbeddedProvider

DELAY_ENV = "FINAGENT_CHAOS_BARS_DELAY"


class SlowEmbeddedProvider(EmbeddedProvider):
    """:class:`EmbeddedProvider` whose ``bars`` first sleeps ``$FINAGENT_CHAOS_BARS_DELAY`` s
    (default 0: no delay). Same data, same names and source references."""

    def bars(self, *, symbol: str, start: date | None, end: date) -> pd.DataFrame:
        """The embedded bars of ``symbol`` in ``[start, end]``, after the configured delay."""
        delay = float(os.environ.get(DELAY_ENV, "0") or 0)
        if delay > 0:
            time.sleep(delay)
        return super().bars(symbol=symbol, start=start, end=end)
