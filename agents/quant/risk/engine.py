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
    PastMove,
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
        self._har_table: np.ndarray | None = None

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
            self._har_table = None
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
        hs, table = self._har_cumulative()
        out = np.full(len(self.r) + 1, np.nan)
        out[1:] = table[:, hs.index(1)]
        return out

    def _har_cumulative(self) -> tuple[tuple[int, ...], np.ndarray]:
        """The fitted HAR's horizons and :func:`har_variance` of the whole series at all of them
        ``(len(x), len(horizons))``, computed once per fit (read-only): ``one_step`` and every
        ``cumulative`` (the variance ratio's too) read it. Each column is computed on its own,
        so it holds the same floats as a call for that horizon alone."""
        assert self._har is not None
        hs = tuple(sorted(self._har.coefs))
        if self._har_table is None:
            self._har_table = har_variance(self.x, self._har, hs)
            self._har_table.flags.writeable = False
        return hs, self._har_table

    def cumulative(self, v_next: np.ndarray, rows: np.ndarray, lengths: Sequence[int]) -> np.ndarray:
        """Cumulative variance over ``lengths`` sessions from origins whose next-return index is
        ``rows`` (``v_next = v[rows]``). Shape ``(len(rows), len(lengths))``."""
        lengths = tuple(int(n) for n in lengths)
        if self.name == "garch_t":
            assert self._garch is not None
            return garch_cumulative(v_next, self._garch, lengths)
        if self.name in ("har_log", "har_level"):
            hs, cum = self._har_cumulative()
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


def _checked_origins(prepared: PreparedBars, origins: np.ndarray) -> np.ndarray:
    """``origins`` as ``int64`` bar indices ``(n_origins,)``. Raises :class:`RiskInputError` when
    there is none or when they are not ascending indices from ``C.MIN_BARS − 1`` to the last bar."""
    origins = np.asarray(origins, dtype=np.int64)
    if len(origins) == 0:
        raise RiskInputError("no origin to forecast from")
    if origins[0] < C.MIN_BARS - 1 or origins[-1] >= len(prepared) or np.any(np.diff(origins) <= 0):
        raise RiskInputError(
            f"origins must be ascending session indices from {C.MIN_BARS - 1} to {len(prepared) - 1}"
        )
    return origins


@dataclass(frozen=True)
class _PathInputs:
    """What every anchor of :func:`run_path` reads (nothing after the last origin ``last``).

    ``dates``/``log_ret``: the bars' dates and log returns ``(n_bars,)``; ``evs``: the company's
    reports (empty: no calendar coverage), ``ev_days`` their dates ``(n_events,)`` as
    ``datetime64[D]``, ``sessions`` the calendar counting sessions to them; ``comp``: bars indices
    of the kept returns (not the first bar, not earnings reactions when the spec excludes them),
    ``r``/``x`` those log returns and range variances ``(n_kept,)``; ``k_of[t]``: the number of
    kept returns on or before bar ``t`` ``(last + 1,)``, so ``v[k_of[t]]`` is the variance forecast
    of the next kept return; ``v_fallback``: the EWMA fallback's one-step variances
    ``(n_kept + 1,)``; ``normal``: the normal shape table."""

    dates: np.ndarray
    log_ret: np.ndarray
    evs: list[EarningsEvent]
    ev_days: np.ndarray
    sessions: np.ndarray | None
    comp: np.ndarray
    r: np.ndarray
    x: np.ndarray
    k_of: np.ndarray
    v_fallback: np.ndarray
    normal: np.ndarray
    horizons: tuple[int, ...]
    spec: RiskSpec


