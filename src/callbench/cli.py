"""The ``callbench`` command line (typer): thin over the library."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help="callbench: benchmark LLM phone agents.")


@app.command()
def version() -> None:
    """Print the callbench version."""
    from callbench import __version__

    typer.echo(__version__)


@app.command()
def validate(
    path: Path = typer.Argument(..., help="A bundle folder (or its bundle.yaml)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list of {file, path, code, message}."),
) -> None:
    """Run every static audit of a bundle and list every problem at once.

    Exit codes: 0 clean; 1 problems found; 2 the path cannot be read.
    """
    import json

    from callbench.bundle.validate import validate_safely

    outcome = validate_safely(path)
    if as_json:
        typer.echo(json.dumps([p.model_dump() for p in outcome.problems], ensure_ascii=False, indent=2))
    elif not outcome.readable:
        typer.echo(f"error: {path}: {outcome.problems[0].message}", err=True)
    else:
        for p in outcome.problems:
            typer.echo(str(p))
        b = outcome.bundle
        if outcome.problems:
            n_files = len({p.file for p in outcome.problems})
            typer.echo(f"{len(outcome.problems)} problem(s) in {n_files} file(s)")
        elif b is not None:
            typer.echo(f"OK: {b.meta.name} {b.meta.version} (hash {b.content_hash[:12]}): "
                       f"{len(b.agents)} agent(s), {len(b.scenarios())} scenario(s), no problems")
    raise typer.Exit(outcome.exit_code)


@app.command()
def inspect(
    path: Path = typer.Argument(..., help="A bundle folder (or its bundle.yaml)."),
    as_json: bool = typer.Option(False, "--json", help="Print the composition as JSON."),
) -> None:
    """Summarise a bundle's composition: agents, scenarios by language and difficulty, tools per
    agent, rendered instruction length (median, min, max).

    Exit codes: 0 ok; 1 the bundle cannot be loaded (problems listed); 2 the path cannot be read.
    """
    from rich.console import Console

    from callbench.bundle.inspect import composition, composition_tables
    from callbench.bundle.loader import load_bundle_collect

    if path.is_file() and path.stem == "bundle":
        path = path.parent
    try:
        bundle, problems = load_bundle_collect(path)
        comp = composition(bundle) if bundle is not None else None
    except OSError as e:
        typer.echo(f"error: {path}: cannot read: {getattr(e, 'strerror', None) or e}", err=True)
        raise typer.Exit(2) from None
    except Exception as e:  # never a traceback on any input
        typer.echo(f"error: {path}: cannot inspect: {type(e).__name__}: {e}", err=True)
        raise typer.Exit(1) from None
    if comp is None:
        for p in problems:
            typer.echo(str(p), err=True)
        typer.echo(f"error: {path}: the bundle cannot be loaded ({len(problems)} problem(s))", err=True)
        raise typer.Exit(1)
    if as_json:
        typer.echo(comp.model_dump_json(indent=2))
    else:
        console = Console()
        for table in composition_tables(comp):
            console.print(table)
    if problems:
        typer.echo(f"note: {len(problems)} problem(s) while loading; run: callbench validate {path}",
                   err=True)


@app.command()
def schema(
    out: Path = typer.Option(..., "--out", help="Folder to write bundle/agent/scenario JSON Schemas into."),
) -> None:
    """Write a JSON Schema (draft 2020-12) for each bundle file type: bundle.schema.json,
    agent.schema.json, scenario.schema.json. Exit codes: 0 ok; 2 the folder cannot be written."""
    from callbench.bundle.schema import write_schemas

    try:
        written = write_schemas(out)
    except OSError as e:
        typer.echo(f"error: cannot write schemas to {out}: {getattr(e, 'strerror', None) or e}", err=True)
        raise typer.Exit(2) from None
    for w in written:
        typer.echo(str(w))


@app.command()
def grade(
    run_dir: Path = typer.Argument(..., help="A run folder (holds manifest.json and traces/)."),
    task_judge: str | None = typer.Option(None, "--task-judge", help="Task judge spec (default: the run's)."),
    conversation_judge: str | None = typer.Option(
        None, "--conversation-judge", help="Conversation judge spec (default: the run's)."
    ),
    cutoff: float = typer.Option(70.0, "--cutoff", min=0, max=100, help="Pass mark for the overall score."),
    rubric: Path | None = typer.Option(None, "--rubric", help="Rating rubric file (YAML/JSON)."),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="Episodes graded at once."),
) -> None:
    """Grade (or regrade) every trace of a run into a new grade set; earlier grade sets stay.

    Exit codes: 0 ok; 2 bad input (not a run folder, bundle hash mismatch, unreadable rubric).
    """
    import asyncio

    from callbench.grade.grader import GradeError, grade_run, grade_set_summary
    from callbench.grade.models import EpisodeGrade
    from callbench.grade.rubric import DEFAULT_RUBRIC, load_rubric
    from callbench.runs.store import RunStore

    store = RunStore(run_dir)

    def index(g: EpisodeGrade) -> None:
        store.index_grade(g.grade_set_id, g.episode_id, g.task_score, g.conversation_score, g.overall,
                          g.passed, g.judge_errors)

    try:
        rub = load_rubric(rubric) if rubric is not None else DEFAULT_RUBRIC
        gid = asyncio.run(grade_run(run_dir, task_judge=task_judge, conversation_judge=conversation_judge,
                                    cutoff=cutoff, rubric=rub, concurrency=concurrency, on_episode=index))
    except (GradeError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    for line in grade_set_summary(run_dir, gid):
        typer.echo(line)


@app.command()
def report(
    run_dirs: list[Path] = typer.Argument(..., help="One or more run folders (same bundle hash)."),
    html: Path | None = typer.Option(None, "--html", help="HTML report path (default: RUN_DIR/report.html)."),
    no_html: bool = typer.Option(False, "--no-html", help="Do not write the HTML report."),
    json_path: Path | None = typer.Option(None, "--json", help="Write the report as JSON."),
    csv_path: Path | None = typer.Option(None, "--csv", help="Write one CSV row per episode."),
    grade_set: str | None = typer.Option(None, "--grade-set", help="Grade set id (default: the latest)."),
    samples: int = typer.Option(2000, "--samples", min=1, help="Bootstrap samples."),
    confidence: float = typer.Option(0.95, "--confidence", min=0.5, max=0.999, help="Interval confidence."),
    seed: int | None = typer.Option(None, "--seed", min=0, help="Bootstrap seed (default: the runs' seed)."),
) -> None:
    """Report runs: terminal tables, one offline HTML file, optional JSON/CSV exports.

    Exit codes: 0 ok; 2 unreadable input or runs that cannot be compared fairly.
    """
    from rich.console import Console

    from callbench.report.build import build_report
    from callbench.report.export import write_csv, write_json
    from callbench.report.fairness import UnfairComparisonError
    from callbench.report.html import write_html
    from callbench.report.load import ReportInputError, load_runs
    from callbench.report.terminal import render_terminal

    try:
        runs = load_runs(run_dirs, grade_set)
        result = build_report(runs, seed=seed, n_samples=samples, confidence=confidence)
    except (ReportInputError, UnfairComparisonError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    render_terminal(result, Console())
    try:
        if json_path is not None:
            write_json(result, json_path)
            typer.echo(f"JSON report: {json_path}")
        if csv_path is not None:
            write_csv([r for run in runs for r in run.records], csv_path)
            typer.echo(f"CSV (one row per episode): {csv_path}")
        if not no_html:
            html_path = html if html is not None else run_dirs[0] / "report.html"
            write_html(result, runs, html_path)
            typer.echo(f"HTML report: {html_path}")
    except OSError as e:
        typer.echo(f"error: cannot write report: {e}", err=True)
        raise typer.Exit(2) from None
