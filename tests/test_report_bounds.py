"""An interval wider than the metric's range is printed as computed, with a sentence saying why."""

from lit_attention.reports.comparisons import beyond_range_note
from lit_attention.stats.statistics import paired_difference, with_holm

BASE = {0: 0.80, 1: 0.90}


def test_an_interval_past_the_range_of_a_bounded_metric_is_named():
    noisy, steady = with_holm(
        [
            paired_difference({0: 0.95, 1: 0.75}, BASE),  # two seeds that disagree
            paired_difference({0: 0.81, 1: 0.91}, BASE),
        ]
    )
    assert noisy.joint_high > 1 and -1 <= steady.joint_low <= steady.joint_high <= 1
    note = beyond_range_note([("noisy", noisy), ("steady", steady)], "test/acc")
    assert "`noisy`" in note and "`steady`" not in note and "±1" in note and "add seeds" in note
    assert beyond_range_note([("steady", steady)], "test/acc") == ""
    assert beyond_range_note([("noisy", noisy)], "test/loss") == ""  # a loss has no such bound
    assert "±100" in beyond_range_note(
        [("noisy", with_holm([paired_difference({0: 90.0, 1: -80.0}, {0: 0, 1: 0})])[0])], "test/bleu"
    )
