"""The terminal report at 80 columns and wider: a demo-like report (the demo's
own configuration: an embedded-model candidate beside the reference, three scenarios in English,
Hindi and Tamil, smoke-test judges) and reports with three and six candidates whose ids are long,
rendered at 80 and 120 columns. Every line is checked: none is wider than the terminal, no word is
broken (every word printed also appears in the same report printed with unlimited width), and
every table keeps its row labels (each candidate id and diagnostic label appears whole)."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table

from callbench.bundle.models import DIAGNOSTIC_LABELS
from callbench.bundle.validate.audits import load_bundle
from callbench.models.base import ModelRequest, ModelResponse
from callbench.models.scripted.judge import create_scripted_judge
from callbench.models.scripted.models import create_scripted
from callbench.report.model.build import Report, build_report
from callbench.report.model.load import load_runs
from callbench.report.terminal.fit import labelled_path, print_table, words, wrap_words
from callbench.report.terminal.tables import render_terminal
from callbench.runs.demo import demo_config, starter_path
from callbench.runs.plan import candidate_slug
from callbench.runs.session import run_and_grade

MakeRun = Callable[..., Path]
LAYOUT_WORDS = {"agent", "scenario#repeat"}
"""Words of the narrow calls layout (ids grouped under their agent) that the wide layout has not."""


def _words(text: str) -> set[str]:
    """Words, with a stacked table's ``column:`` colon dropped and ``agent/scenario#repeat`` ids
    in their parts (the narrow calls layout prints them apart)."""
    return {p for w in words(text) for p in w.rstrip(":").split("/") if p}
LONG_IDS = (
    "anthropic_claude-sonnet-4-5-20250929-1b2c3d4e", "openai_gpt-4o-mini-2024-07-18-6f2a91c0",
    "openai_gpt-4.1-9a8b7c6d", "local_0.5b-d77aeab6", "scripted_reference-b852280c",
    "openai_gpt-5-mini-0f1e2d3c",
)


class SmokeTest:
    """A scripted model standing in for the embedded model (marked as it, so banners show)."""

    embedded_smoke_test_model = True

    def __init__(self, inner: Any) -> None:
        self.inner, self.spec, self.settings = inner, inner.spec, inner.settings

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.inner.complete(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """The demo's run configuration, run with scripted stand-ins for the embedded model."""
    bundle = load_bundle(starter_path())
    out = tmp_path_factory.mktemp("demo") / "callbench-demo-run-folder"
    config = demo_config(out, "local:0.5b", bundle, 3)
    clients: dict[str, Any] = {}
    for c in config.candidates:
        local = c.spec.startswith("local")
        inner = create_scripted("scripted:talk" if local else c.spec, c.settings, bundle)
        clients[f"candidate:{candidate_slug(c.spec, c.settings)}"] = SmokeTest(inner) if local else inner
    clients["caller"] = create_scripted(config.caller.spec, config.caller.settings, bundle)
    clients["task_judge"] = SmokeTest(create_scripted_judge("scripted:met", config.task_judge.settings))
    clients["conversation_judge"] = SmokeTest(
        create_scripted_judge("scripted:partial", config.conversation_judge.settings))
    asyncio.run(run_and_grade(config, clients=clients, bundle=bundle))
    return build_report(load_runs([config.out]), n_samples=100)


def _render(report: Report, width: int) -> str:
    buf = io.StringIO()
    render_terminal(report, Console(file=buf, width=width, emoji=False, color_system=None))
    return buf.getvalue()


def _section(text: str, title: str) -> str:
    start = text.index(title)
    rest = text[start + len(title):]
    ends = [rest.find(t) for t in ("\nEpisodes (", "\nPillars", "\nPaired", "\nOverall by", "\nSimulator")]
    return rest[: min([e for e in ends if e >= 0] or [len(rest)])]


def _check(report: Report, width: int) -> str:
    text = _render(report, width)
    wide = _words(_render(report, 100_000)) | LAYOUT_WORDS
    for i, line in enumerate(text.splitlines()):
        assert cell_len(line) <= width, f"line {i} is {cell_len(line)} cells wide: {line!r}"
    broken = _words(text) - wide
    assert not broken, f"words broken at {width} columns: {sorted(broken)[:10]}"
    for c in report.candidates:  # the row labels of the leaderboard and the diagnostics
        assert c.candidate in _words(_section(text, "Leaderboard")), (width, c.candidate)
        assert c.candidate in _words(_section(text, "Diagnostics")), (width, c.candidate)
    diagnostics = _section(text, "Diagnostics")
    flat = " ".join(diagnostics.split())
    for label in DIAGNOSTIC_LABELS.values():
        assert label in flat or all(w in words(diagnostics) for w in label.split()), label
    return text


@pytest.mark.parametrize("width", [80, 120])
def test_demo_report_reads_cleanly(demo_report: Report, width: int) -> None:
    text = _check(demo_report, width)
    assert "SMOKE TEST" in text and "Paired comparisons" in text
    ledger = text[text.index("Simulator and channel ledger"):]
    # the ledger's column names are whole (at 80 columns the table is stacked, a line per column)
    assert "channel authored: applied / not applied / never reached" in " ".join(ledger.split())


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("n", [1, 3, 6])
def test_reports_with_long_candidate_ids_read_cleanly(make_run: MakeRun, n: int, width: int) -> None:
    run = make_run(f"r{n}", candidates=LONG_IDS[:n], agents=3, scenarios=2, repeats=1)
    report = build_report(load_runs([run]), n_samples=50)
    text = _check(report, width)
    if n == 6 and width == 80:
        # too wide as a table: the diagnostics are stacked, each label then a line per candidate
        lines = text[text.index("Diagnostics"):].splitlines()
        at = lines.index("tool choice")
        labels = [line.split(":")[0].strip() for line in lines[at + 1: at + 7]]
        assert labels == [c.candidate for c in report.candidates]


def test_wrap_words_never_breaks_a_word() -> None:
    path = "/home/user/.cache/callbench/demo/" + "x" * 90 + "/report.html"
    lines = wrap_words(f"HTML report written to {path} for you", 40)
    assert lines == ["HTML report written to", "    " + path, "    for you"]
    assert wrap_words("  a b", 10, hang="  ") == ["  a b"]


def test_a_path_too_long_for_the_line_goes_on_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert labelled_path("HTML report:", "/tmp/r.html") == ["HTML report: /tmp/r.html"]
    long = "file:///" + "d/" * 40 + "report.html"
    assert labelled_path("HTML report:", long) == ["HTML report:", f"  {long}"]


def test_a_table_that_fits_prints_as_a_table_else_stacked() -> None:
    t = Table(title="T")
    t.add_column("name")
    for h in ("a column with a long header", "another long header here", "third"):
        t.add_column(h, overflow="fold")
    t.add_row("row-one", "1", "2", "3")
    narrow, wide = io.StringIO(), io.StringIO()
    print_table(Console(file=narrow, width=34, color_system=None), t)  # "another" would be cut
    print_table(Console(file=wide, width=200, color_system=None), t)
    assert "┃" in wide.getvalue()
    assert [line.rstrip() for line in narrow.getvalue().splitlines()] == [
        "T", "row-one", "  a column with a long header: 1", "  another long header here: 2", "  third: 3"]
