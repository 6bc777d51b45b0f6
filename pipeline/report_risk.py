"""The report's Risk section: what an analysis says with evidence, shown first.

The numbers are the risk analyst's (the first row of ``agents.analysts.table``, whose section
heading this is; ``state.analysis.risk``, the ``risk_forecast`` call) and the
stop's probabilities (``state.recommendation.stop_odds``, the ``risk_levels`` call); beside each
the rates of the model's backtest record that the call stored, worded as
``agents.quant.risk.coverage_line`` words them (docs/design.md, "Risk forecasts";
docs/evaluation.md, "Risk"). Only multiplications by the as_of close (per share) and
by 100 (per 100 shares) are done here. VaR and ES are losses, printed as positive amounts.
"""

from __future__ import annotations

from typing import Any

from agents.analysts.table import analyst
from core.display import percent, rate_interval, usd
from core.state import FinancialAgentState

#: Shares of the "per 100 shares" column.
LOT = 100
#: The horizon a headline quotes (sessions): the one nearest to it.
HEADLINE_HORIZON = 20


def _sessions(h: int) -> str:
    return f"{h} session" if h == 1 else f"{h} sessions"


def risk_json(state: FinancialAgentState) -> dict[str, Any] | None:
    """The top-level ``risk`` object of the report, or ``None`` without a forecast:

    ``{symbol, as_of, close, sigma_daily, sigma_annual, model: {label, version, fitted_on},
    earnings: {calendar_coverage, jump_source, past_reports}, horizons: [{horizon, sigma, var_95,
    var_99, es_975, loss_usd: {var_95, var_99, es_975: {per_share, per_100}}, ranges:
    [{probability, low, high, low_return, high_return}], earnings: [...], record: {ranges: {"50":
    {rate, low, high}, ...}, ranges_spanning_a_report: {...}, var: {"95": ..., "99": ...}} |
    null}], stop: {level, horizons: [{horizon,
    p_below, p_touch, record: {below, touch} | null}], source_refs} | null, record: {version,
    period} | {version: null, unavailable}, conventions, source_refs}``.

    Fractions as fractions; VaR and ES positive losses (a fraction of the close, and USD per share
    and per 100 shares); prices USD in the units of the as_of close. ``horizons[*].ranges`` is the
    shape the console's chart draws (``apps.chart_data.risk_bands``)."""
    analysis = state.analysis
    view = analysis.risk if analysis is not None else None
    if not view:
        return None
    close = float(view["close"])
    record = view.get("record") or {}
    lines = record.get("horizons") or {}
    horizons = []
    for h in view["horizons"]:
        block = lines.get(str(h["horizon"]))
        horizons.append(
            {
                **h,
                "loss_usd": {
                    key: {"per_share": h[key] * close, f"per_{LOT}": h[key] * close * LOT}
                    for key in ("var_95", "var_99", "es_975")
                },
                "record": {k: block[k] for k in ("ranges", "ranges_spanning_a_report", "var") if k in block}
                if block
                else None,
            }
        )
    rec = state.recommendation
    odds = rec.stop_odds if rec is not None else None
    stop = None
    if odds:
        stop = {
            "level": odds["level"],
            "rule": rec.stop_loss.rule if rec is not None and rec.stop_loss else None,
            "horizons": [
                {**row, "record": (lines.get(str(row["horizon"])) or {}).get("stop") or None}
                for row in odds["horizons"]
            ],
            "source_refs": list(odds.get("source_refs") or []),
        }
    return {
        "symbol": view.get("symbol"),
        "as_of": view["as_of"],
        "close": close,
        "sigma_daily": view["sigma_daily"],
        "sigma_annual": view["sigma_annual"],
        "model": view["model"],
        "earnings": view["earnings"],
        "horizons": horizons,
        "stop": stop,
        "record": {k: record.get(k) for k in ("version", "period", "unavailable") if k in record},
        "conventions": view.get("conventions"),
        "source_refs": list(view.get("source_refs") or []),
    }


def _nearest(risk: dict[str, Any], horizon: int) -> dict[str, Any]:
    return min(risk["horizons"], key=lambda h: (abs(h["horizon"] - horizon), h["horizon"]))


def _band(h: dict[str, Any], probability: float) -> dict[str, Any]:
    return next(r for r in h["ranges"] if abs(r["probability"] - probability) < 1e-9)


