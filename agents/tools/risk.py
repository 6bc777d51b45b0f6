"""``risk_forecast`` and ``risk_levels``: the risk forecast of one symbol as logged tool calls.

``risk_forecast`` runs :func:`agents.quant.risk.forecast_risk` on the symbol's daily bars up to
``as_of`` (five years, so the model fits on its last 1,000 sessions as in its backtest) with the
project's earnings calendar as known at ``as_of``, and returns the whole forecast with the
sentences of the model's backtest record beside each number (:func:`agents.quant.risk.
coverage_line`, :func:`~agents.quant.risk.var_line` print them). ``risk_levels`` reads a cited
``risk_forecast`` result (``forecast_ref``), takes the forecast of the same bars (checked equal)
and gives P(close below) and P(touch) of price levels, e.g. the report's stop, so those numbers
cite a call too (docs/design.md, "Risk forecasts").

A forecast is made once per analysis: a process keeps its last forecasts (:data:`MEMO_SIZE`,
keyed by symbol, date, horizons and a digest of the bars), and in service mode the workers share
them through Redis for :data:`SHARED_TTL` seconds (``settings.service.shared_redis_url``, as the
bar cache), so ``risk_levels`` takes the forecast its ``risk_forecast`` made, in whichever worker
process, instead of fitting and bootstrapping the model again: the same numbers to the last bit
(JSON keeps every float exactly). A Redis failure only costs the forecast again.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import threading
import weakref
import zlib
from collections import OrderedDict
from datetime import date
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from agents.tools.fields import Symbol
from agents.tools.registry import ToolContext, ToolInputError, ToolOutput, register
from core.settings import Settings
from db.redis_store import cache_get, cache_set

logger = logging.getLogger(__name__)

#: The bars a forecast reads: five years reach the model's 1,000-session fit window
#: (``agents.quant.risk.constants.FIT_WINDOW``) with room for the earnings sessions it leaves out.
RISK_PERIOD: Final = "5y"
#: The horizons of an analysis's forecast (sessions), the ones its backtest record covers.
DEFAULT_HORIZONS: Final = (1, 5, 20, 60)
#: The range probabilities a report prints.
RANGE_PERCENTS: Final = (50, 80, 95)


class RiskForecastInput(BaseModel):
    """``{symbol, horizons?}``: horizons in sessions (1..250, at most 8; default 1, 5, 20, 60)."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol = Field(description="Stock ticker, e.g. AAPL")
    horizons: list[int] = Field(
        default_factory=lambda: list(DEFAULT_HORIZONS),
        min_length=1,
        max_length=8,
        description="Horizons in trading sessions after as_of (1..250)",
    )


