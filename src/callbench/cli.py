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
