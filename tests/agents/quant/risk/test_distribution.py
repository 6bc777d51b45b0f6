"""The forecast distribution's arithmetic against closed forms (normal, lognormal) and against its
own definition (a CDF and its quantile function invert each other)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from agents.quant.risk import distribution as dist


def test_grid_holds_every_reported_level_exactly() -> None:
    for level in dist.QUANTILE_LEVELS:
        assert np.any(np.isclose(dist.PROB_GRID, level, atol=1e-12))
    assert dist.PROB_GRID[0] == pytest.approx(0.0005, abs=1e-5)
    assert np.all(np.diff(dist.PROB_GRID) > 0)


def test_empirical_shape_uses_weibull_ranks() -> None:
    sample = np.arange(1.0, 100.0)  # 99 values: the p-quantile sits at rank p * 100
    shape = dist.empirical_shape(sample)
    at = dict(zip(np.round(dist.PROB_GRID, 6), shape, strict=True))
    assert at[0.01] == pytest.approx(1.0)
    assert at[0.05] == pytest.approx(5.0)
    assert at[0.5] == pytest.approx(50.0)
    assert at[0.99] == pytest.approx(99.0)


def _bits(values: np.ndarray) -> list[int]:
    return np.asarray(values, dtype=np.float64).view(np.int64).tolist()


@pytest.mark.parametrize("n", [1, 2, 3, 7, 250, 999, 1000, 4000])
def test_weibull_quantiles_are_numpys_to_the_last_bit(n: int) -> None:
    # the forecast's floats must not move: the fast path gives numpy's own bits, ties included
    rng = np.random.default_rng(n)
    samples = [
        rng.standard_t(4, n) * 0.013,
        np.round(rng.standard_normal(n), 1),  # many ties
        np.full(n, 0.25),
        np.concatenate([np.zeros(n // 2), np.abs(rng.standard_normal(n - n // 2))]),
    ]
    grids = [dist.PROB_GRID, np.array([0.0, 1e-9, 0.5, 1 - 1e-9, 1.0])]
    for sample in samples:
        for probs in grids:
            expected = np.quantile(sample, probs, method="weibull")
            assert _bits(dist.weibull_quantiles(sample, probs)) == _bits(expected)
    assert _bits(dist.empirical_shape(samples[0])) == _bits(
        np.quantile(samples[0], dist.PROB_GRID, method="weibull")
    )


def test_weibull_quantiles_with_both_zeros_or_a_nan_are_numpys() -> None:
    # -0.0 == 0.0: sorted and partitioned samples may hold them in other places (numpy decides)
    signed = np.array([0.0, -0.0, 1.0, -1.0, 0.0, -0.0, 2.0] * 40)
    assert _bits(dist.weibull_quantiles(signed, dist.PROB_GRID)) == _bits(
        np.quantile(signed, dist.PROB_GRID, method="weibull")
    )
    with_nan = np.array([0.1, np.nan, -0.2, 0.3])
    assert np.isnan(dist.weibull_quantiles(with_nan, dist.PROB_GRID)).all()
    assert np.isnan(np.quantile(with_nan, dist.PROB_GRID, method="weibull")).all()


def test_normal_quantiles_and_cdf_without_jumps() -> None:
    s = 0.02
    shape = dist.normal_shape()
    q = dist.quantile(np.array([0.025, 0.5, 0.975]), scale=s, shape=shape, jumps=[0.0])
    assert q == pytest.approx([-1.959964 * s, 0.0, 1.959964 * s], abs=1e-7)
    assert dist.cdf(-1.959964 * s, scale=s, shape=shape, jumps=[0.0])[0] == pytest.approx(0.025, abs=2e-4)


def test_simple_return_moments_match_the_lognormal() -> None:
    s = 0.1
    mean, std = dist.simple_moments(scale=s, shape=dist.normal_shape(), jumps=[0.0])
    # X ~ N(0, s²): E[e^X] = e^{s²/2}; Var[e^X] = (e^{s²} − 1) e^{s²}
    assert mean == pytest.approx(math.exp(s * s / 2) - 1, rel=2e-3)
    assert std == pytest.approx(math.sqrt((math.exp(s * s) - 1) * math.exp(s * s)), rel=5e-3)


def test_expected_shortfall_matches_the_lognormal_closed_form() -> None:
    s, level = 0.05, 0.975
    alpha = 1 - level
    # E[e^X | X <= q_a] = e^{s²/2} Φ(z_a − s) / a for X ~ N(0, s²)
    closed = 1 - math.exp(s * s / 2) * stats.norm.cdf(stats.norm.ppf(alpha) - s) / alpha
    got = dist.expected_shortfall(level, scale=s, shape=dist.normal_shape(), jumps=[0.0])
    assert got == pytest.approx(closed, rel=2e-3)


def test_mixture_quantile_inverts_the_mixture_cdf() -> None:
    shape = dist.normal_shape()
    jumps = np.array([-0.08, -0.03, 0.03, 0.08])
    ps = np.array(dist.QUANTILE_LEVELS)
    q = dist.quantile(ps, scale=0.02, shape=shape, jumps=jumps)
    assert np.all(np.diff(q) > 0)
    assert dist.cdf(q, scale=0.02, shape=shape, jumps=jumps) == pytest.approx(ps, abs=2e-3)
    # an equal mixture of N(±j, s²): its CDF at 0 is 1/2 by symmetry
    assert dist.cdf(0.0, scale=0.02, shape=shape, jumps=jumps)[0] == pytest.approx(0.5, abs=1e-9)


def test_mixture_cdf_equals_the_mean_of_shifted_normals() -> None:
    jumps = np.array([-0.05, 0.01, 0.07])
    x = np.array([-0.06, -0.01, 0.02, 0.09])
    expected = np.mean([stats.norm.cdf((x - j) / 0.03) for j in jumps], axis=0)
    got = dist.cdf(x, scale=0.03, shape=dist.normal_shape(), jumps=jumps)
    assert got == pytest.approx(expected, abs=2e-3)


def test_vectorised_rows_give_the_same_numbers_as_one_at_a_time() -> None:
    shape = dist.normal_shape()
    jumps = np.array([-1.5, 2.0, 4.0])
    scales = np.array([0.01, 0.02, 0.05])
    jump_scale = np.array([0.01, 0.015, 0.02])
    many = dist.mixture_quantile([0.05, 0.5], scale=scales, shape=shape, jumps=jumps, jump_scale=jump_scale)
    for i in range(3):
        one = dist.quantile([0.05, 0.5], scale=float(scales[i]), shape=shape, jumps=jumps * jump_scale[i])
        assert many[i] == pytest.approx(one, rel=1e-12)
    _, std_many = dist.mixture_moments(scale=scales, shape=shape, jumps=jumps, jump_scale=jump_scale)
    assert std_many[1] == pytest.approx(
        dist.simple_moments(scale=0.02, shape=shape, jumps=list(jumps * 0.015))[1], rel=1e-12
    )


def test_bootstrap_sum_shape_is_deterministic_and_tends_to_normal() -> None:
    pool = stats.t.ppf(np.linspace(0.002, 0.998, 250), df=4) / math.sqrt(2)  # fat-tailed, var ≈ 1
    a = dist.bootstrap_sum_shape(pool, 20, draws=4000, seed=7)
    b = dist.bootstrap_sum_shape(pool, 20, draws=4000, seed=7)
    assert np.array_equal(a, b)
    one = dist.bootstrap_sum_shape(pool, 1, draws=4000, seed=7)
    at_99 = int(np.argmin(np.abs(dist.PROB_GRID - 0.99)))
    # summing 20 draws thins the tails towards the normal's 2.326 at 99 %
    assert abs(a[at_99] / np.std(pool) - 2.326) < abs(one[at_99] / np.std(pool) - 2.326)


def test_bootstrap_draws_kept_across_pools_give_each_pool_its_own_sums() -> None:
    """The kept draws depend on (pool length, sessions, draws, seed) only: a second pool of the
    same length gets the sums of its own values over the same seeded draws, and nobody can
    change the kept draws in place."""
    rng = np.random.default_rng(3)
    first, second = rng.standard_normal(250), rng.standard_normal(250) * 2.0
    dist.bootstrap_sum_shape(first, 5, draws=1000, seed=11)  # fills the kept draws
    got = dist.bootstrap_sum_shape(second, 5, draws=1000, seed=11)
    idx = np.random.default_rng(11).integers(0, 250, size=(1000, 5))
    expected = np.quantile(second[idx].sum(axis=1) / np.sqrt(5), dist.PROB_GRID, method="weibull")
    assert np.array_equal(got, expected)
    kept = dist.bootstrap_indices(250, 5, draws=1000, seed=11)
    with pytest.raises(ValueError, match="read-only"):
        kept[0, 0] = 1
    # another length draws its own indices (none may point past the shorter pool)
    short = dist.bootstrap_indices(40, 5, draws=1000, seed=11)
    assert short.max() < 40


def test_lowest_quantiles_do_not_depend_on_the_last_bit_of_the_scale() -> None:
    """The inversion grid starts on the lowest reachable value, where the lowest jump's
    component steps from 0 to PROB_GRID[0]: a scale one ulp apart (what numpy's AVX-512 and
    AVX2 kernels give for the same forecast) used to put that point on either side of the
    step and move the lowest quantiles by a fraction of a grid step (ES by ~1e-5 of itself,
    cents in the report). Neighbouring scales must give neighbouring quantiles."""
    shape = dist.normal_shape()
    jumps = np.array([-0.3, -0.1, 0.1, 0.3])
    tiny = np.array([1e-5, 3e-5, 1e-4])  # below the lowest jump's first table probability / 4
    base = 0.05
    below, above = np.nextafter(base, 0.0), np.nextafter(base, 1.0)
    results = [dist.quantile(tiny, scale=s, shape=shape, jumps=jumps) for s in (below, base, above)]
    for got in results[1:]:
        assert got == pytest.approx(results[0], rel=1e-12, abs=1e-12)
    es = [dist.expected_shortfall(0.975, scale=s, shape=shape, jumps=jumps) for s in (below, base, above)]
    assert es[1] == pytest.approx(es[0], rel=1e-12) and es[2] == pytest.approx(es[0], rel=1e-12)
    # the grid's ends carry the whole mass: quantiles stay inside the reachable range
    lo = jumps.min() + base * shape[0]
    assert np.all(results[1] >= lo)
