"""Fault-injecting market-data providers for tests.

They stand in for a remote market-data API misbehaving (which cannot be reached here): they
serve the real embedded data but time out, or answer empty, on the first research-sized
request. State lives in files under ``FINAGENT_TEST_FAULT_DIR`` so that the fault happens once
across processes (the CLI process, the worker and its children).
Selected with ``FINAGENT_DATA_PROVIDER=tests.support.providers:timeout_once`` (or ``no_data_once``).

``credential_echo`` stands in for a remote API that quotes the credentials it was sent in its
error message: research-sized requests for ``IBM`` always time out with the configured Alpaca
key id and secret in the message (other symbols are served).
"""

from __future__ import annotations

import os
from datetime import date, timedelta
from pathlib import Path

import pandas as pd

from agents.data.market.base import NoDataError, Profile, ProviderTimeoutError
from agents.data.market.embedded import EmbeddedProvider

# Requests spanning more than this are research calls (52-week quote, 2-year history); the
# producer's date validation asks for two weeks and must not consume the fault.
_RESEARCH_SPAN = timedelta(days=60)


class _FaultOnce:
    """Wraps the embedded provider; the first ``failures`` research requests raise ``error``."""

    def __init__(self, *, error: type[Exception], failures: int, tag: str) -> None:
        self._inner = EmbeddedProvider()
        self._error = error
        self._failures = failures
        self._tag = tag
        self.name = f"fault-{tag}"

    def _should_fail(self) -> bool:
        folder = Path(os.environ["FINAGENT_TEST_FAULT_DIR"])
        folder.mkdir(parents=True, exist_ok=True)
        for n in range(self._failures):
            marker = folder / f"{self._tag}-{n}"
            try:
                marker.touch(exist_ok=False)  # atomic create: exactly one caller takes each failure
            except FileExistsError:
                continue
            return True
        return False

    def bars(self, *, symbol: str, start: date | None, end: date) -> pd.DataFrame:
        if (start is None or end - start > _RESEARCH_SPAN) and self._should_fail():
            raise self._error(f"injected {self._tag} for {symbol}")
        return self._inner.bars(symbol=symbol, start=start, end=end)

    def latest_date(self, *, symbol: str) -> date:
        return self._inner.latest_date(symbol=symbol)

    def symbols(self) -> list[str]:
        return self._inner.symbols()

    def profile(self, *, symbol: str) -> Profile:
        return self._inner.profile(symbol=symbol)

    def source_ref(self, *, symbol: str) -> str:
        return self._inner.source_ref(symbol=symbol)


def timeout_once() -> _FaultOnce:
    """First research request times out (``ProviderTimeoutError``), then real data."""
    return _FaultOnce(error=ProviderTimeoutError, failures=1, tag="timeout")


def no_data_once() -> _FaultOnce:
    """The first research request answers empty (``NoDataError``), then real data."""
    return _FaultOnce(error=NoDataError, failures=1, tag="nodata")


#: The symbol whose research requests :func:`credential_echo` refuses.
ECHOED_SYMBOL = "IBM"


class _CredentialEcho(_FaultOnce):
    """The embedded data, except research requests for :data:`ECHOED_SYMBOL`: a timeout whose
    message quotes ``FINAGENT_BROKER_ALPACA_API_KEY`` and ``FINAGENT_BROKER_ALPACA_SECRET_KEY``."""

    def bars(self, *, symbol: str, start: date | None, end: date) -> pd.DataFrame:
        if symbol == ECHOED_SYMBOL and (start is None or end - start > _RESEARCH_SPAN):
            key_id = os.environ.get("FINAGENT_BROKER_ALPACA_API_KEY", "")
            secret = os.environ.get("FINAGENT_BROKER_ALPACA_SECRET_KEY", "")
            raise ProviderTimeoutError(f"upstream timed out; it was sent key id {key_id} and secret {secret}")
        return self._inner.bars(symbol=symbol, start=start, end=end)


def credential_echo() -> _CredentialEcho:
    """Research requests for ``IBM`` time out quoting the Alpaca credentials; the rest is real."""
    return _CredentialEcho(error=ProviderTimeoutError, failures=0, tag="echo")