class RiskLevelsInput(BaseModel):
    """``{symbol, forecast_ref, levels}``: levels are prices in the units of the forecast's close."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol = Field(description="Stock ticker, e.g. AAPL")
    forecast_ref: str = Field(min_length=1, description="tool_call_id of a risk_forecast call")
    levels: list[float] = Field(min_length=1, max_length=10, description="Price levels, USD (> 0)")


def _rate(block: dict[str, Any]) -> dict[str, Any]:
    return {k: block.get(k) for k in ("rate", "low", "high")}


def record_rates(horizons: list[int], version: str) -> dict[str, Any]:
    """The backtest record's rates for ``horizons`` of model ``version`` (fractions, 95 %
    intervals clustered by date): ``{version, period: {from, to}, horizons: {"20": {ranges: {"50":
    {rate, low, high}, "80": ..., "95": ...}, ranges_spanning_a_report: {...}, var: {"95": ...,
    "99": ...}, stop: {below: {mean_p, observed, ece, n}, touch: {...}}}}}``, a horizon the record
    lacks left out; or ``{version: null, unavailable: reason}`` when no record of this model
    version can be read (a report then says its numbers are not backtested). The sentences a
    report prints from them are :func:`agents.quant.risk.coverage_line`'s and ``var_line``'s."""
    from agents.quant.risk import RecordUnavailableError, load_record

    try:
        record = load_record(version=version)
    except RecordUnavailableError as exc:
        return {"version": None, "unavailable": str(exc)}
    out: dict[str, Any] = {}
    for h in horizons:
        block = record["horizons"].get(str(h))
        if block is None:
            continue
        spanning = block.get("ranges_spanning_a_report") or {}
        out[str(h)] = {
            "ranges": {str(p): _rate(block["ranges"][str(p)]) for p in RANGE_PERCENTS},
            "ranges_spanning_a_report": {
                str(p): _rate(spanning[str(p)]) for p in RANGE_PERCENTS if str(p) in spanning
            },
            "var": {str(level): _rate(block["var"][str(level)]) for level in (95, 99)},
            "stop": block.get("stop") or {},
        }
    return {"version": record["model_version"], "period": record["period"], "horizons": out}


#: Forecasts a process keeps (:func:`_forecast`): a worker runs an analysis's risk_forecast and
#: its risk_levels a few steps apart, with other analyses' steps between them.
MEMO_SIZE: Final = 16
#: Seconds a forecast stays in Redis for the other worker processes (~8 KB each): the steps of
#: one analysis follow each other within seconds unless a backlog holds them, and a forecast
#: gone is made again.
SHARED_TTL: Final = 300
# A small LRU by hand, not functools.lru_cache: the key is derived from the bars (a DataFrame,
# unhashable) and an entry can also arrive from Redis, which lru_cache cannot be fed.
_memo: OrderedDict[tuple[str, date, tuple[int, ...], bytes], Any] = OrderedDict()
_memo_lock = threading.Lock()


def bars_digest(bars: Any) -> bytes:
    """A digest of daily ``bars`` (a DataFrame with a DatetimeIndex): its dates, column names and
    values, so two frames with the same digest give the same forecast."""
    h = hashlib.blake2b(digest_size=16)
    h.update(bars.index.asi8.tobytes())
    h.update("|".join(map(str, bars.columns)).encode())
    h.update(bars.to_numpy(dtype="float64").tobytes())
    return h.digest()


#: :func:`bars_digest` of the last :data:`MEMO_SIZE` window frames, by identity (checked with a
#: weak reference): ``agents.tools.bars.history_window`` serves one shared frame, never modified,
#: to a ``risk_forecast`` and to the ``risk_levels`` that cites it.
_digests: dict[int, tuple[weakref.ref[Any], bytes]] = {}


def _window_digest(bars: Any) -> bytes:
    """:func:`bars_digest` of a frame of ``history_window``, made once while the frame lives."""
    with _memo_lock:
        kept = _digests.get(id(bars))
    if kept is not None and kept[0]() is bars:
        return kept[1]
    digest = bars_digest(bars)
    with _memo_lock:
        _digests[id(bars)] = (weakref.ref(bars), digest)
        while len(_digests) > MEMO_SIZE:
            _digests.pop(next(iter(_digests)))
    return digest


def _forecast(ctx: ToolContext, symbol: str, horizons: list[int]) -> tuple[Any, Any]:
    """(the :class:`agents.quant.risk.RiskForecast` of ``symbol`` at ``ctx.as_of``, its bars): one
    of the process's last forecasts when it was made from the same bars (:func:`bars_digest`) for
    the same date and horizons, else a new one (then kept). The earnings calendar, the other
    input, is read once per process (``agents.data.fundamentals.earnings.default_calendar``).
    Raises ToolInputError for bars the model cannot use; ProviderError from the source."""
    from agents.quant.risk import RiskInputError, forecast_risk
    from agents.tools.bars import history_window

    bars = history_window(ctx=ctx, symbol=symbol, period=RISK_PERIOD, interval="1d")
    if bars.empty:
        raise ToolInputError(f"no {symbol} bars up to {ctx.as_of}")
    key = (symbol, ctx.as_of, tuple(sorted(set(horizons))), _window_digest(bars))
    forecast = _kept(key, ctx.settings)
    if forecast is not None:
        return forecast, bars
    try:
        forecast = forecast_risk(bars, symbol=symbol, as_of=ctx.as_of, horizons=horizons)
    except RiskInputError as exc:
        raise ToolInputError(f"cannot forecast {symbol}'s risk: {exc}") from None
    _keep(key, forecast, ctx.settings)
    return forecast, bars


@functools.cache
def _model_id() -> str:
    """The forecast's model version and the earnings calendar's, which a kept forecast must share
    (a worker of another release makes another forecast)."""
    from agents.data.fundamentals.earnings import CALENDAR_PACKAGE
    from agents.quant.risk import RiskSpec
    from agents.quant.risk.forecast import spec_version

    try:
        import importlib.metadata

        calendar = importlib.metadata.version(CALENDAR_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        calendar = "none"
    return f"{spec_version(RiskSpec())}/{calendar}"


def _shared_key(key: tuple[str, date, tuple[int, ...], bytes]) -> str:
    symbol, as_of, horizons, digest = key
    text = f"{_model_id()}|{symbol}|{as_of.isoformat()}|{','.join(map(str, horizons))}|{digest.hex()}"
    return "finagent:risk-forecast:" + hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _kept(key: tuple[str, date, tuple[int, ...], bytes], settings: Settings) -> Any:
    """The forecast kept for ``key``: this process's, else the one another process shared in
    Redis (then kept here too); ``None`` when there is none."""
    from agents.quant.risk import RiskForecast

    with _memo_lock:
        kept = _memo.get(key)
        if kept is not None:
            _memo.move_to_end(key)
            return kept
    url = settings.service.shared_redis_url
    raw = cache_get(url, _shared_key(key), what="risk forecast", level=logging.DEBUG) if url else None
    if raw is None:
        return None
    try:
        kept = RiskForecast.model_validate_json(zlib.decompress(raw))
    except (zlib.error, ValueError) as exc:
        logger.debug("shared risk forecast unreadable (%s): forecasting again", type(exc).__name__)
        return None
    _remember(key, kept)
    return kept


def _keep(key: tuple[str, date, tuple[int, ...], bytes], forecast: Any, settings: Settings) -> None:
    """Keep ``forecast`` in this process and, in service mode, in Redis for :data:`SHARED_TTL`
    seconds (a Redis failure is logged, not raised)."""
    _remember(key, forecast)
    url = settings.service.shared_redis_url
    if url:
        payload = zlib.compress(forecast.model_dump_json().encode(), 1)
        cache_set(url, _shared_key(key), payload, ttl=SHARED_TTL, what="risk forecast", level=logging.DEBUG)


def _remember(key: tuple[str, date, tuple[int, ...], bytes], forecast: Any) -> None:
    with _memo_lock:
        _memo[key] = forecast
        _memo.move_to_end(key)
        while len(_memo) > MEMO_SIZE:
            _memo.popitem(last=False)


@register(
    name="risk_forecast",
    description=(
        "Risk forecast of a symbol from its daily bars up to as_of and its earnings calendar: sigma per "
        "day and per horizon, quantiles of the total return, VaR(95 %), VaR(99 %) and ES(97.5 %) as "
        "positive loss fractions, 50/80/95 % price ranges, reports in each window, the model's "
        "provenance and its backtest record's lines."
    ),
    input_model=RiskForecastInput,
)
def risk_forecast(params: RiskForecastInput, ctx: ToolContext) -> ToolOutput:
    """The :class:`agents.quant.risk.RiskForecast` of ``params.symbol`` at ``ctx.as_of`` as data:
    its ``model_dump`` without the distribution tables (``as_of, close, sigma_daily, sigma_annual,
    model, earnings, horizons[*] {horizon, sigma, sigma_diffusion, quantiles, var_95, var_99,
    es_975, ranges, earnings}``), plus ``bars {period, first, last, count}`` and ``record``
    (:func:`record_rates`).

    Raises:
        ToolInputError: a horizon outside 1..250, or bars the model cannot use (too few).
        ProviderError: from the data source (unknown symbol, no data), mapped by ``run_tool``.
    """
    horizons = sorted(set(params.horizons))
    if horizons[0] < 1 or horizons[-1] > 250:
        raise ToolInputError(f"horizons must be 1..250 sessions, got {params.horizons}")
    forecast, bars = _forecast(ctx, params.symbol, horizons)
    # the distribution tables stay out of the stored result (5 KB compressed): risk_levels
    # takes the forecast of the same bars again (kept, or made anew) and checks it is the cited one
    data = forecast.model_dump(mode="json", exclude={"horizons": {"__all__": {"distribution"}}})
    data["bars"] = {
        "period": RISK_PERIOD,
        "first": bars.index[0].date().isoformat(),
        "last": bars.index[-1].date().isoformat(),
        "count": len(bars),
    }
    data["record"] = record_rates(horizons, forecast.model.version)
    h = forecast.horizons[min(range(len(horizons)), key=lambda i: abs(horizons[i] - 20))]
    band = h.range(0.8)
    summary = (
        f"{params.symbol} {forecast.as_of}: close {forecast.close:.2f}, "
        f"sigma {forecast.sigma_daily:.4f}/day, 80% range {h.horizon}d {band.low:.2f}..{band.high:.2f}, "
        f"VaR95 {forecast.horizons[0].horizon}d {forecast.horizons[0].var_95:.4f} ({forecast.model.version})"
    )
    return ToolOutput(data=data, summary=summary, symbol=params.symbol)


@register(
    name="risk_levels",
    description=(
        "P(close at the horizon at or below a level) and P(a daily close within the horizon reaches it) "
        "for price levels, from a cited risk_forecast result, at each of its horizons."
    ),
    input_model=RiskLevelsInput,
)
def risk_levels(params: RiskLevelsInput, ctx: ToolContext) -> ToolOutput:
    """``{symbol, forecast_ref, close, levels: [{level, horizons: [{horizon, p_below, p_touch}]}]}``
    (probabilities as fractions; ``p_touch`` for daily closes, :meth:`~agents.quant.risk.
    RiskForecast.prob_touch`) at the horizons of the cited forecast. The forecast of the same
    bars is taken again (its distribution tables are not stored: the process's kept forecast,
    else made anew, :func:`_forecast`) and must equal the cited one (model version, close, σ
    per day).

    Raises:
        ToolInputError: ``forecast_ref`` is not a risk_forecast call of ``symbol``, the bars no
            longer give it, or a level ≤ 0.
    """
    cited = ctx.result_data(params.forecast_ref)
    if not cited or "horizons" not in cited or "model" not in cited:
        raise ToolInputError(f"forecast_ref {params.forecast_ref!r} is not a successful risk_forecast call")
    if cited.get("symbol") != params.symbol:
        raise ToolInputError(
            f"forecast_ref {params.forecast_ref!r} holds {cited.get('symbol')}, not {params.symbol}"
        )
    if any(not (level > 0) for level in params.levels):
        raise ToolInputError(f"levels must be positive prices, got {params.levels}")
    forecast, _bars = _forecast(ctx, params.symbol, [int(h["horizon"]) for h in cited["horizons"]])
    same = forecast.model.version == cited["model"]["version"] and forecast.close == cited["close"]
    if not same or abs(forecast.sigma_daily - float(cited["sigma_daily"])) > 1e-12:
        raise ToolInputError(
            f"the bars of {params.symbol} up to {ctx.as_of} no longer give the cited forecast "
            f"{params.forecast_ref!r}"
        )
    levels: list[dict[str, Any]] = [
        {
            "level": level,
            "horizons": [
                {"horizon": horizon, "p_below": below, "p_touch": touch}
                for horizon, below, touch in forecast.level_odds(level)
            ],
        }
        for level in params.levels
    ]
    data: dict[str, Any] = {
        "symbol": params.symbol,
        "forecast_ref": params.forecast_ref,
        "close": forecast.close,
        "levels": levels,
    }
    first = levels[0]["horizons"][-1]
    summary = (
        f"{params.symbol}: level {params.levels[0]:.2f} at {first['horizon']}d: P(below) "
        f"{first['p_below']:.3f}, P(touch) {first['p_touch']:.3f}"
    )
    return ToolOutput(data=data, summary=summary, source_refs=(params.forecast_ref,), symbol=params.symbol)
