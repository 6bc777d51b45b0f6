"""Risk forecasts you can check: volatility, VaR, ES, price ranges and the probability of closing
below or touching a price, for 1 to 250 sessions ahead, from a symbol's daily bars as of a date.

Use::

    from datetime import date
    from agents.quant.risk import forecast_risk

    f = forecast_risk(bars, symbol="AAPL", as_of=date(2015, 7, 17))  # bars: open..adj_close, DatetimeIndex
    f.close, f.sigma_daily         # 129.62 USD, 0.0113 (1.13 % a day, earnings jump excluded)
    h20 = f.horizon(20)
    h20.sigma                      # 0.064: σ of the 20-session simple total return
    h20.var_95, h20.es_975         # 0.100, 0.138: losses as positive fractions of the as_of close
    h20.range(0.8).low, h20.range(0.8).high   # 119.41, 140.75 USD: the 80 % range
    h20.earnings                   # the 2015-07-21 report (announced), its jump in the distribution
    f.prob_below(120.0, 20)        # 0.113: P(close in 20 sessions <= 120 USD)
    f.prob_touch(120.0, 20)        # 0.192: P(a daily close within 20 sessions <= 120 USD)
    f.model_dump_json()            # the whole forecast, with the model's provenance

Public API:

* :func:`forecast_risk` (``bars, *, symbol, as_of, earnings, horizons, spec``) → :class:`RiskForecast`
  (frozen pydantic model: ``as_of``, ``close``, ``sigma_daily``, ``sigma_annual``, ``model``
  (:class:`ModelProvenance`), ``earnings`` (:class:`EarningsHandling`), ``horizons``
  (:class:`HorizonForecast` each: ``sigma``, ``quantiles`` q01..q99, ``var_95``, ``var_99``,
  ``es_975``, ``ranges`` 50/80/95 %, ``earnings``), and the methods ``horizon(h)``,
  ``prob_below(level, h)``, ``prob_above(level, h)``, ``prob_touch(level, h)``, ``quantile(p, h)``).
* :class:`RiskSpec`: the model's choices (defaults: the chosen ones, :mod:`.constants`).
* :class:`RiskInputError`: bad bars, dates or arguments (a ``ValueError``).
* :func:`company_events`: a company's reports in the project's earnings calendar.
* :func:`load_record`, :func:`coverage_line`, :func:`var_line`: the backtest record of this model
  (``backtest_record.json``, written by ``finagent eval risk ... --write-record`` on 2013-07 ..
  2015-12) and the sentence a report prints beside a number, e.g. ``coverage_line(20, 0.8)`` →
  "80 % ranges at 20 sessions held 80.9 % [78.0, 83.9] of the time, walk-forward 2013-07..2015-12";
  ``load_record(version=f.model.version)`` refuses a record of another model version.
* For walk-forward work: :func:`agents.quant.risk.engine.run_path` (many origins, periodic refits),
  :mod:`agents.quant.risk.batch` (their quantiles and CDFs as arrays),
  :mod:`agents.quant.risk.backtest` (Kupiec, Christoffersen, Basel zones, QLIKE, Diebold–Mariano,
  date-clustered rates, PIT).

For the next readers: the report's Risk section reads a :class:`RiskForecast` per analysis (its
``model_dump()`` has the ``horizons[*].ranges`` shape the console's chart draws) and cites
:func:`coverage_line` / :func:`var_line`; the report's stop feeds ``prob_touch(stop, h)``; the
option plans' ``prob_below(strike, h)`` and ``prob_touch(strike, h)`` with ``h`` the sessions to
expiry; the paper portfolio's ``var_95_1d`` is ``forecast_risk(frame_of_values,
earnings=None).horizon(1).var_95`` with a close-only frame of the portfolio's daily value
(``agents.broker.risk.model_var``: a positive loss fraction, as here).

Conventions: returns are simple total returns of the adjusted close from the ``as_of`` close
(fractions); VaR and ES are *losses as positive fractions* (``var_95 = 0.031``: a 5 % chance of
losing 3.1 % or more); prices (ranges, levels) are in the units of the ``as_of`` close; horizons
count trading sessions after ``as_of``. Nothing after ``as_of`` is read: rows after it are ignored
and the earnings calendar is read as known at ``as_of``.

The model (docs/design.md, "Risk forecasts"): the daily variance from the chosen model
(:data:`.constants.VOLATILITY`) fitted on the non-earnings sessions; quantiles by filtered
historical simulation (standardised residuals of the last 250 non-earnings sessions); a report
in the window adds the company's own past earnings moves (or pooled ones when it has fewer than
eight); every choice and constant was made walk-forward on data up to 2015-12-31 (:mod:`.constants`).
"""

from __future__ import annotations

from agents.quant.risk.earnings import company_events
from agents.quant.risk.engine import RiskSpec
from agents.quant.risk.forecast import (
    CONVENTIONS,
    RANGE_LEVELS,
    DistributionTable,
    EarningsHandling,
    EarningsInWindow,
    HorizonForecast,
    ModelProvenance,
    PriceRange,
    ReturnQuantiles,
    RiskForecast,
    forecast_risk,
    spec_version,
)
from agents.quant.risk.inputs import RiskInputError
from agents.quant.risk.record import RecordUnavailableError, coverage_line, load_record, var_line

__all__ = [
    "CONVENTIONS",
    "RANGE_LEVELS",
    "DistributionTable",
    "EarningsHandling",
    "EarningsInWindow",
    "HorizonForecast",
    "ModelProvenance",
    "PriceRange",
    "RecordUnavailableError",
    "ReturnQuantiles",
    "RiskForecast",
    "RiskInputError",
    "RiskSpec",
    "company_events",
    "coverage_line",
    "forecast_risk",
    "load_record",
    "spec_version",
    "var_line",
]