def _path_inputs(
    prepared: PreparedBars,
    events: Sequence[EarningsEvent] | None,
    last: int,
    horizons: tuple[int, ...],
    spec: RiskSpec,
    sessions: np.ndarray | None,
) -> tuple[_PathInputs, _Variance]:
    """The :class:`_PathInputs` of bars ``0..last`` of ``prepared`` and the fitted EWMA fallback
    (:func:`run_path` has the arguments). The NYSE calendar stands in for ``sessions`` when there
    are reports and no calendar was given. Raises nothing of its own."""
    dates = prepared.dates
    log_ret = prepared.log_ret
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
    fallback = _Variance("ewma", r, x)
    fallback.fit(0, spec, horizons, None)
    inputs = _PathInputs(
        dates=dates,
        log_ret=log_ret,
        evs=evs,
        ev_days=ev_days,
        sessions=sessions,
        comp=comp,
        r=r,
        x=x,
        k_of=k_of,
        v_fallback=fallback.one_step(),
        normal=dist.normal_shape(),
        horizons=horizons,
        spec=spec,
    )
    return inputs, fallback


@dataclass
class _PathTables:
    """The outputs :func:`run_path` fills anchor by anchor (the fields of :class:`PathForecasts`
    of the same names): per origin ``sigma_daily`` and ``fit_of_origin`` ``(n_origins,)``, per
    origin and horizon ``scale``, ``shape_id``, ``jump_id``, ``jump_scale`` ``(n_origins,
    n_horizons)``, the windows of reports, and the tables the ids point into, appended in the
    order they are first needed (``jumps[0]``: no report)."""

    sigma_daily: np.ndarray
    scale: np.ndarray
    shape_id: np.ndarray
    jump_id: np.ndarray
    jump_scale: np.ndarray
    fit_of_origin: np.ndarray
    windows: list[list[list[Upcoming]]]
    shapes: list[np.ndarray]
    jumps: list[np.ndarray]
    fits: list[AnchorFit]

    @classmethod
    def empty(cls, n_o: int, n_h: int) -> _PathTables:
        """Tables for ``n_o`` origins and ``n_h`` horizons, before any anchor (ids 0, jump scales 1)."""
        return cls(
            sigma_daily=np.empty(n_o),
            scale=np.empty((n_o, n_h)),
            shape_id=np.zeros((n_o, n_h), dtype=np.int64),
            jump_id=np.zeros((n_o, n_h), dtype=np.int64),
            jump_scale=np.ones((n_o, n_h)),
            fit_of_origin=np.zeros(n_o, dtype=np.int64),
            windows=[],
            shapes=[],
            jumps=[np.zeros(1)],
            fits=[],
        )

    def shape_for(self, n: int, pool: np.ndarray, ids: dict[int, int], inputs: _PathInputs) -> int:
        """The id in :attr:`shapes` of the shape of an ``n``-session diffusion from the residual
        ``pool`` of one anchor, whose ids so far are ``ids`` (``{sessions: id}``, updated): the
        empirical one-session shape (FHS), the normal one (times the pool's standard deviation
        when the FHS pool is not rescaled), or the bootstrap of ``n``-draw sums seeded with
        ``spec.seed + n``; built and appended on first use."""
        spec = inputs.spec
        if n not in ids:
            unit = spec.multi_scale == "unit" and n > 1
            multi_pool = pool / float(np.std(pool)) if unit else pool
            if n == 1 and spec.shape == "fhs":
                table = dist.empirical_shape(pool)
            elif n == 1 or spec.aggregation == "normal":
                table = inputs.normal * (float(np.std(pool)) if spec.shape == "fhs" and not unit else 1.0)
            else:
                table = dist.bootstrap_sum_shape(
                    multi_pool, n, draws=spec.bootstrap_draws, seed=spec.seed + n
                )
            self.shapes.append(table)
            ids[n] = len(self.shapes) - 1
        return ids[n]


