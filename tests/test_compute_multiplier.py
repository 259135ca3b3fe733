"""stats/compute_multiplier.py: the compute a baseline needs to reach a variant's loss, over the variant's own.
Its pieces against independent references (scikit-learn's isotonic regression, a curve linear in log C that
the monotone cubic must reproduce), censoring at both ends, and planted multipliers: cards drawn from a known
loss curve with seed noise, whose 95% intervals must hold the planted m in at least 90% of 200 cards."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lit_attention.stats.compute_multiplier import compute_multiplier, cost_to_reach, non_increasing, shown

COSTS = np.array([1.0, 2.0, 4.0, 8.0])  # a ladder of 4 budgets over 8x, as protocol v1's
REFERENCE = 2.0  # the variant's budget C_0


def curve(cost):
    """A loss curve of the usual shape, L = 1.5 + 2 C^-0.3: convex in log C, so that straight lines between
    the budgets would read a loss between them at too high a cost."""
    return 1.5 + 2.0 * np.asarray(cost, dtype=float) ** -0.3


@pytest.mark.slow  # imports scikit-learn (seconds)
def test_the_non_increasing_fit_is_scikit_learns_isotonic_regression():
    from sklearn.isotonic import IsotonicRegression

    rng = np.random.default_rng(0)
    rows = rng.normal(size=(50, 6)).cumsum(axis=1) * -0.3 + rng.normal(scale=0.5, size=(50, 6))
    mine = non_increasing(rows)
    for row, fitted in zip(rows, mine):
        theirs = IsotonicRegression(increasing=False).fit_transform(np.arange(6), row)
        np.testing.assert_allclose(fitted, theirs, atol=1e-12)


def test_the_reading_keeps_the_budgets_and_a_curve_linear_in_log_cost_and_censors_outside():
    linear = 3.0 - 0.25 * np.log(COSTS)  # the monotone cubic through points on a line is that line
    wanted = np.array([1.0, 2.0, 8.0, 1.5, 3.0, 5.5])
    costs, sides = cost_to_reach(3.0 - 0.25 * np.log(wanted), COSTS, np.tile(linear, (len(wanted), 1)))
    np.testing.assert_allclose(costs, wanted, rtol=1e-9)
    assert sides.tolist() == [0] * 6
    # Worse than the smallest budget, better than the largest: the end of the range and its side, not a guess.
    costs, sides = cost_to_reach(np.array([3.1, 2.0]), COSTS, np.tile(linear, (2, 1)))
    assert costs.tolist() == [1.0, 8.0] and sides.tolist() == [-1, 1]
    # A flat stretch (after the monotone fit): the smallest cost that reaches the loss.
    flat = np.array([[3.0, 2.5, 2.5, 2.0]])
    assert cost_to_reach(np.array([2.5]), COSTS, flat)[0].tolist() == [2.0]
    # On the convex curve the cubic reads a loss between two budgets within 0.1% of its true cost (a straight
    # line in log C reads f(2.8) at 2.85).
    costs, _ = cost_to_reach(curve([2.8, 1.3, 7.0]), COSTS, np.tile(curve(COSTS), (3, 1)))
    np.testing.assert_allclose(costs, [2.8, 1.3, 7.0], rtol=2e-3)


def planted(rng, seeds: int, m: float, items: int = 0):
    """One card's numbers: the ladder and the variant on the same seeds, each seed shifting every run it
    starts (its initialisation and data order) plus noise of each run's own; the variant reaches the loss
    the curve has at m times its own budget."""
    shared = rng.normal(0, 0.02, seeds)
    if items:
        item = rng.normal(0, 0.3, items)  # some test items are harder than others, for every model
        ladder = curve(COSTS)[:, None, None] + shared[None, :, None] + item + rng.normal(0, 0.05, (len(COSTS), seeds, items))
        variant = curve(m * REFERENCE) + shared[:, None] + item + rng.normal(0, 0.05, (seeds, items))
        return ladder, variant
    ladder = curve(COSTS)[:, None] + shared + rng.normal(0, 0.02, (len(COSTS), seeds))
    return ladder, curve(m * REFERENCE) + shared + rng.normal(0, 0.02, seeds)


@pytest.mark.slow  # 200 cards of 2,000 resamples each
@pytest.mark.parametrize("m", [1.4, 2.0, 0.7])
def test_planted_multipliers_are_recovered_at_close_to_the_nominal_rate(m):
    rng = np.random.default_rng(20261206)
    cards = [
        compute_multiplier(ladder, COSTS, variant, REFERENCE, resamples=2000, rng=rng)
        for ladder, variant in (planted(rng, 5, m) for _ in range(200))
    ]
    held = sum(card.covers(m) for card in cards)
    assert held >= 180, held  # at least 90% for a 95% interval
    assert all(card.censored is None for card in cards)
    assert abs(np.median([math.log(card.estimate) for card in cards]) - math.log(m)) < 0.02


@pytest.mark.slow  # 100 cards, resampling seeds and test items
def test_over_seeds_and_items_the_planted_multiplier_is_held_too():
    rng = np.random.default_rng(7)
    cards = [
        compute_multiplier(ladder, COSTS, variant, REFERENCE, resamples=1000, rng=rng)
        for ladder, variant in (planted(rng, 5, 1.4, items=40) for _ in range(100))
    ]
    assert sum(card.covers(1.4) for card in cards) >= 90
    assert cards[0].items == 40 and cards[0].seeds == 5


def test_a_multiplier_beyond_the_ladder_is_censored_not_extrapolated():
    rng = np.random.default_rng(3)
    ladder, variant = planted(rng, 5, 12.0)  # the variant reaches what 24 units would: the ladder ends at 8
    card = compute_multiplier(ladder, COSTS, variant, REFERENCE, resamples=500, rng=rng)
    assert (card.censored, card.estimate, card.range_high) == ("above", 4.0, 4.0)
    assert card.high_censored == "above" and card.text().startswith("> 4×")
    ladder, variant = planted(rng, 5, 0.1)  # worse than the smallest budget's loss
    card = compute_multiplier(ladder, COSTS, variant, REFERENCE, resamples=500, rng=rng)
    assert (card.censored, card.estimate) == ("below", 0.5) and card.text().startswith("< 0.5×")


def test_a_null_variant_holds_one_and_the_numbers_print():
    rng = np.random.default_rng(5)
    ladder, variant = planted(rng, 5, 1.0)
    card = compute_multiplier(ladder, COSTS, variant, REFERENCE, resamples=500, rng=rng)
    assert card.covers(1.0) and card.low < 1.0 < card.high
    assert card.text() == f"{card.estimate:.3g}× [{card.low:.3g}×, {card.high:.3g}×]"


def test_a_bound_just_past_one_is_never_printed_as_one():
    # v1's rule reads whether the lower bound is above 1: at three figures 1.0005 printed "1×", which reads as
    # a bound touching 1. It keeps the digits that show its side of 1; other numbers keep three figures.
    assert [shown(v, None) for v in (1.0005, 0.9996, 1.0, 1.23, 0.812)] == ["1.0005×", "0.9996×", "1×", "1.23×", "0.812×"]


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="ascending cost"):
        compute_multiplier(np.ones((2, 5)), [2.0, 1.0], np.ones(5), 1.0)
    with pytest.raises(ValueError, match="the variant's losses have shape"):
        compute_multiplier(np.ones((2, 5)), [1.0, 2.0], np.ones(4), 1.0)


def test_a_non_finite_loss_has_no_place_on_a_ladder():
    with pytest.raises(ValueError, match="every loss must be finite"):
        compute_multiplier(np.array([[2.0, 2.1], [1.5, float("nan")]]), [1.0, 2.0], np.array([1.8, 1.7]), 1.0)
