"""The walk-forward engine: forecasts for every origin of a span of sessions from one symbol's
bars, with the model refitted every ``refit_every`` sessions on the data up to that session and
filtered daily with the fitted parameters in between. :func:`agents.quant.risk.forecast_risk`
is this engine with one origin (a refit there), so the two agree exactly at a refit session.

Per origin ``t`` (a session index of the bars) and horizon ``h`` it produces the pieces of
:mod:`agents.quant.risk.distribution`: the diffusion ``scale``, the id of the shape table, the
id of the earnings-jump set and the factor that scales it, plus the reports in the window.
Nothing at origin ``t`` reads a bar after ``t`` (the fit at a refit session ``a ≤ t`` reads bars up
to ``a``; the filter reads bars up to ``t``; the earnings rules are those of
:mod:`agents.quant.risk.earnings` at ``t``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from agents.data.fundamentals.earnings import EarningsEvent
from agents.quant.risk import constants as C
from agents.quant.risk import distribution as dist
from agents.quant.risk.earnings import (
    Upcoming,
    after_close_habit,
    earnings_mask,
    nyse_sessions,
    past_moves,
    upcoming,
)
from agents.quant.risk.inputs import PreparedBars, RiskInputError
from agents.quant.risk.pooled import MIN_POOLED, pooled_abs_moves, pooled_description
from agents.quant.risk.volatility import (
    HAR_MONTH,
    GarchParams,
    HarParams,
    ewma_variance,
    fit_garch,
    fit_har,
    garch_cumulative,
    garch_variance,
    har_variance,
    hv_variance,
)


@dataclass(frozen=True)
class RiskSpec:
    """The model's choices (defaults: the chosen ones, :mod:`agents.quant.risk.constants`, where
    the measurement behind each is recorded). Other values exist to measure the alternatives.

    volatility: ``ewma``, ``garch_t``, ``har_log`` (HAR on ln range variance), ``har_level``
        (HAR of squared returns on range variance), ``hv20``, or two of them joined by ``+``
        (the mean of their variances).
    shape: ``fhs`` (empirical standardised residuals) or ``normal``, for one session.
    aggregation: ``bootstrap`` (sums of independent residual draws) or ``normal`` for several
        sessions.
    pool_window: standardised residuals in the FHS pool (the most recent non-earnings ones).
    center_pool: subtract the pool's mean (no drift: the forecasts take no view on direction).
    refit_every: sessions between refits in a walk-forward.
    fit_window: most recent returns a GARCH or HAR fit reads.
    min_fit: fewest non-earnings returns for GARCH/HAR; with fewer, EWMA is used.
    exclude_earnings / add_earnings: leave reaction sessions out / add the jump when a report
        falls in the window.
    jump_mode: ``scaled`` (past moves in units of the σ forecast before them, times today's σ)
        or ``raw`` (past log moves as they were).
    min_own_moves: fewest own past moves to use them; below, the pooled table.
    own_moves: most recent own moves used.
    project: also add the jump of projected report dates (beyond the announced 30 days; they are
        listed either way).
    multi_scale: ``unit`` (several sessions: the residuals rescaled to unit variance, so the scale
        is the variance model's) or ``pool`` (the pool's own variance).
    vr_prior: the variance-ratio correction of several-session variances
        (:func:`_variance_ratio`): its prior weight in windows, or None for none.
    """

    volatility: str = C.VOLATILITY
    shape: str = C.SHAPE
    aggregation: str = C.AGGREGATION
    pool_window: int = C.POOL_WINDOW
    center_pool: bool = C.CENTER_POOL
    refit_every: int = C.REFIT_EVERY
    fit_window: int = C.FIT_WINDOW
    min_fit: int = C.MIN_FIT
    exclude_earnings: bool = True
    add_earnings: bool = True
    jump_mode: str = C.JUMP_MODE
    min_own_moves: int = C.MIN_OWN_MOVES
    own_moves: int = C.OWN_MOVES
    project: bool = C.PROJECT_EARNINGS
    multi_scale: str = C.MULTI_SCALE
    vr_prior: float | None = C.VR_PRIOR
    bootstrap_draws: int = C.BOOTSTRAP_DRAWS
    seed: int = C.SEED

    def label(self) -> str:
        """A short human label, e.g. ``HAR-RV(log, GK+gap) · FHS(250) · bootstrap · earnings own/pooled``."""
        names = {
            "ewma": "EWMA(λ=0.94)",
            "garch_t": "GARCH(1,1)-t",
            "har_log": "HAR-RV(log, GK+gap)",
            "har_level": "HAR(r² on GK+gap)",
            "hv20": "HV20",
        }
        vol = " + ".join(names.get(v, v) for v in self.volatility.split("+"))
        if "+" in self.volatility:
            vol = f"mean of {vol}"
        shape = f"FHS({self.pool_window})" if self.shape == "fhs" else "normal"
        agg = "FHS bootstrap of sums" if self.aggregation == "bootstrap" else "normal"
        earn = "earnings out of σ and pool, jumps added" if self.add_earnings else "no earnings handling"
        return f"{vol} · 1-day {shape} · multi-day {agg} · {earn}"


@dataclass
class AnchorFit:
    """What a refit at bars index ``index`` produced: the variance model's parameters, the
    residual pool, the shapes per diffusion length and the standardised (or raw) jump set."""

    index: int
    volatility: str
    params: dict[str, Any]
    pool: np.ndarray
    shapes: dict[int, int]
    jump_id: int
    jump_source: str
    own_moves: int
    after_close_habit: bool | None
    fit_returns: int
    first_fit_index: int


@dataclass
class PathForecasts:
    """Forecasts for every origin of a span (module docstring). Arrays are ``(n_origins,)`` or
    ``(n_origins, n_horizons)``; ``shapes`` and ``jumps`` are the tables the ids point into
    (``jumps[0]`` is ``(0.0,)``: no report in the window)."""

    horizons: tuple[int, ...]
    origin_index: np.ndarray
    origin_dates: np.ndarray
    close: np.ndarray
    sigma_daily: np.ndarray
    scale: np.ndarray
    shape_id: np.ndarray
    jump_id: np.ndarray
    jump_scale: np.ndarray
    windows: list[list[list[Upcoming]]]
    shapes: list[np.ndarray]
    jumps: list[np.ndarray]
    fits: list[AnchorFit]
    fit_of_origin: np.ndarray
    coverage: str

    def distribution(self, i: int, k: int) -> tuple[float, np.ndarray, np.ndarray]:
        """``(scale, shape, jumps)`` of origin ``i``, horizon number ``k``."""
        jumps = self.jumps[int(self.jump_id[i, k])] * float(self.jump_scale[i, k])
        return float(self.scale[i, k]), self.shapes[int(self.shape_id[i, k])], jumps


def _compress(values: np.ndarray, points: int) -> np.ndarray:
    """``values`` as at most ``points`` equally likely values: their quantiles at the probabilities
    ``(i + 0.5) / points`` (the mixture then costs ``points`` evaluations, whatever the sample)."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) <= points:
        return values
    return np.asarray(np.quantile(values, (np.arange(points) + 0.5) / points), dtype=np.float64)


class _Variance:
    """One-step variance forecasts and cumulative variances of one model over the compressed series."""

    def __init__(self, name: str, r: np.ndarray, x: np.ndarray) -> None:
        self.name = name
        self.r = r
        self.r2 = r * r
        self.x = x
        self.params: dict[str, Any] = {}
        self._garch: GarchParams | None = None
        self._har: HarParams | None = None

    def fit(self, end: int, spec: RiskSpec, horizons: tuple[int, ...], previous: _Variance | None) -> None:
        """Fit on compressed returns ``[0, end)`` (``end`` returns)."""
        lo = max(0, end - spec.fit_window)
        if self.name == "garch_t":
            start = previous._garch if previous is not None and previous._garch is not None else None
            self._garch = fit_garch(self.r[lo:end], start=start)
            g = self._garch
            self.params = {
                "omega": g.omega,
                "alpha": g.alpha,
                "beta": g.beta,
                "nu": g.nu,
                "converged": g.converged,
            }
        elif self.name in ("har_log", "har_level"):
            hs = tuple(sorted({1, *horizons}))
            self._har = fit_har(
                self.x, self.r2, end=end - 1, horizons=hs, log=self.name == "har_log", window=spec.fit_window
            )
            self.params = {f"h{h}": [round(c, 8) for c in self._har.coefs[h]] for h in self._har.coefs} | {
                "ratio": self._har.ratio
            }
        elif self.name == "ewma":
            self.params = {"lambda": C.EWMA_LAMBDA}
        elif self.name == "hv20":
            self.params = {"window": 20}
        else:  # pragma: no cover - RiskSpec is checked before
            raise RiskInputError(f"unknown volatility model {self.name!r}")
        self._fit_end = end

    def one_step(self) -> np.ndarray:
        """``v[k]`` for ``k = 0..len(r)``: the variance forecast of return ``k`` (NaN where unknown)."""
        if self.name == "ewma":
            return ewma_variance(self.r2, lam=C.EWMA_LAMBDA)
        if self.name == "hv20":
            return hv_variance(self.r2, window=20)
        if self.name == "garch_t":
            assert self._garch is not None
            return garch_variance(self.r2, self._garch)
        assert self._har is not None
        cum = har_variance(self.x, self._har, (1,))[:, 0]
        out = np.full(len(self.r) + 1, np.nan)
        out[1:] = cum
        return out

    def cumulative(self, v_next: np.ndarray, rows: np.ndarray, lengths: Sequence[int]) -> np.ndarray:
        """Cumulative variance over ``lengths`` sessions from origins whose next-return index is
        ``rows`` (``v_next = v[rows]``). Shape ``(len(rows), len(lengths))``."""
        lengths = tuple(int(n) for n in lengths)
        if self.name == "garch_t":
            assert self._garch is not None
            return garch_cumulative(v_next, self._garch, lengths)
        if self.name in ("har_log", "har_level"):
            assert self._har is not None
            hs = tuple(sorted(self._har.coefs))
            cum = har_variance(self.x, self._har, hs)
            out = np.empty((len(rows), len(lengths)))
            for j, n in enumerate(lengths):
                # the regression of the nearest fitted horizon at or above n, per day, times n
                h = next((h for h in hs if h >= n), hs[-1])
                col = hs.index(h)
                daily = cum[np.maximum(rows - 1, 0), col] / h
                out[:, j] = n * daily
            return out
        return v_next[:, None] * np.asarray(lengths, dtype=np.float64)[None, :]


def _variance_ratio(model: Any, v: np.ndarray, r: np.ndarray, end: int, n: int, spec: RiskSpec) -> float:
    """How much of the predicted ``n``-session variance the ``n``-session return actually had, on
    the stock's own non-earnings returns known at the fit (``end`` of them): ``κ̂ = Σ (Σ r)² / Σ
    predicted``, over the origins of the fit window whose ``n`` returns are known, shrunk towards 1
    as if ``spec.vr_prior`` independent windows had ratio 1 (``κ = (m κ̂ + n0) / (m + n0)``, ``m``
    the number of non-overlapping windows). Below 1 when returns partly reverse over ``n``
    sessions (negative autocorrelation), above 1 when they trend."""
    lo = max(HAR_MONTH, end - spec.fit_window)
    q = np.arange(lo, end - n + 1)
    if len(q) < n:
        return 1.0
    pred = model.cumulative(v[q], q, [n])[:, 0]
    csum = np.concatenate([[0.0], np.cumsum(r)])
    realised = (csum[q + n] - csum[q]) ** 2
    ok = np.isfinite(pred) & (pred > 0)
    if not ok.any():
        return 1.0
    kappa = float(realised[ok].sum() / pred[ok].sum())
    m = ok.sum() / n
    n0 = float(spec.vr_prior or 0.0)
    return (m * kappa + n0) / (m + n0)


def _check_spec(spec: RiskSpec) -> None:
    known = {"ewma", "garch_t", "har_log", "har_level", "hv20"}
    parts = spec.volatility.split("+")
    if not parts or any(p not in known for p in parts):
        raise RiskInputError(
            f"volatility must be one of {sorted(known)} or two joined by '+', got {spec.volatility!r}"
        )
    if spec.shape not in ("fhs", "normal") or spec.aggregation not in ("bootstrap", "normal"):
        raise RiskInputError(f"shape must be fhs|normal and aggregation bootstrap|normal, got {spec}")
    if spec.jump_mode not in ("scaled", "raw"):
        raise RiskInputError(f"jump_mode must be scaled|raw, got {spec.jump_mode!r}")


class _Combined:
    """The mean of the variances of several models (a forecast combination)."""

    def __init__(self, parts: list[_Variance]) -> None:
        self.parts = parts
        self.name = "+".join(p.name for p in parts)

    def fit(self, end: int, spec: RiskSpec, horizons: tuple[int, ...], previous: Any) -> None:
        for i, part in enumerate(self.parts):
            prev = previous.parts[i] if previous is not None else None
            part.fit(end, spec, horizons, prev)

    @property
    def params(self) -> dict[str, Any]:
        return {p.name: p.params for p in self.parts}

    def one_step(self) -> np.ndarray:
        return np.asarray(np.mean([p.one_step() for p in self.parts], axis=0))

    def cumulative(self, v_next: np.ndarray, rows: np.ndarray, lengths: Sequence[int]) -> np.ndarray:
        outs = []
        for p in self.parts:
            own = p.one_step()[rows]
            outs.append(p.cumulative(own, rows, lengths))
        return np.asarray(np.mean(outs, axis=0))


def run_path(
    prepared: PreparedBars,
    *,
    events: Sequence[EarningsEvent] | None,
    origins: np.ndarray,
    horizons: tuple[int, ...],
    spec: RiskSpec,
    sessions: np.ndarray | None = None,
) -> PathForecasts:
    """Forecasts for the bar indices ``origins`` (ascending, each ≥ ``C.MIN_BARS − 1``) of
    ``prepared`` (module docstring). ``events``: the company's reports (None: no calendar
    coverage); ``sessions``: the trading calendar that counts sessions to a future report
    (``datetime64[D]``; None: the NYSE's). Raises :class:`RiskInputError` on a bad spec or origin."""
    _check_spec(spec)
    origins = np.asarray(origins, dtype=np.int64)
    if len(origins) == 0:
        raise RiskInputError("no origin to forecast from")
    if origins[0] < C.MIN_BARS - 1 or origins[-1] >= len(prepared) or np.any(np.diff(origins) <= 0):
        raise RiskInputError(
            f"origins must be ascending session indices from {C.MIN_BARS - 1} to {len(prepared) - 1}"
        )
    horizons = tuple(int(h) for h in horizons)
    n_h = len(horizons)
    max_h = max(horizons)
    dates = prepared.dates
    log_ret = prepared.log_ret
    last = int(origins[-1])
    evs = list(events) if events is not None else []
    ev_days = np.array([e.report_date for e in evs], dtype="datetime64[D]")
    if sessions is None and evs:
        sessions = nyse_sessions()
    mask = (
        earnings_mask(evs, dates[: last + 1]) if (spec.exclude_earnings and evs) else np.zeros(last + 1, bool)
    )
    keep = ~mask
    keep[0] = False
    comp = np.nonzero(keep)[0]  # bars indices of the kept returns
    r = log_ret[comp]
    x = prepared.range_var[comp]
    # K(t): kept returns on or before t; v[K(t)] is the forecast for the next kept return
    k_of = np.searchsorted(comp, np.arange(last + 1), side="right")

    parts = [_Variance(name, r, x) for name in spec.volatility.split("+")]
    model: Any = parts[0] if len(parts) == 1 else _Combined(parts)
    fallback = _Variance("ewma", r, x)
    fallback.fit(0, spec, horizons, None)
    v_fallback = fallback.one_step()

    shapes: list[np.ndarray] = []
    jumps: list[np.ndarray] = [np.zeros(1)]
    fits: list[AnchorFit] = []
    n_o = len(origins)
    sigma_daily = np.empty(n_o)
    scale = np.empty((n_o, n_h))
    shape_id = np.zeros((n_o, n_h), dtype=np.int64)
    jump_id = np.zeros((n_o, n_h), dtype=np.int64)
    jump_scale = np.ones((n_o, n_h))
    fit_of_origin = np.zeros(n_o, dtype=np.int64)
    windows: list[list[list[Upcoming]]] = []

    anchors = list(range(0, n_o, max(spec.refit_every, 1)))
    previous: Any = None
    normal = dist.normal_shape()
    for a_pos, a in enumerate(anchors):
        a_end = anchors[a_pos + 1] if a_pos + 1 < len(anchors) else n_o
        t_anchor = int(origins[a])
        end = int(k_of[t_anchor])  # kept returns known at the anchor
        current: Any = model
        name = spec.volatility
        try:
            if end < spec.min_fit and spec.volatility != "ewma":
                raise ValueError(f"{end} non-earnings returns < {spec.min_fit}")
            model.fit(end, spec, horizons, previous)
            v = model.one_step()
            previous = model
        except ValueError as exc:
            current, name, v = fallback, f"ewma (fallback: {exc})", v_fallback
        # residual pool: the last pool_window kept returns up to the anchor, standardised
        lo = max(1, end - spec.pool_window)
        vv = v[lo:end]
        ok = np.isfinite(vv) & (vv > 0)
        pool = (r[lo:end][ok]) / np.sqrt(vv[ok])
        if len(pool) < 20:
            vv = v_fallback[lo:end]
            pool = r[lo:end] / np.sqrt(vv)
        if spec.center_pool:
            pool = pool - pool.mean()
        shape_ids: dict[int, int] = {}
        vr_cache: dict[int, float] = {}

        def shape_for(n: int, *, _pool: np.ndarray = pool, _ids: dict[int, int] = shape_ids) -> int:
            if n not in _ids:
                unit = spec.multi_scale == "unit" and n > 1
                multi_pool = _pool / float(np.std(_pool)) if unit else _pool
                if n == 1 and spec.shape == "fhs":
                    table = dist.empirical_shape(_pool)
                elif n == 1 or spec.aggregation == "normal":
                    table = normal * (float(np.std(_pool)) if spec.shape == "fhs" and not unit else 1.0)
                else:
                    table = dist.bootstrap_sum_shape(
                        multi_pool, n, draws=spec.bootstrap_draws, seed=spec.seed + n
                    )
                shapes.append(table)
                _ids[n] = len(shapes) - 1
            return _ids[n]

        # earnings moves known at the anchor, and the jump set
        anchor_day = pd.Timestamp(dates[t_anchor]).date()
        moves = past_moves(evs, dates[: t_anchor + 1], log_ret[: t_anchor + 1]) if evs else []
        habit = after_close_habit(moves, log_ret)
        own = moves[-spec.own_moves :]
        scaled = True
        base: np.ndarray = np.empty(0)
        if not evs:
            source = "no earnings calendar coverage"
        elif len(own) >= spec.min_own_moves:
            if spec.jump_mode == "scaled":
                sig_pre = np.sqrt(np.array([v[k_of[m.first - 1]] for m in own]))
                base = np.array([m.log_move for m in own]) / sig_pre
            else:
                base = np.array([m.log_move for m in own])
                scaled = False
            source = f"own: the last {len(own)} reports' moves"
        else:
            pooled = pooled_abs_moves(anchor_day)
            if len(pooled) >= MIN_POOLED:
                base = _compress(pooled, C.POOLED_POINTS)
                source = f"{pooled_description(anchor_day)} (the company has {len(own)} past reports)"
            else:
                source = f"none: {len(own)} own and {len(pooled)} pooled past moves known at as_of"
        base = base[np.isfinite(base)]
        single_id = 0
        if len(base) and spec.add_earnings:
            jumps.append(np.concatenate([base, -base]))
            single_id = len(jumps) - 1
        pair_id = -1
        fits.append(
            AnchorFit(
                index=t_anchor,
                volatility=name,
                params=dict(current.params),
                pool=pool,
                shapes=shape_ids,
                jump_id=single_id,
                jump_source=source,
                own_moves=len(moves),
                after_close_habit=habit if evs else None,
                fit_returns=int(min(end, spec.fit_window)) if name == spec.volatility else end,
                first_fit_index=int(comp[max(0, end - spec.fit_window)]) if end > 0 else 0,
            )
        )
        seg = np.arange(a, a_end)
        t_seg = origins[seg]
        rows = k_of[t_seg]
        v_next = v[rows]
        bad = ~(np.isfinite(v_next) & (v_next > 0))
        if bad.any():
            v_next = np.where(bad, v_fallback[rows], v_next)
        sigma_daily[seg] = np.sqrt(v_next)
        fit_of_origin[seg] = len(fits) - 1
        # events per origin and horizon
        seg_windows: list[list[list[Upcoming]]] = []
        n_events = np.zeros((len(seg), n_h), dtype=np.int64)
        for i, t in enumerate(t_seg):
            origin_day = pd.Timestamp(dates[t]).date()
            ups: list[Upcoming] = []
            if evs and spec.add_earnings:
                # only reports within a year and a half around the origin can matter
                lo_e = int(np.searchsorted(ev_days, np.datetime64(origin_day, "D") - 400))
                hi_e = int(np.searchsorted(ev_days, np.datetime64(origin_day, "D") + 130))
                ups = upcoming(
                    evs[lo_e:hi_e], origin_day, after_habit=habit, max_offset=max_h, sessions=sessions
                )
            per_h = [[u for u in ups if u.offset <= h] for h in horizons]
            seg_windows.append(per_h)
            # projected dates are listed; their jump enters the distribution only with spec.project
            n_events[i] = [sum(1 for u in w if spec.project or u.source == "announced") for w in per_h]
        windows.extend(seg_windows)
        lengths = sorted({max(h - int(n), 1) for h in horizons for n in np.unique(n_events)})
        cum = current.cumulative(v_next, rows, lengths)
        if bad.any():
            cum[bad] = v_fallback[rows][bad][:, None] * np.asarray(lengths, dtype=np.float64)[None, :]
        if spec.vr_prior is not None:
            for j, n in enumerate(lengths):
                if n > 1:
                    if n not in vr_cache:
                        vr_cache[n] = _variance_ratio(current, v, r, end, n, spec)
                    cum[:, j] *= vr_cache[n]
        for k, h in enumerate(horizons):
            n_diff = np.maximum(h - n_events[:, k], 1)
            col = np.searchsorted(lengths, n_diff)
            scale[seg, k] = np.sqrt(cum[np.arange(len(seg)), col])
            for n in np.unique(n_diff):
                shape_id[seg[n_diff == n], k] = shape_for(int(n))
            one = n_events[:, k] == 1
            two = n_events[:, k] >= 2
            jump_id[seg[one], k] = single_id
            if two.any() and single_id:
                if pair_id < 0:
                    single = jumps[single_id]
                    jumps.append(_compress((single[:, None] + single[None, :]).ravel(), 2 * C.POOLED_POINTS))
                    pair_id = len(jumps) - 1
                jump_id[seg[two], k] = pair_id
            if scaled:
                jump_scale[seg, k] = sigma_daily[seg]
    out = PathForecasts(
        horizons=horizons,
        origin_index=origins,
        origin_dates=dates[origins],
        close=prepared.close[origins],
        sigma_daily=sigma_daily,
        scale=scale,
        shape_id=shape_id,
        jump_id=jump_id,
        jump_scale=jump_scale,
        windows=windows,
        shapes=shapes,
        jumps=jumps,
        fits=fits,
        fit_of_origin=fit_of_origin,
        coverage="calendar" if evs else "none",
    )
    return out