def _fit_anchor(
    model: Any, fallback: _Variance, inputs: _PathInputs, end: int, previous: Any
) -> tuple[Any, str, np.ndarray, Any]:
    """Refit ``model`` on the first ``end`` kept returns (``previous``: the last model that fitted,
    its parameters the start of GARCH's search). Returns ``(the model in use, its name, its
    one-step variances v (n_kept + 1,), the new previous)``; when the fit raises ValueError, or
    there are fewer than ``spec.min_fit`` returns for a model other than EWMA, the EWMA
    ``fallback`` is used and named with the reason (``previous`` unchanged)."""
    spec = inputs.spec
    try:
        if end < spec.min_fit and spec.volatility != "ewma":
            raise ValueError(f"{end} non-earnings returns < {spec.min_fit}")
        model.fit(end, spec, inputs.horizons, previous)
        return model, spec.volatility, model.one_step(), model
    except ValueError as exc:
        return fallback, f"ewma (fallback: {exc})", inputs.v_fallback, previous


def _residual_pool(inputs: _PathInputs, v: np.ndarray, end: int) -> np.ndarray:
    """The FHS pool at an anchor with ``end`` kept returns: the last ``spec.pool_window`` kept
    returns (log, per session) divided by the square root of their variance forecasts ``v``
    (those with a finite positive forecast; the EWMA fallback's for all when fewer than 20 are
    left), centred when ``spec.center_pool``. Returns the standardised residuals ``(n,)``."""
    spec, r = inputs.spec, inputs.r
    lo = max(1, end - spec.pool_window)
    vv = v[lo:end]
    ok = np.isfinite(vv) & (vv > 0)
    pool = (r[lo:end][ok]) / np.sqrt(vv[ok])
    if len(pool) < 20:
        vv = inputs.v_fallback[lo:end]
        pool = r[lo:end] / np.sqrt(vv)
    if spec.center_pool:
        pool = pool - pool.mean()
    return pool


@dataclass(frozen=True)
class _JumpBase:
    """The earnings moves known at an anchor: ``moves`` (the company's past reactions), the
    after-close ``habit``, the jump set's half ``base`` ``(n,)`` (the set is ``±base``) in units of
    the σ forecast before each move when ``scaled`` (else raw log moves), and where it came from."""

    moves: list[PastMove]
    habit: bool
    base: np.ndarray
    scaled: bool
    source: str


def _jump_base(inputs: _PathInputs, t_anchor: int, v: np.ndarray) -> _JumpBase:
    """The :class:`_JumpBase` at bar ``t_anchor`` (``v``: the one-step variances of the model in
    use): the last ``spec.own_moves`` own moves when there are at least ``spec.min_own_moves``
    (scaled by ``√v`` before each when ``spec.jump_mode`` is ``scaled``), else the pooled table of
    :mod:`agents.quant.risk.pooled` compressed to ``C.POOLED_POINTS`` values when it has at least
    ``MIN_POOLED`` moves, else none. Non-finite values are dropped."""
    spec, evs, dates, log_ret = inputs.spec, inputs.evs, inputs.dates, inputs.log_ret
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
            sig_pre = np.sqrt(np.array([v[inputs.k_of[m.first - 1]] for m in own]))
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
    return _JumpBase(moves=moves, habit=habit, base=base[np.isfinite(base)], scaled=scaled, source=source)


def _segment_windows(
    inputs: _PathInputs, t_seg: np.ndarray, habit: bool
) -> tuple[list[list[list[Upcoming]]], np.ndarray]:
    """The reports in each horizon's window from the origins at bars ``t_seg`` ``(n_seg,)``:
    ``(windows[i][k]: the reports within horizons[k] sessions, counts (n_seg, n_horizons))``,
    the counts of those whose jump enters the distribution (announced ones; projected ones too
    with ``spec.project``). No reports without a calendar or with ``spec.add_earnings`` off."""
    spec, evs, horizons = inputs.spec, inputs.evs, inputs.horizons
    seg_windows: list[list[list[Upcoming]]] = []
    n_events = np.zeros((len(t_seg), len(horizons)), dtype=np.int64)
    for i, t in enumerate(t_seg):
        origin_day = pd.Timestamp(inputs.dates[t]).date()
        ups: list[Upcoming] = []
        if evs and spec.add_earnings:
            # only reports within a year and a half around the origin can matter
            lo_e = int(np.searchsorted(inputs.ev_days, np.datetime64(origin_day, "D") - 400))
            hi_e = int(np.searchsorted(inputs.ev_days, np.datetime64(origin_day, "D") + 130))
            ups = upcoming(
                evs[lo_e:hi_e],
                origin_day,
                after_habit=habit,
                max_offset=max(horizons),
                sessions=inputs.sessions,
            )
        per_h = [[u for u in ups if u.offset <= h] for h in horizons]
        seg_windows.append(per_h)
        # projected dates are listed; their jump enters the distribution only with spec.project
        n_events[i] = [sum(1 for u in w if spec.project or u.source == "announced") for w in per_h]
    return seg_windows, n_events


