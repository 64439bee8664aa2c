"""``callbench gate``: the CI gate over a graded run, thin over :mod:`callbench.runs.gate`."""

from __future__ import annotations

from pathlib import Path

import typer

from callbench.cli.app import app


@app.command()
def gate(
    run: Path = typer.Argument(..., help="The graded run folder to judge."),
    baseline: Path | None = typer.Option(None, "--baseline", help="A graded run folder to compare with."),
    minimum: list[str] = typer.Option(
        [], "--min", help="FIELD=NUMBER: a candidate's report field must reach it, judged on its "
        "interval (overall=70, task=60, pass_rate=50, pass_hat_k.2=0.5, diagnostics.grounding=60). "
        "Repeatable."),
    maximum: list[str] = typer.Option(
        [], "--max", help="FIELD=NUMBER: a field that must stay at or under it (latency figures). "
        "Repeatable."),
    max_drop: float = typer.Option(
        5.0, "--max-drop", min=0.0, help="Overall score points the run may lose against the baseline, "
        "beyond noise (paired comparison on shared scenarios)."),
    pair: list[str] = typer.Option(
        [], "--pair", help="RUN_CANDIDATE=BASELINE_CANDIDATE: compare these two (default: same names, "
        "or the only candidate of each run)."),
    strict: bool = typer.Option(
        False, "--strict", help="Fail a threshold when its interval's lower bound misses it (default: "
        "only when the upper bound does)."),
    allow_different: bool = typer.Option(
        False, "--allow-different", help="Compare with a baseline of another bundle hash, caller, "
        "judges or settings (the differences are listed)."),
    junit: Path | None = typer.Option(None, "--junit", help="Write JUnit XML here."),
    markdown: Path | None = typer.Option(None, "--markdown", help="Write a Markdown summary here."),
    json_out: Path | None = typer.Option(
        None, "--json", help="Write the gate's decisions and the report here."),
    seed: int | None = typer.Option(None, "--seed", help="Bootstrap seed (default: the run's seed)."),
    samples: int = typer.Option(2000, "--samples", min=100, help="Bootstrap samples."),
) -> None:
    """Judge a graded run for CI: thresholds on intervals, regression against a baseline run.

    Exit codes: 0 every decision passed (or was skipped: a field the report does not have);
    1 a threshold or the regression check failed; 2 bad input (a run folder that cannot be read,
    a threshold that does not parse); 3 the baseline differs in bundle hash, caller, judges or
    settings (the differences are listed; --allow-different compares anyway). docs/ci.md.
    """
    from callbench.runs.gate import GateInputError, parse_threshold, run_gate
    from callbench.runs.gate_output import markdown_summary, write_outputs

    try:
        thresholds = [parse_threshold(t, "min") for t in minimum]
        thresholds += [parse_threshold(t, "max") for t in maximum]
        pairs = []
        for p in pair:
            a, eq, b = p.partition("=")
            if not eq or not a or not b:
                raise GateInputError(f"--pair {p!r}: expected RUN_CANDIDATE=BASELINE_CANDIDATE")
            pairs.append((a, b))
        result, report, data = run_gate(run, thresholds, baseline_dir=baseline, max_drop=max_drop,
                                        strict=strict, allow_different=allow_different, seed=seed,
                                        n_samples=samples, pairs=pairs)
    except (GateInputError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    report_json = report.model_dump(mode="json")
    try:
        write_outputs(result, data.records, report_json, junit=junit, markdown=markdown, json_path=json_out)
    except OSError as e:
        typer.echo(f"error: cannot write the gate's outputs: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(markdown_summary(result, report_json["candidates"]).rstrip())
    raise typer.Exit(result.exit_code)