def risk_headline(risk: dict[str, Any]) -> str:
    """The short risk clause of a list's headline, e.g. ``80 % range in 20 sessions
    499.37–629.87 (close 560.99)``."""
    h = _nearest(risk, HEADLINE_HORIZON)
    band = _band(h, 0.8)
    return (
        f"80 % range in {_sessions(h['horizon'])} {usd(band['low'])}–{usd(band['high'])} "
        f"(close {usd(risk['close'])})"
    )


def _coverage_sentence(risk: dict[str, Any], h: dict[str, Any], level: str) -> str:
    """``80 % ranges at 20 sessions held 80.9 % [78.0, 83.9] of the time, walk-forward
    2013-07..2015-12``: :func:`agents.quant.risk.coverage_line`'s sentence from the rates the
    forecast's call stored with it."""
    rate = h["record"]["ranges"][level]
    period = risk["record"].get("period") or {}
    return (
        f"{level} % ranges at {_sessions(h['horizon'])} held {rate_interval(rate)} "
        "of the time, "
        f"walk-forward {str(period.get('from'))[:7]}..{str(period.get('to'))[:7]}"
    )


def risk_lead(risk: dict[str, Any]) -> str:
    """The report's first sentence: the 80 % range at the headline horizon with its backtest
    line, and the 1-session VaR(95 %) with its line, e.g. ``**Risk**: 80 % range in 20 sessions
    499.37–629.87 USD (close 560.99; 80 % ranges at 20 sessions held 80.9 % [78.0, 83.9] of the
    time, walk-forward 2013-07..2015-12); VaR(95 %, 1 session) 2.95 % = 16.55 USD a share.``"""
    h = _nearest(risk, HEADLINE_HORIZON)
    band = _band(h, 0.8)
    held = f"; {_coverage_sentence(risk, h, '80')}" if h.get("record") else "; not backtested"
    text = (
        f"**Risk**: 80 % range in {_sessions(h['horizon'])} {usd(band['low'])}–{usd(band['high'])} "
        f"USD (close {usd(risk['close'])}{held})"
    )
    one = _nearest(risk, 1)
    if one["horizon"] == 1:
        loss = usd(one["loss_usd"]["var_95"]["per_share"])
        text += f"; VaR(95 %, 1 session) {percent(one['var_95'])} = {loss} USD a share"
    return text + "."


def risk_missing(state: FinancialAgentState) -> str | None:
    """``**Risk**: no forecast: <why>`` when the risk analyst's call failed in this analysis (the
    last ``risk_forecast`` error), so a report without a Risk section says why; ``None``
    otherwise."""
    failed = [e for e in state.errors if e.message.startswith("risk_forecast:")]
    if not failed or (state.analysis is not None and state.analysis.risk):
        return None
    return f"**Risk**: no forecast: {failed[-1].message.removeprefix('risk_forecast: ')}."


def _earnings_text(risk: dict[str, Any], h: dict[str, Any]) -> str:
    if not risk["earnings"].get("calendar_coverage"):
        return "no calendar"
    if not h["earnings"]:
        return "none"
    return "; ".join(
        f"{e['report_date']} ({e['source']}"
        + (", in the ranges" if e["in_distribution"] else ", not in the ranges")
        + ")"
        for e in h["earnings"]
    )


def _refs(refs: list[str]) -> str:
    return " ".join(f"`[{r}]`" for r in refs if r)


def _held(rate: dict[str, Any] | None, verb: str) -> str:
    """``held 80.9 % [78.0, 83.9]`` from a record rate ``{rate, low, high}``; ``""`` without one."""
    if not rate or rate.get("rate") is None:
        return ""
    return f" ({verb} {rate_interval(rate)})"


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _model_line(risk: dict[str, Any]) -> str:
    model = risk["model"]
    fitted = model.get("fitted_on") or {}
    earnings = (
        "report days left out of σ; a report announced inside a window adds a jump "
        f"({risk['earnings']['jump_source']})."
        if risk["earnings"].get("calendar_coverage")
        else "no earnings calendar covers this symbol: nothing left out or added."
    )
    return (
        f"Risk forecast `{model['version']}` ({model['label']}), fitted on {fitted.get('first')}.."
        f"{fitted.get('last')} ({_count(fitted.get('returns'))} daily returns), from the close "
        f"{usd(risk['close'])} of {risk['as_of']}: σ {percent(risk['sigma_daily'])} a day "
        f"({percent(risk['sigma_annual'])} a year) outside report days. Earnings: {earnings}"
    )


