"""The risk analyst: the part of an analysis whose numbers carry evidence.

Its view is the ``risk_forecast`` tool's output cut to what a report prints (σ, VaR, ES and the
50/80/95 % ranges per horizon, the earnings reports in each window, the model and the lines of
its backtest record), cited by that call's ``tool_call_id``. The forecast itself is
:func:`agents.quant.risk.forecast_risk` (docs/design.md, "Risk forecasts"); this module only
selects and words. Deterministic; no LLM.
"""

from __future__ import annotations

from typing import Any

#: The keys of one horizon the view keeps (the quantile table and the distribution stay in the
#: tool's stored result, which ``risk_levels`` reads).
HORIZON_KEYS = ("horizon", "sigma", "var_95", "var_99", "es_975", "ranges", "earnings")


def risk_view(data: dict[str, Any], *, ref: str) -> dict[str, Any]:
    """The risk analyst's view of a ``risk_forecast`` result ``data`` (``agents.tools.risk``):
    ``{symbol, as_of, close, sigma_daily, sigma_annual, model: {label, version, fitted_on},
    earnings: {calendar_coverage, jump_source, past_reports}, horizons: [{horizon, sigma, var_95,
    var_99, es_975, ranges: [{probability, low, high, low_return, high_return}], earnings}],
    bars, record (the backtest record's rates, ``agents.tools.risk.record_rates``), source_refs:
    [ref]}``. Units as the forecast's: fractions, VaR and ES positive
    losses of the as_of close, prices USD in the close's units. Raises ``KeyError`` for data
    that is not a forecast."""
    model = data["model"]
    return {
        "symbol": data.get("symbol"),
        "as_of": data["as_of"],
        "close": data["close"],
        "sigma_daily": data["sigma_daily"],
        "sigma_annual": data["sigma_annual"],
        "model": {k: model.get(k) for k in ("label", "version", "fitted_on")},
        "earnings": {
            k: data["earnings"].get(k) for k in ("calendar_coverage", "jump_source", "past_reports")
        },
        "horizons": [{k: h[k] for k in HORIZON_KEYS} for h in data["horizons"]],
        "bars": data.get("bars"),
        "record": data.get("record"),
        "conventions": data.get("conventions"),
        "source_refs": [ref],
    }


def ranges_sentence(view: dict[str, Any], *, probability: float = 0.8) -> str:
    """One line of the view's ranges at ``probability``, e.g. ``80 % ranges: 1 session
    545.10–577.02, 5 sessions 523.30–598.61, 20 sessions 499.37–629.87, 60 sessions
    447.12–694.33 (close 560.99)``; prices to the cent. Raises ``KeyError`` for a malformed view."""
    parts = []
    for h in view["horizons"]:
        band = next(r for r in h["ranges"] if abs(r["probability"] - probability) < 1e-9)
        unit = "session" if h["horizon"] == 1 else "sessions"
        parts.append(f"{h['horizon']} {unit} {band['low']:,.2f}–{band['high']:,.2f}")
    return f"{round(probability * 100)} % ranges: " + ", ".join(parts) + f" (close {view['close']:,.2f})"


__all__ = ["HORIZON_KEYS", "ranges_sentence", "risk_view"]
