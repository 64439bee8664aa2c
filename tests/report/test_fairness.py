from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from callbench.cli import app
from callbench.models.base import ModelSettings
from callbench.report.html.page import render_html
from callbench.report.model.build import build_report
from callbench.report.model.fairness import UnfairComparisonError, check_fairness, smoke_test_roles
from callbench.report.model.load import load_runs
from callbench.report.terminal.tables import render_terminal
from callbench.trace import RoleInfo

MakeRun = Callable[..., Path]
SMALL = {"agents": 2, "scenarios": 1, "repeats": 1}


def test_different_bundle_hashes_are_refused(make_run: MakeRun) -> None:
    r1 = make_run("r1", candidates=("a",), bundle_hash="1" * 64, **SMALL)
    r2 = make_run("r2", candidates=("b",), bundle_hash="2" * 64, **SMALL)
    runs = load_runs([r1, r2])
    with pytest.raises(UnfairComparisonError, match="bundle hashes differ"):
        build_report(runs, n_samples=10)
    result = CliRunner().invoke(app, ["report", str(r1), str(r2), "--no-html"])
    assert result.exit_code == 2
    assert "refusing to combine runs of different bundles" in result.output
    assert "Traceback" not in result.output


def test_same_setup_has_no_flags(make_run: MakeRun) -> None:
    r1 = make_run("r1", candidates=("a",), **SMALL)
    r2 = make_run("r2", candidates=("b",), **SMALL)
    assert check_fairness(load_runs([r1, r2])) == []


def test_different_caller_is_flagged_in_terminal_and_html(make_run: MakeRun) -> None:
    r1 = make_run("r1", candidates=("a",), caller=RoleInfo(spec="openai:gpt-x"), **SMALL)
    r2 = make_run(
        "r2",
        candidates=("b",),
        caller=RoleInfo(spec="openai:gpt-x", settings=ModelSettings(temperature=0.7)),
        **SMALL,
    )
    runs = load_runs([r1, r2])
    flags = check_fairness(runs)
    assert [f.kind for f in flags] == ["caller"]
    assert "temperature=0.7" in flags[0].message and "r1" in flags[0].message
    report = build_report(runs, n_samples=10)
    buf = io.StringIO()
    render_terminal(report, Console(file=buf, width=200))
    assert "UNFAIR COMPARISON" in buf.getvalue()
    html = render_html(report, runs)
    assert 'id="unfair"' in html and "caller model or settings differs" in html


def test_caller_prompt_and_judge_differences_are_flagged(make_run: MakeRun) -> None:
    r1 = make_run("r1", candidates=("a",), **SMALL)
    r2 = make_run(
        "r2",
        candidates=("b",),
        caller_prompt="You are a different caller.",
        task_judge=RoleInfo(spec="anthropic:judge-2"),
        cutoff=60.0,
        **SMALL,
    )
    kinds = sorted(f.kind for f in check_fairness(load_runs([r1, r2])))
    assert kinds == ["caller_prompt", "cutoff", "task_judge"]


def test_smoke_test_roles_and_banner(make_run: MakeRun) -> None:
    r1 = make_run(
        "r1", candidates=("a",), caller=RoleInfo(spec="local", embedded_smoke_test_model=True), **SMALL
    )
    runs = load_runs([r1])
    assert smoke_test_roles(runs) == ["caller (run r1)"]
    report = build_report(runs, n_samples=10)
    buf = io.StringIO()
    render_terminal(report, Console(file=buf, width=200))
    assert "SMOKE TEST" in buf.getvalue()
    assert 'id="smoke-test"' in render_html(report, runs)
    r2 = make_run("r2", candidates=("b",), **SMALL)
    assert smoke_test_roles(load_runs([r2])) == []
    # a judge is named once, from the grade set whose labels are reported (regression: the run
    # manifest's copy was listed a second time as "task judge (run manifest)")
    r3 = make_run(
        "r3", candidates=("c",), task_judge=RoleInfo(spec="local", embedded_smoke_test_model=True), **SMALL
    )
    assert smoke_test_roles(load_runs([r3])) == ["task judge (run r3)"]
    assert 'id="smoke-test"' not in render_html(build_report(load_runs([r2]), n_samples=10), load_runs([r2]))


def test_describe_role_shows_only_settings_that_differ_from_the_defaults() -> None:
    # base_url and extra_headers have serializers, which defeated exclude_defaults: every role
    # read "scripted:plan (base_url=None, extra_headers=[])" in the terminal, HTML and JSON
    from callbench.models.base import ModelSettings
    from callbench.report.model.fairness import describe_role
    from callbench.trace import RoleInfo

    assert describe_role(RoleInfo(spec="scripted:plan")) == "scripted:plan"
    settings = ModelSettings(temperature=0.3, base_url="http://u:pw@h/v1?key=k1",
                             extra_headers={"X-B": "env:B", "X-A": "env:A"})
    assert describe_role(RoleInfo(spec="openai:m", settings=settings)) == (
        "openai:m (base_url=http://not-saved@h/v1?key=not-saved, extra_headers=['X-A', 'X-B'], "
        "temperature=0.3)"
    )