def _segment_cumulative(
    inputs: _PathInputs,
    current: Any,
    v: np.ndarray,
    end: int,
    rows: np.ndarray,
    v_next: np.ndarray,
    bad: np.ndarray,
    lengths: list[int],
) -> np.ndarray:
    """Cumulative diffusion variances (log-return², ``(n_seg, len(lengths))``) over ``lengths``
    sessions from origins whose next kept return is ``rows`` (``v_next``: its variance forecast,
    with the EWMA fallback's where ``bad``), by the model in use ``current`` fitted on ``end``
    kept returns: the fallback's ``v × n`` on the ``bad`` rows, and times the variance ratio
    (:func:`_variance_ratio`) of each length over one when ``spec.vr_prior`` is set."""
    spec = inputs.spec
    cum = current.cumulative(v_next, rows, lengths)
    if bad.any():
        cum[bad] = inputs.v_fallback[rows][bad][:, None] * np.asarray(lengths, dtype=np.float64)[None, :]
    if spec.vr_prior is not None:
        vr_cache: dict[int, float] = {}
        for j, n in enumerate(lengths):
            if n > 1:
                if n not in vr_cache:
                    vr_cache[n] = _variance_ratio(current, v, inputs.r, end, n, spec)
                cum[:, j] *= vr_cache[n]
    return cum


def _fill_horizons(
    tables: _PathTables,
    inputs: _PathInputs,
    seg: np.ndarray,
    n_events: np.ndarray,
    lengths: list[int],
    cum: np.ndarray,
    shape_of: Any,
    single_id: int,
    scaled: bool,
) -> None:
    """Fill ``scale``, ``shape_id``, ``jump_id`` and ``jump_scale`` of the origins at positions
    ``seg`` ``(n_seg,)`` for every horizon: a horizon ``h`` with ``e`` reports in its window has
    ``max(h − e, 1)`` sessions of diffusion (``√`` of its column of ``cum``, columns by
    ``lengths``) and the jump set ``single_id`` (one report) or the compressed pairwise sums of
    it (two or more; appended on first use); ``shape_of(n)`` is the id of the ``n``-session
    shape; jump scales are the daily σ when the jumps are ``scaled``."""
    pair_id = -1
    for k, h in enumerate(inputs.horizons):
        n_diff = np.maximum(h - n_events[:, k], 1)
        col = np.searchsorted(lengths, n_diff)
        tables.scale[seg, k] = np.sqrt(cum[np.arange(len(seg)), col])
        for n in np.unique(n_diff):
            tables.shape_id[seg[n_diff == n], k] = shape_of(int(n))
        one = n_events[:, k] == 1
        two = n_events[:, k] >= 2
        tables.jump_id[seg[one], k] = single_id
        if two.any() and single_id:
            if pair_id < 0:
                single = tables.jumps[single_id]
                tables.jumps.append(
                    _compress((single[:, None] + single[None, :]).ravel(), 2 * C.POOLED_POINTS)
                )
                pair_id = len(tables.jumps) - 1
            tables.jump_id[seg[two], k] = pair_id
        if scaled:
            tables.jump_scale[seg, k] = tables.sigma_daily[seg]


