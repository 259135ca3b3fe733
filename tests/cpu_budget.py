"""The fast tier's budget, kept as tests are added (a pytest plugin; conftest.py loads it): a test not
marked slow that takes more CPU than `fast_test_cpu_seconds` (pyproject.toml) is named in the run's
summary, so that it gets the mark or a cheaper setup before `make test-fast` outgrows its minute.

CPU time, not wall time: on shared cores a test's wall time says more about its neighbours than about
the test. Under xdist each worker measures its own tests and the controller, which gets every report,
prints the names."""

from __future__ import annotations

import time

import pytest

LIMIT = "fast_test_cpu_seconds"
PROPERTY = "cpu_seconds"
START = pytest.StashKey[float]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(LIMIT, "a test not marked slow that takes more seconds of CPU than this is named in the summary", default="0.5")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(Summary(float(config.getini(LIMIT))), "cpu_budget_summary")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    item.stash[START] = time.process_time()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    # Before the teardown's report is made, so that the report (which xdist sends to the controller) holds it.
    if call.when == "teardown" and START in item.stash and item.get_closest_marker("slow") is None:
        item.user_properties.append((PROPERTY, time.process_time() - item.stash[START]))
    return (yield)


class Summary:
    """Collects the reports' CPU seconds (in the controller under xdist) and names the tests over the limit."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.over: list[tuple[float, str]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            self.over += [
                (seconds, report.nodeid) for name, seconds in report.user_properties if name == PROPERTY and seconds > self.limit
            ]

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.over:
            return
        terminalreporter.section(f"not marked slow, over {self.limit:g} s of CPU: {len(self.over)} tests")
        for seconds, nodeid in sorted(self.over, reverse=True):
            terminalreporter.write_line(f"{seconds:6.2f} s  {nodeid}")
        terminalreporter.write_line("Mark them @pytest.mark.slow or make them cheaper (docs/testing.md).")
