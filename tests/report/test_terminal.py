"""The terminal report: per-call table or summary, flagged small intervals, one token total,
the smoke-test banner naming its roles, ids never broken at 80 columns."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from callbench.grade.models import EpisodeGrade
from callbench.models.base import Usage
from callbench.report.model.build import build_report
from callbench.report.model.load import load_runs
from callbench.report.terminal.tables import MAX_CALL_ROWS, render_terminal, total_tokens
from callbench.trace import RoleInfo

MakeRun = Callable[..., Path]


def _render(run_dirs: list[Path], width: int = 200) -> str:
    runs = load_runs(run_dirs)
    buf = io.StringIO()
    render_terminal(build_report(runs, n_samples=50), Console(file=buf, width=width))
    return buf.getvalue()


def test_small_run_gets_one_row_per_call(make_run: MakeRun) -> None:
    r = make_run(
        candidates=("a",), agents=3, scenarios=1, repeats=1, score=lambda c, a, s, r: 90.0 if a == 0 else 20.0
    )
    out = _render([r])
    rows = [line for line in out.splitlines() if "/sc0#0" in line]
    assert len(rows) == 3
    row0 = next(line for line in rows if "ag0/sc0#0" in line)
    # language, end reason, tool calls, overall, pass
    assert row0.split() == ["ag0/sc0#0", "en", "caller_done", "1", "90.0", "pass"]
    row1 = next(line for line in rows if "ag1/sc0#0" in line)
    assert "hi" in row1 and "20.0" in row1 and "fail" in row1 and "pass " not in row1


def test_large_run_gets_a_summary_not_a_row_per_call(make_run: MakeRun) -> None:
    r = make_run(candidates=("a", "b"), agents=3, scenarios=4, repeats=4)  # 96 calls
    assert MAX_CALL_ROWS < 2 * 3 * 4 * 4
    out = _render([r])
    assert "Calls (96;" in out
    assert "ag0/sc0#0" not in out
    summary = [line for line in out.splitlines() if line.startswith("│ a ")]
    assert summary and summary[0].split("│")[2].strip() == "48"  # 48 calls of a ended caller_done


def test_intervals_from_few_calls_are_flagged(make_run: MakeRun) -> None:
    few = _render([make_run("few", candidates=("a",), agents=3, scenarios=1, repeats=1)])
    assert re.search(r"\d\.\d\]†", few) and "† from fewer than 10 scored calls: too few to mean much" in few
    many = _render([make_run("many", candidates=("a",), agents=3, scenarios=2, repeats=2)])
    assert "†" not in many and "too few" not in many


def test_official_is_explained(make_run: MakeRun) -> None:
    out = _render([make_run(candidates=("a",), agents=1, scenarios=1, repeats=1)])
    assert "official = every planned call finished" in " ".join(out.split())


def test_one_token_total_includes_judges(make_run: MakeRun) -> None:
    r = make_run(candidates=("a",), agents=2, scenarios=1, repeats=1)
    for path in (r / "grades" / "gs1" / "episodes").glob("*.json"):
        g = EpisodeGrade.model_validate_json(path.read_text())
        g.usage = {"task_judge": Usage(input_tokens=1000, output_tokens=7, calls=1)}
        path.write_text(g.model_dump_json())
    report = build_report(load_runs([r]), n_samples=20)
    # traces: candidate 120 + caller 60 tokens per call; each grade's task judge 1,007
    assert total_tokens(report) == 2 * 180 + 2 * 1007
    buf = io.StringIO()
    render_terminal(report, Console(file=buf, width=200))
    assert f"judges included): {total_tokens(report):,}" in buf.getvalue()


def test_smoke_test_banner_names_every_role_when_all_ran_on_it(make_run: MakeRun) -> None:
    smoke = RoleInfo(spec="local:0.5b", embedded_smoke_test_model=True)
    r = make_run(candidates=("a",), agents=1, scenarios=1, repeats=1, caller=smoke)
    out = " ".join(_render([r]).split())
    assert "Ran on it: caller (run r1); every other role did not." in out.replace("│ ", "").replace(" │", "")


def test_ids_are_never_broken_at_80_columns(make_run: MakeRun) -> None:
    cand = "openai:some-provider/a-rather-long-model-name-2026-01-01"
    r = make_run(candidates=(cand,), agents=1, scenarios=1, repeats=1)
    out = _render([r], width=80)
    assert cand in out  # whole, on one line, wherever it appears
    lines_with_part = [line for line in out.splitlines() if "a-rather-long" in line]
    assert all(cand in line for line in lines_with_part), [ln for ln in lines_with_part if cand not in ln]


def test_ungraded_is_explained_beside_the_ledgers_not_graded(make_run: MakeRun) -> None:
    """Regression: ``ungraded 1`` stood beside the fault ledger's ``not graded 0`` unexplained."""
    r = make_run(candidates=("a",), agents=1, scenarios=1, repeats=2)
    assert "ungraded: a trace" not in _render([r])
    sorted((r / "grades").glob("*/episodes/*.json"))[0].unlink()
    out = _render([r])
    assert "ungraded: a trace with no grade in this grade set, or one left not graded by a judge" in out


def test_nothing_is_cut_at_80_columns_with_long_ids(make_run: MakeRun) -> None:
    """Regression: the demo's report in an 80-column terminal cut the calls table's language, end
    reason and pass columns, the paired table's interval and every number of the cost table."""
    long_a = "openai:some-provider/a-rather-long-model-name-2026-01-01"
    long_b = "scripted_reference-b852280c"
    r = make_run(candidates=(long_a, long_b), agents=2, scenarios=2, repeats=1)
    out = _render([r], width=80)
    tables = out[out.index("Calls:") : out.index("Leaderboard")]
    tables += out[out.index("Paired comparisons") : out.index("* interval excludes zero")]
    tables += out[out.index("Cost and tokens") :]
    assert "…" not in tables
    assert max(len(line) for line in tables.splitlines()) <= 80 or long_a in tables
    assert "difference [interval]" in tables and "w/l/t" in tables
