"""The risk forecast of one symbol at one date: :func:`forecast_risk` → :class:`RiskForecast`.

Everything the report, the option plans and the paper portfolio need is on the returned object
(frozen, typed, JSON-serialisable with ``model_dump_json()``), and its methods
:meth:`RiskForecast.prob_below` and :meth:`RiskForecast.prob_touch` answer for any price level.
The package docstring (:mod:`agents.quant.risk`) has an example and the conventions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict
from datetime import date
from typing import Any, Final, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from agents.data.fundamentals.earnings import CalendarUnavailableError, EarningsEvent
from agents.quant.risk import constants as C
from agents.quant.risk import distribution as dist
from agents.quant.risk.earnings import company_events
from agents.quant.risk.engine import PathForecasts, RiskSpec, run_path
from agents.quant.risk.inputs import RiskInputError, prepare_bars
from agents.quant.risk.touch import BGK_BETA, touch_from_cdf
from agents.quant.risk.volatility import annualised

#: Central ranges reported, as probabilities (50 %, 80 %, 95 %).
RANGE_LEVELS: Final = (0.50, 0.80, 0.95)
#: How the numbers are signed (also on every forecast, ``RiskForecast.conventions``).
CONVENTIONS: Final = (
    "Returns are simple total returns of the adjusted close from the as_of close, as fractions "
    "(0.05 = +5 %). VaR and ES are losses as positive fractions: var_95 = 0.031 means the return "
    "falls below -3.1 % with probability 5 %; es_975 is the mean loss in the worst 2.5 %. Ranges "
    "are prices in the as_of close's units. Horizons count trading sessions after as_of."
)

Monitoring = Literal["close"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReturnQuantiles(_Frozen):
    """Quantiles of the simple total return over a horizon (fractions): ``q01`` is the 1 %
    quantile, ``q025`` 2.5 %, …, ``q99`` 99 %."""

    q01: float
    q025: float
    q05: float
    q10: float
    q25: float
    q50: float
    q75: float
    q90: float
    q95: float
    q975: float
    q99: float

    def as_tuple(self) -> tuple[float, ...]:
        """The eleven values in the order of :data:`~agents.quant.risk.distribution.QUANTILE_LEVELS`."""
        return tuple(getattr(self, k) for k in dist.QUANTILE_KEYS)


class PriceRange(_Frozen):
    """A central range: with probability ``probability`` the close ``horizon`` sessions ahead lies
    in ``[low, high]`` (USD, the as_of close's units); ``low_return``/``high_return`` the same as
    simple returns."""

    probability: float
    low: float
    high: float
    low_return: float
    high_return: float


class EarningsInWindow(_Frozen):
    """A report expected inside a horizon: its date (US Eastern), time of day, whether the date was
    ``announced`` (public at as_of: within 30 days) or ``projected`` (a year after the same
    quarter), ``session``, the session after as_of that carries its price reaction, and
    ``in_distribution``: whether its earnings jump was added to the forecast (announced reports
    only: adding projected ones widened the 60-session ranges past their nominal coverage,
    :mod:`agents.quant.risk.constants`)."""

    report_date: date
    time_of_day: str
    source: Literal["announced", "projected"]
    session: int
    in_distribution: bool


class DistributionTable(_Frozen):
    """The horizon's log-return distribution ``X = scale · S + J`` (:mod:`agents.quant.risk.distribution`):
    ``shape`` the quantiles of ``S`` on ``PROB_GRID``, ``jumps`` the equally likely earnings jumps
    (``(0.0,)`` without a report in the window)."""

    scale: float
    shape: tuple[float, ...]
    jumps: tuple[float, ...]

    def cdf(self, log_return: float) -> float:
        """``P(X ≤ log_return)``."""
        return float(
            dist.cdf(log_return, scale=self.scale, shape=np.asarray(self.shape), jumps=self.jumps)[0]
        )


class HorizonForecast(_Frozen):
    """The forecast for one horizon (``horizon`` sessions after as_of).

    ``sigma``: standard deviation of the simple total return (fraction; earnings jumps included);
    ``sigma_diffusion``: of the log return without the earnings jump; ``quantiles``;
    ``var_95``/``var_99``: value at risk as positive loss fractions (``−q05``, ``−q01``);
    ``es_975``: expected shortfall at 97.5 % as a positive loss fraction; ``ranges``: the 50, 80
    and 95 % central ranges in prices; ``earnings``: reports whose reaction falls in the window.
    """

    horizon: int
    sigma: float
    sigma_diffusion: float
    quantiles: ReturnQuantiles
    var_95: float
    var_99: float
    es_975: float
    ranges: tuple[PriceRange, ...]
    earnings: tuple[EarningsInWindow, ...]
    distribution: DistributionTable

    @property
    def spans_earnings(self) -> bool:
        """Whether a report (announced or projected) falls in the window."""
        return bool(self.earnings)

    @property
    def earnings_in_distribution(self) -> bool:
        """Whether a report's jump is part of this horizon's distribution."""
        return any(e.in_distribution for e in self.earnings)

    def range(self, probability: float) -> PriceRange:
        """The central range of ``probability`` (0.5, 0.8 or 0.95). Raises ``ValueError`` otherwise."""
        for r in self.ranges:
            if abs(r.probability - probability) < 1e-9:
                return r
        raise ValueError(f"no {probability:g} range; have {[r.probability for r in self.ranges]}")


class ModelProvenance(_Frozen):
    """Which model made the forecast and where its numbers come from.

    ``label``: the model in words; ``volatility``: the variance model actually used (a fallback
    says so and why); ``fitted``: its parameters at the last refit (fractions: ``omega`` in
    fraction², HAR coefficients per horizon); ``fitted_on``: the sessions the fit read
    (``first``..``last``, ISO dates) and how many non-earnings returns; ``residual_pool``: how many
    standardised residuals the quantiles come from; ``constants``: where the chosen constants live
    and how they were chosen; ``version``: a hash of the specification.
    """

    label: str
    volatility: str
    fitted: dict[str, Any]
    fitted_on: dict[str, Any]
    residual_pool: int
    constants: str
    version: str


class EarningsHandling(_Frozen):
    """How earnings entered the forecast: ``calendar_coverage`` (False: no calendar rows for the
    company, so no report could be left out or added), ``jump_source`` (``own (n past reports)``,
    ``pooled (...)`` or no coverage), ``past_reports`` (how many past moves were known),
    ``after_close_habit`` (the company's past reactions mostly came the session after the report
    date; decides the session of an upcoming report at an unknown time)."""

    calendar_coverage: bool
    jump_source: str
    past_reports: int
    after_close_habit: bool | None


class RiskForecast(_Frozen):
    """The risk forecast of ``symbol`` at the close of ``as_of`` (a session).

    ``close``: the as_of close (USD) the price ranges and levels refer to; ``sigma_daily``: the
    next session's σ of the log return (fraction, earnings jump excluded); ``sigma_annual`` the
    same × √252; ``horizons``: one :class:`HorizonForecast` per horizon; ``conventions``: the sign
    conventions in words; ``touch``: how :meth:`prob_touch` is computed.
    """

    symbol: str | None
    as_of: date
    close: float
    sigma_daily: float
    sigma_annual: float
    model: ModelProvenance
    earnings: EarningsHandling
    horizons: tuple[HorizonForecast, ...]
    conventions: str = CONVENTIONS
    touch: str = Field(
        default=(
            "close-to-close monitoring: reflection principle on the forecast distribution with the "
            f"Broadie-Glasserman-Kou discrete-monitoring shift (beta = {BGK_BETA})"
        )
    )

    def horizon(self, horizon: int) -> HorizonForecast:
        """The forecast for ``horizon`` sessions. Raises ``ValueError`` when it was not forecast."""
        for h in self.horizons:
            if h.horizon == horizon:
                return h
        raise ValueError(f"no forecast for {horizon} sessions; have {[h.horizon for h in self.horizons]}")

    def _log_level(self, level: float) -> float:
        if not (isinstance(level, int | float) and np.isfinite(level) and level > 0):
            raise ValueError(f"level must be a positive price, got {level!r}")
        return float(np.log(level / self.close))

    def prob_below(self, level: float, horizon: int) -> float:
        """``P(close after `horizon` sessions ≤ level)`` (level in USD, the as_of close's units).
        Raises ``ValueError`` for a non-positive level or a horizon not forecast."""
        return self.horizon(horizon).distribution.cdf(self._log_level(level))

    def prob_above(self, level: float, horizon: int) -> float:
        """``P(close after `horizon` sessions > level)`` = 1 − :meth:`prob_below`."""
        return 1.0 - self.prob_below(level, horizon)

    def prob_touch(self, level: float, horizon: int, *, monitoring: Monitoring = "close") -> float:
        """Probability that a daily close within the next ``horizon`` sessions reaches ``level``
        (at or below a level under the as_of close, at or above one over it; 1 at the close
        itself), by :mod:`agents.quant.risk.touch`. Intraday lows and highs reach a level more
        often than closes (``docs/evaluation.md``, "Risk", measures by how much).
        Raises ``ValueError`` for a non-positive level or a horizon not forecast."""
        if monitoring != "close":
            raise ValueError("only close-to-close monitoring is modelled")
        return self._odds(self.horizon(horizon), self._log_level(level))[1]

    def level_odds(self, level: float) -> list[tuple[int, float, float]]:
        """``(horizon, P(close ≤ level), P(a daily close reaches level))`` at every horizon, in
        the order of :attr:`horizons`: :meth:`prob_below` and :meth:`prob_touch` of each, the
        same floats. Raises ``ValueError`` for a non-positive level."""
        x = self._log_level(level)
        return [(h.horizon, *self._odds(h, x)) for h in self.horizons]

    def _odds(self, h: HorizonForecast, x: float) -> tuple[float, float]:
        """``(P(X ≤ x), P(touch))`` of horizon ``h`` at the log level ``x``: one evaluation of its
        CDF at ``x`` and at the level shifted by the Broadie-Glasserman-Kou term (away from the
        close), then the reflection principle (:func:`touch_from_cdf`); a touch at the close
        itself (``x == 0``) is certain."""
        t = h.distribution
        shift = BGK_BETA * self.sigma_daily
        points = np.array([x, x - shift if x < 0 else x + shift])
        f = dist.cdf(points, scale=t.scale, shape=np.asarray(t.shape), jumps=t.jumps)
        below, shifted = float(f[0]), float(f[1])
        if x == 0.0:
            return below, 1.0
        f_end, f_shift = (below, shifted) if x < 0 else (1.0 - below, 1.0 - shifted)
        touch = touch_from_cdf(
            f_end=np.array([f_end]), f_shifted=np.array([f_shift]), horizons=np.array([h.horizon])
        )
        return below, float(touch[0])

    def quantile(self, probability: float, horizon: int) -> float:
        """The ``probability`` quantile of the simple total return over ``horizon`` sessions."""
        if not 0.0 < probability < 1.0:
            raise ValueError(f"probability must be in (0, 1), got {probability}")
        t = self.horizon(horizon).distribution
        q = dist.quantile(probability, scale=t.scale, shape=np.asarray(t.shape), jumps=t.jumps)
        return float(np.expm1(q[0]))


def spec_version(spec: RiskSpec) -> str:
    """A short hash of ``spec`` (``risk-`` + 10 hex digits): forecasts of one version are comparable."""
    blob = json.dumps(asdict(spec), sort_keys=True).encode()
    return "risk-" + hashlib.sha256(blob).hexdigest()[:10]


def _events_for(
    symbol: str | None, earnings: Sequence[EarningsEvent] | str | None
) -> tuple[list[EarningsEvent] | None, str | None]:
    """The reports to use and, when the calendar was asked for but could not be read, why."""
    if earnings == "calendar":
        if symbol is None:
            raise RiskInputError("earnings='calendar' needs the symbol")
        try:
            return company_events(symbol), None
        except CalendarUnavailableError as exc:
            return None, f"the earnings calendar could not be read ({exc}): no report left out or added"
    if earnings is None:
        return None, None
    if isinstance(earnings, str):
        raise RiskInputError(f"earnings must be 'calendar', None or a list of reports, got {earnings!r}")
    return sorted(earnings, key=lambda e: e.report_date), None


#: The expected shortfall's level (``HorizonForecast.es_975``).
ES_LEVEL: Final = 0.975
#: Every probability :func:`build_forecast` reads off one horizon's distribution, in one array:
#: the quantile levels, then the bounds of each central range (low, high), then the expected
#: shortfall's midpoints (:func:`agents.quant.risk.distribution.es_probabilities`).
_READ_PROBS: Final = np.concatenate(
    [
        np.asarray(dist.QUANTILE_LEVELS),
        np.array([b for prob in RANGE_LEVELS for b in ((1 - prob) / 2, (1 + prob) / 2)]),
        dist.es_probabilities(ES_LEVEL),
    ]
)


def _read_quantiles(
    scale: float, shape: np.ndarray, jumps: np.ndarray
) -> tuple[np.ndarray, list[tuple[float, float]], float]:
    """The simple-return quantiles at ``QUANTILE_LEVELS`` ``(11,)``, the ``(low, high)`` simple
    returns of each range of :data:`RANGE_LEVELS` and the expected shortfall at
    :data:`ES_LEVEL` (a positive loss fraction) of one horizon's distribution, from one
    :func:`agents.quant.risk.distribution.quantile` over :data:`_READ_PROBS`.

    The same floats as reading each on its own (``quantile`` per range, ``expected_shortfall``):
    the mixture's CDF grid does not depend on the probabilities, each probability is inverted on
    it by itself, and each part's ``expm1`` (and the shortfall's mean) runs on an array of the
    length it had alone (``tests/agents/quant/risk/test_forecast.py`` checks it)."""
    logq = dist.quantile(_READ_PROBS, scale=scale, shape=shape, jumps=jumps)
    n_q, n_r = len(dist.QUANTILE_LEVELS), 2 * len(RANGE_LEVELS)
    q = np.expm1(logq[:n_q])
    bounds = [
        (float(lo), float(hi))
        for lo, hi in (np.expm1(logq[n_q + 2 * j : n_q + 2 * j + 2]) for j in range(len(RANGE_LEVELS)))
    ]
    es = float(dist.shortfall_of(logq[n_q + n_r :][None, :])[0])
    return q, bounds, es


def build_forecast(
    path: PathForecasts, i: int, *, symbol: str | None, spec: RiskSpec, dates: np.ndarray
) -> RiskForecast:
    """The :class:`RiskForecast` of origin number ``i`` of a walk-forward ``path`` whose bars have
    the session dates ``dates``."""
    close = float(path.close[i])
    fit = path.fits[int(path.fit_of_origin[i])]
    horizons: list[HorizonForecast] = []
    for k, h in enumerate(path.horizons):
        scale, shape, jumps = path.distribution(i, k)
        q, bounds, es = _read_quantiles(scale, shape, jumps)
        quantiles = ReturnQuantiles(**{key: float(v) for key, v in zip(dist.QUANTILE_KEYS, q, strict=True)})
        ranges = [
            PriceRange(
                probability=prob,
                low=close * (1 + float(lo_r)),
                high=close * (1 + float(hi_r)),
                low_return=float(lo_r),
                high_return=float(hi_r),
            )
            for prob, (lo_r, hi_r) in zip(RANGE_LEVELS, bounds, strict=True)
        ]
        horizons.append(
            HorizonForecast(
                horizon=h,
                sigma=dist.simple_moments(scale=scale, shape=shape, jumps=jumps)[1],
                sigma_diffusion=scale,
                quantiles=quantiles,
                var_95=-quantiles.q05,
                var_99=-quantiles.q01,
                es_975=es,
                ranges=tuple(ranges),
                earnings=tuple(
                    EarningsInWindow(
                        report_date=u.report_date,
                        time_of_day=u.time_of_day,
                        source=u.source,
                        session=u.offset,
                        in_distribution=spec.project or u.source == "announced",
                    )
                    for u in path.windows[i][k]
                ),
                distribution=DistributionTable(
                    scale=scale, shape=tuple(shape.tolist()), jumps=tuple(jumps.tolist())
                ),
            )
        )
    sigma = float(path.sigma_daily[i])

    def day(index: int) -> str:
        return pd.Timestamp(dates[index]).date().isoformat()

    return RiskForecast(
        symbol=symbol,
        as_of=pd.Timestamp(path.origin_dates[i]).date(),
        close=close,
        sigma_daily=sigma,
        sigma_annual=annualised(sigma),
        model=ModelProvenance(
            label=spec.label(),
            volatility=fit.volatility,
            fitted=fit.params,
            fitted_on={"first": day(fit.first_fit_index), "last": day(fit.index), "returns": fit.fit_returns},
            residual_pool=len(fit.pool),
            constants=(
                "agents/quant/risk/constants.py: chosen walk-forward on the stocknet universe with data up "
                "to 2015-12-31 (bench/risk_model_choice.py)"
            ),
            version=spec_version(spec),
        ),
        earnings=EarningsHandling(
            calendar_coverage=path.coverage == "calendar",
            jump_source=fit.jump_source,
            past_reports=fit.own_moves,
            after_close_habit=fit.after_close_habit,
        ),
        horizons=tuple(horizons),
    )


def forecast_risk(
    bars: pd.DataFrame,
    *,
    symbol: str | None = None,
    as_of: date | None = None,
    earnings: Sequence[EarningsEvent] | str | None = "calendar",
    horizons: Sequence[int] = C.HORIZONS,
    spec: RiskSpec | None = None,
) -> RiskForecast:
    """Forecast the distribution of the total return from ``as_of`` to each horizon.

    Args:
        bars: daily bars of one symbol (``DatetimeIndex``; columns ``open, high, low, close,
            adj_close`` in USD, :mod:`agents.quant.risk.inputs`); rows after ``as_of`` are ignored.
        symbol: the ticker (for the earnings calendar and the label).
        as_of: the forecast date (None: the last bar); a non-session day uses the session before.
        earnings: ``"calendar"`` (the company's reports in the project's earnings calendar,
            :func:`agents.quant.risk.earnings.company_events`), ``None`` (no calendar: nothing is
            left out or added), or the company's reports (``EarningsEvent``: ``report_date`` and
            ``time_of_day`` are read). Only what was known at ``as_of`` is used, whatever is
            passed (:mod:`agents.quant.risk.earnings`).
        horizons: sessions ahead, each 1..250 (default 1, 5, 20, 60).
        spec: the model (default: the chosen one, :mod:`agents.quant.risk.constants`).
    Returns:
        :class:`RiskForecast`.
    Raises:
        RiskInputError: bad bars (NaN or non-positive prices, unsorted dates, missing columns),
            fewer than ``MIN_BARS`` (60) sessions up to ``as_of``, ``as_of`` before the data or
            more than 7 days after the last bar, a bad horizon or earnings argument.
    """
    spec = spec or RiskSpec()
    hs = tuple(sorted({int(h) for h in horizons}))
    if not hs or hs[0] < 1 or hs[-1] > 250:
        raise RiskInputError(f"horizons must be sessions in 1..250, got {list(horizons)}")
    prepared = prepare_bars(bars, as_of=as_of, min_bars=C.MIN_BARS)
    events, unavailable = _events_for(symbol, earnings)
    origin = len(prepared) - 1
    path = run_path(prepared, events=events, origins=np.array([origin]), horizons=hs, spec=spec)
    forecast = build_forecast(path, 0, symbol=symbol, spec=spec, dates=prepared.dates)
    updates: dict[str, Any] = {}
    if unavailable:
        updates["earnings"] = forecast.earnings.model_copy(update={"jump_source": unavailable})
    if not prepared.range_based:
        label = f"{forecast.model.label} · closes only (range variance = squared return)"
        updates["model"] = forecast.model.model_copy(update={"label": label})
    return forecast.model_copy(update=updates) if updates else forecast