def _run_anchor(
    tables: _PathTables,
    inputs: _PathInputs,
    origins: np.ndarray,
    seg: np.ndarray,
    fitted: tuple[Any, str, np.ndarray],
    end: int,
) -> None:
    """One anchor of :func:`run_path`: the refit at ``origins[seg[0]]`` (``fitted``: the model in
    use, its name and one-step variances from :func:`_fit_anchor`, on ``end`` kept returns) and
    the forecasts of the origins at positions ``seg`` ``(n_seg,)`` filtered with it until the next
    refit; appends the :class:`AnchorFit` and fills ``tables``. Raises nothing of its own."""
    current, name, v = fitted
    spec, k_of = inputs.spec, inputs.k_of
    t_anchor = int(origins[seg[0]])
    pool = _residual_pool(inputs, v, end)
    shape_ids: dict[int, int] = {}
    jump = _jump_base(inputs, t_anchor, v)
    single_id = 0
    if len(jump.base) and spec.add_earnings:
        tables.jumps.append(np.concatenate([jump.base, -jump.base]))
        single_id = len(tables.jumps) - 1
    tables.fits.append(
        AnchorFit(
            index=t_anchor,
            volatility=name,
            params=dict(current.params),
            pool=pool,
            shapes=shape_ids,
            jump_id=single_id,
            jump_source=jump.source,
            own_moves=len(jump.moves),
            after_close_habit=jump.habit if inputs.evs else None,
            fit_returns=int(min(end, spec.fit_window)) if name == spec.volatility else end,
            first_fit_index=int(inputs.comp[max(0, end - spec.fit_window)]) if end > 0 else 0,
        )
    )
    t_seg = origins[seg]
    rows = k_of[t_seg]
    v_next = v[rows]
    bad = ~(np.isfinite(v_next) & (v_next > 0))
    if bad.any():
        v_next = np.where(bad, inputs.v_fallback[rows], v_next)
    tables.sigma_daily[seg] = np.sqrt(v_next)
    tables.fit_of_origin[seg] = len(tables.fits) - 1
    seg_windows, n_events = _segment_windows(inputs, t_seg, jump.habit)
    tables.windows.extend(seg_windows)
    lengths = sorted({max(h - int(n), 1) for h in inputs.horizons for n in np.unique(n_events)})
    cum = _segment_cumulative(inputs, current, v, end, rows, v_next, bad, lengths)

    def shape_of(n: int) -> int:
        return tables.shape_for(n, pool, shape_ids, inputs)

    _fill_horizons(tables, inputs, seg, n_events, lengths, cum, shape_of, single_id, jump.scaled)


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
    origins = _checked_origins(prepared, origins)
    horizons = tuple(int(h) for h in horizons)
    inputs, fallback = _path_inputs(prepared, events, int(origins[-1]), horizons, spec, sessions)
    parts = [_Variance(name, inputs.r, inputs.x) for name in spec.volatility.split("+")]
    model: Any = parts[0] if len(parts) == 1 else _Combined(parts)
    n_o = len(origins)
    tables = _PathTables.empty(n_o, len(horizons))
    anchors = list(range(0, n_o, max(spec.refit_every, 1)))
    previous: Any = None
    for a_pos, a in enumerate(anchors):
        a_end = anchors[a_pos + 1] if a_pos + 1 < len(anchors) else n_o
        end = int(inputs.k_of[int(origins[a])])  # kept returns known at the anchor
        current, name, v, previous = _fit_anchor(model, fallback, inputs, end, previous)
        _run_anchor(tables, inputs, origins, np.arange(a, a_end), (current, name, v), end)
    return PathForecasts(
        horizons=horizons,
        origin_index=origins,
        origin_dates=inputs.dates[origins],
        close=prepared.close[origins],
        sigma_daily=tables.sigma_daily,
        scale=tables.scale,
        shape_id=tables.shape_id,
        jump_id=tables.jump_id,
        jump_scale=tables.jump_scale,
        windows=tables.windows,
        shapes=tables.shapes,
        jumps=tables.jumps,
        fits=tables.fits,
        fit_of_origin=tables.fit_of_origin,
        coverage="calendar" if inputs.evs else "none",
    )
