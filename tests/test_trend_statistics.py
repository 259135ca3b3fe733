"""The trend's power statistics (trend_statistics.py) in `compare --trend`'s report, on synthetic seeds,
against numpy's and scipy's own fits: the smallest slope detectable at 80% power from the pooled
least-squares fit, and the weighted least-squares slope over the size means with its interval."""

import math

import numpy as np
from scipy import stats

from lit_attention.scaling.trend import trend_section
from lit_attention.stats.trend_statistics import detectable_slope, weighted_slope

# Three sizes over three doublings, six seeds each: the middle size's seeds scatter ten times as much as
# the others', so weighting by each mean's variance moves the slope away from the pooled one.
NOISE = [0.012, -0.007, 0.004, -0.015, 0.009, -0.003]
SIZES = {1000: (0.00, 1.0), 2000: (0.08, 10.0), 8000: (0.05, 1.0)}  # params: (mean difference, noise scale)
SEEDS = {
    params: {seed: mean + scale * NOISE[(seed + k) % 6] for seed in range(6)}
    for k, (params, (mean, scale)) in enumerate(SIZES.items())
}


def power_row() -> tuple[str, list[str]]:
    text = trend_section({"optimized": [(p, SEEDS[p]) for p in (8000, 1000, 2000)]}, "standard", "test/loss")
    section = text.split("### What could these sizes have detected?")[1]
    return section, [cell.strip() for cell in section.split("| optimized |")[1].split("\n")[0].split("|")]


def test_the_detectable_slope_is_t_quantiles_times_numpys_standard_error_and_has_80_percent_power():
    section, row = power_row()
    x = [math.log2(p) for p in SEEDS for _ in range(6)]
    y = [v for p in SEEDS for v in SEEDS[p].values()]
    _, covariance = np.polyfit(x, y, 1, cov=True)  # scaled by the residual variance: the OLS standard error
    df = len(x) - 2
    expected = (stats.t.ppf(0.975, df) + stats.t.ppf(0.80, df)) * math.sqrt(covariance[0, 0])
    assert row[:3] == ["3", "3.0", f"{expected:.4f}"]
    assert "(t_0.975,df + t_0.80,df) × SE(slope)" in section
    # What the number means: a true slope of that size gives the two-sided 5% t-test about 80% power
    # (the noncentral t; the formula neglects the far tail and the noncentrality's skew).
    critical = stats.t.ppf(0.975, df)
    power = stats.nct.sf(critical, df, expected / math.sqrt(covariance[0, 0])) + stats.nct.cdf(
        -critical, df, expected / math.sqrt(covariance[0, 0])
    )
    assert abs(power - 0.80) < 0.01


def test_the_weighted_slope_is_numpys_inverse_variance_fit_of_the_size_means_with_a_normal_interval():
    _, row = power_row()
    x = [math.log2(p) for p in SEEDS]
    means = [np.mean(list(SEEDS[p].values())) for p in SEEDS]
    variances = [np.var(list(SEEDS[p].values()), ddof=1) / 6 for p in SEEDS]
    # polyfit weights the residuals (w = 1/sigma); cov="unscaled" is the covariance with the weights known.
    (slope, _), covariance = np.polyfit(x, means, 1, w=[1 / math.sqrt(v) for v in variances], cov="unscaled")
    half = stats.norm.ppf(0.975) * math.sqrt(covariance[0, 0])
    assert row[3] == f"{slope:+.4f}" and row[4] == f"[{slope - half:+.4f}, {slope + half:+.4f}]"
    # The noisy middle size counts for little: weighted, the slope is about the ends' (0.05 over 3
    # doublings), away from the pooled fit's, which the middle's +0.08 pulls down.
    pooled = np.polyfit([math.log2(p) for p in SEEDS for _ in range(6)], [v for p in SEEDS for v in SEEDS[p].values()], 1)[0]
    assert abs(slope - 0.05 / 3) < 0.001 and abs(pooled - slope) > 0.003


def test_the_statistics_refuse_what_they_cannot_compute():
    assert weighted_slope([1.0, 1.0], [0.1, 0.2], [0.01, 0.01]) is None  # one x
    assert weighted_slope([1.0, 2.0], [0.1, 0.2], [0.01, 0.0]) is None  # a size whose seeds all agree
    assert detectable_slope(0.0, 10) == 0.0
