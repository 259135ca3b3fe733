"""tests/cpu_budget.py: a run's summary names the tests not marked slow that took more CPU than the
fast tier's budget allows each, and only those."""

SPIN = """
import time

import pytest


def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_busy():
    spin(0.06)


@pytest.mark.slow
def test_busy_and_marked():
    spin(0.06)


def test_quick():
    pass
"""


def test_a_fast_test_over_its_cpu_budget_is_named_in_the_summary(pytester):
    pytester.makeini("[pytest]\nfast_test_cpu_seconds = 0.03\nmarkers =\n    slow: as in pyproject.toml\n")
    pytester.makepyfile(test_spin=SPIN)
    result = pytester.runpytest_inprocess("-p", "cpu_budget")
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    assert "not marked slow, over 0.03 s of CPU: 1 tests" in out, out
    named = [line for line in out.splitlines() if line.endswith("test_spin.py::test_busy")]
    assert len(named) == 1 and named[0].split()[1] == "s" and float(named[0].split()[0]) >= 0.06, out
    assert "test_busy_and_marked" not in out.split("over 0.03 s of CPU")[1] and "test_quick" not in out, out
