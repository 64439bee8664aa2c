"""With ``CALLBENCH_REQUIRE_AUDIO=1`` (the CI job that installs the ``[audio]`` extra and
espeak-ng), a voice-channel test that would skip for a missing engine, package or binary fails
instead, so a broken install cannot pass as a row of skips."""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

REQUIRE = "CALLBENCH_REQUIRE_AUDIO"


def _required() -> bool:
    return os.environ.get(REQUIRE) == "1"


def _fail(report: pytest.CollectReport | pytest.TestReport) -> None:
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = f"{REQUIRE}=1 but this voice test would skip: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if _required() and report.skipped:
        _fail(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if _required() and report.skipped:
        _fail(report)