def _record_period(risk: dict[str, Any]) -> str:
    period = risk["record"].get("period") or {}
    if not period:
        return f"no backtest record of this model version: {risk['record'].get('unavailable')}"
    return (
        f"in brackets, how often such ranges held and such VaRs were exceeded in the model's "
        f"walk-forward backtest {period['from'][:7]}..{period['to'][:7]} (record "
        f"`{risk['record'].get('version')}`; 95 % intervals clustered by date)"
    )


def risk_markdown(risk: dict[str, Any] | None) -> list[str]:
    """The "Risk" section (empty without a forecast): the model; per horizon σ and the 50/80/95 %
    ranges, each with how often such ranges held in the backtest record, and the reports in the
    window; VaR(95 %), VaR(99 %) and ES(97.5 %) as a share of the close, per share and per 100
    shares, each VaR with its exception rate in the record; P(close below) and P(touch) of the
    stop with the record's forecast and observed rates; the conventions."""
    if not risk:
        return []
    lines = [
        f"## {analyst('risk').section} {_refs(risk['source_refs'])}",
        "",
        _model_line(risk),
        "",
        f"Prices USD; {_record_period(risk)}.",
        "",
        "| horizon | σ | 50 % range | 80 % range | 95 % range | reports in the window |",
        "|---|---|---|---|---|---|",
    ]
    for h in risk["horizons"]:
        # a window with a report in its distribution is read against the windows that spanned one
        every = h.get("record") or {}
        spans = any(e["in_distribution"] for e in h["earnings"]) and every.get("ranges_spanning_a_report")
        rates = (every.get("ranges_spanning_a_report") if spans else every.get("ranges")) or {}
        verb = "held with a report in the window" if spans else "held"
        cells = [
            f"{usd(b['low'])}–{usd(b['high'])}{_held(rates.get(p), verb)}"
            for p, b in (("50", _band(h, 0.5)), ("80", _band(h, 0.8)), ("95", _band(h, 0.95)))
        ]
        lines.append(
            f"| {_sessions(h['horizon'])} | {percent(h['sigma'])} | "
            + " | ".join(cells)
            + f" | {_earnings_text(risk, h)} |"
        )
    lines += [
        "",
        f"Losses, positive amounts: a share of the close, USD per share / per {LOT} shares.",
        "",
        "| horizon | VaR(95 %) | VaR(99 %) | ES(97.5 %) |",
        "|---|---|---|---|",
    ]
    for h in risk["horizons"]:
        rates = (h.get("record") or {}).get("var") or {}
        cells = []
        for key, level in (("var_95", "95"), ("var_99", "99"), ("es_975", None)):
            loss = h["loss_usd"][key]
            cell = f"{percent(h[key])}: {usd(loss['per_share'])} / {usd(loss[f'per_{LOT}'])}"
            cells.append(cell + (_held(rates.get(level), "exceeded") if level else ""))
        lines.append(f"| {_sessions(h['horizon'])} | " + " | ".join(cells) + " |")
    lines += ["", "ES(97.5 %), the mean loss beyond the 2.5 % quantile, has no backtest of its own."]
    lines += _stop_markdown(risk.get("stop"))
    lines += ["", f"Conventions: {risk.get('conventions')}", ""]
    return lines


def _stop_markdown(stop: dict[str, Any] | None) -> list[str]:
    """The stop's probabilities, each horizon with the record's mean forecast and observed rate."""
    if not stop:
        return []
    rule = f" ({stop['rule']})" if stop.get("rule") else ""
    lines = [
        "",
        f"Stop {usd(stop['level'])}{rule} {_refs(stop['source_refs'])}: P(touch) counts daily closes "
        "(intraday lows reach a stop more often).",
        "",
        "| horizon | P(close below the stop) | P(a close touches it) | backtest: forecast / observed |",
        "|---|---|---|---|",
    ]
    for row in stop["horizons"]:
        rec = row.get("record") or {}
        below, touch = rec.get("below"), rec.get("touch")
        seen = (
            f"below {percent(below['mean_p'], digits=1)} / {percent(below['observed'], digits=1)}; touch "
            f"{percent(touch['mean_p'], digits=1)} / {percent(touch['observed'], digits=1)}"
            if below and touch
            else "not in the record"
        )
        p_below, p_touch = percent(row["p_below"], digits=1), percent(row["p_touch"], digits=1)
        lines.append(f"| {_sessions(row['horizon'])} | {p_below} | {p_touch} | {seen} |")
    return lines


__all__ = ["risk_headline", "risk_json", "risk_lead", "risk_markdown", "risk_missing"]
