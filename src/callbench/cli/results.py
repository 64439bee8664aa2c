"""Result commands: ``grade``, ``report``, ``agreement`` and ``labels export|import``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from callbench.cli.app import app
from callbench.cli.common import _latency_budget, _output_problem, _pass_rule, _report_budget, _role_settings

if TYPE_CHECKING:
    from rich.console import Console

    from callbench.cli.html_output import HtmlTarget
    from callbench.cli.output_paths import OutputProblem
    from callbench.report.model.load import CallFiles


@app.command()
def grade(
    run_dir: Path = typer.Argument(..., help="A run folder (holds manifest.json and traces/)."),
    task_judge: str | None = typer.Option(None, "--task-judge", help="Task judge spec (default: the run's)."),
    conversation_judge: str | None = typer.Option(
        None, "--conversation-judge", help="Conversation judge spec (default: the run's)."
    ),
    cutoff: float | None = typer.Option(
        None, "--cutoff", min=0, max=100,
        help="Pass mark for the overall score (default: the run's own, from its first grade set).",
    ),
    pass_rule: str | None = typer.Option(
        None, "--pass-rule",
        help="outcome_and_overall (the outcome met and overall >= the cutoff) or overall (the "
        "paper's rule) or outcome_overall_latency (also the call's p90 time to first word within the "
        "run's latency budget) (default: the run's own; a run graded before outcomes existed gets "
        "outcome_and_overall).",
    ),
    rubric: Path | None = typer.Option(None, "--rubric", help="Rating rubric file (YAML/JSON)."),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="Episodes graded at once."),
    new_set: bool = typer.Option(
        False, "--new-set", help="Always grade every trace into a new grade set."
    ),
    settings: Path | None = typer.Option(
        None, "--settings",
        help="YAML of judge settings (task_judge, conversation_judge entries as for callbench run); "
        "needed for judges whose extra_headers values are never saved with the run.",
    ),
) -> None:
    """Grade (or regrade) every trace of a run into a new grade set; earlier grade sets stay.

    When the run's latest grade set was made with the same judges, cutoff and rubric and still
    lacks episodes or holds episodes left *not graded* (a judge outage), only those are graded,
    into that set (--new-set to regrade everything). A run records its judges' header names only,
    never their values: give them again with --settings.

    Exit codes: 0 ok; 2 bad input (not a run folder, bundle hash mismatch, unreadable rubric);
    4 disk full, permission denied or a read-only folder.
    """
    import sqlite3

    from callbench.grade.grader import GradeError, grade_run, grade_set_summary
    from callbench.grade.models import EpisodeGrade
    from callbench.grade.rubric import DEFAULT_RUBRIC, load_rubric
    from callbench.models.base import ModelSettings
    from callbench.runfolder.lock import hold_run_folder
    from callbench.runfolder.store import RunStore
    from callbench.runs import event_loop
    from callbench.runs.machine import EXIT_MACHINE_FAULT, machine_fault_message

    store = RunStore(run_dir)

    def index(g: EpisodeGrade) -> None:
        store.index_grade(
            g.grade_set_id,
            g.episode_id,
            g.task_score,
            g.conversation_score,
            g.overall,
            g.passed,
            g.judge_errors,
        )

    per_role = _role_settings(settings)
    chosen: dict[str, tuple[str | None, ModelSettings | None]] = {}
    for name, given in (("task_judge", task_judge), ("conversation_judge", conversation_judge)):
        entry = per_role.get(name)
        if entry is None:
            chosen[name] = (given, None)
            continue
        spec, role_settings = entry
        if given is not None and given != spec:
            flag = "--" + name.replace("_", "-")
            typer.echo(f"error: {settings}: {name}.spec is {spec!r} but {flag} gives {given!r}; make them "
                       "the same", err=True)
            raise typer.Exit(2)
        assert isinstance(role_settings, ModelSettings)
        chosen[name] = (spec, role_settings)

    try:
        rub = load_rubric(rubric) if rubric is not None else DEFAULT_RUBRIC
        if not (run_dir / "manifest.json").is_file():
            raise GradeError(f"{run_dir}: no manifest.json; not a run folder")
        with hold_run_folder(run_dir, "callbench grade"):
            gid = event_loop.run(
                grade_run(
                    run_dir,
                    task_judge=chosen["task_judge"][0],
                    conversation_judge=chosen["conversation_judge"][0],
                    task_judge_settings=chosen["task_judge"][1],
                    conversation_judge_settings=chosen["conversation_judge"][1],
                    cutoff=cutoff,
                    pass_rule=None if pass_rule is None else _pass_rule(pass_rule),
                    rubric=rub,
                    concurrency=concurrency,
                    on_episode=index,
                    continue_latest=not new_set,
                )
            )
    except (GradeError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    except (OSError, sqlite3.OperationalError) as e:
        line = machine_fault_message(e, run_dir, option="run")
        if line is None:
            raise
        typer.echo(f"error: {line}", err=True)
        raise typer.Exit(EXIT_MACHINE_FAULT) from None
    finally:
        store.close()  # no file of the run folder stays open after the command
    for line in grade_set_summary(run_dir, gid):
        typer.echo(line)


@app.command()
def report(
    run_dirs: Annotated[list[Path], typer.Argument(help="One or more run folders (same bundle hash).")],
    html: Annotated[
        Path | None, typer.Option("--html", help="HTML report path (default: RUN_DIR/report.html, or "
                                  "<RUN_DIR>.report.html beside it when the run folder is read-only).")
    ] = None,
    html_folder: Annotated[
        Path | None,
        typer.Option("--html-folder", help="Write the HTML report as a folder DIR (DIR/index.html plus one "
                     "file per call, loaded when opened; works from file:// with no server), whatever the "
                     "run's size. Runs of more than 250 calls get a folder anyway: --html PATH then "
                     "writes the folder PATH without its .html suffix."),
    ] = None,
    no_html: Annotated[bool, typer.Option("--no-html", help="Do not write the HTML report.")] = False,
    no_traces: Annotated[bool, typer.Option("--no-traces", help="HTML without the trace viewer.")] = False,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the report as JSON.")] = None,
    csv_path: Annotated[Path | None, typer.Option("--csv", help="Write one CSV row per episode.")] = None,
    grade_set: Annotated[
        str | None,
        typer.Option("--grade-set", help="Grade set id (default: the latest judge grade set; a human "
                     "label set only when named)."),
    ] = None,
    samples: Annotated[int, typer.Option("--samples", min=1, help="Bootstrap samples.")] = 2000,
    confidence: Annotated[
        float, typer.Option("--confidence", min=0.5, max=0.999, help="Interval confidence level.")
    ] = 0.95,
    seed: Annotated[
        int | None, typer.Option("--seed", min=0, help="Bootstrap seed (default: the runs' seed).")
    ] = None,
    latency_budget: Annotated[
        str | None,
        typer.Option("--latency-budget", help="Budget of a turn's time to first word, e.g. 800ms or 1.2s "
                     "(default: the budget the run recorded, else 800ms); the report shows the share of "
                     "turns within it."),
    ] = None,
    judge_audit: Annotated[
        list[Path] | None,
        typer.Option("--judge-audit", help="A judge-validation file from callbench audit --judges --save "
                     "(repeatable; RUN_DIR/judge_audits/ and the validations shipped with callbench are "
                     "always read)."),
    ] = None,
) -> None:
    """Report runs: terminal tables, an offline HTML report, optional JSON/CSV exports.

    The HTML report is one file up to 250 calls and a folder beyond (or with --html-folder):
    DIR/index.html holds every table and figure and one row per call, and each call loads from
    its own file when opened (docs/report.md).

    Output paths are checked before anything is computed (a folder given as --html, a path under
    a file, a folder that cannot be written): one line naming the option, nothing written.

    Exit codes: 0 ok; 2 unreadable input, runs that cannot be compared fairly, or a bad output path
    (a folder given for a file, a path under a file); 4 a report file cannot be written (disk full,
    permission denied, read-only folder).
    """
    from rich.console import Console

    from callbench.audit.store import load_judge_audits
    from callbench.cli.html_output import html_target
    from callbench.cli.output_paths import OutputProblem, first_problem
    from callbench.report.model.load import ReportInputError, load_runs
    from callbench.report.model.workers import default_workers, use_cpus

    given_budget = _latency_budget(latency_budget)
    use_cpus()  # large runs are read and their HTML folder written by worker processes
    try:
        default_workers()
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None

    if html_folder is not None and (no_html or no_traces or html is not None):
        other = "--no-html" if no_html else "--no-traces" if no_traces else "--html"
        typer.echo(f"error: --html-folder and {other} cannot be used together: the folder holds the calls' "
                   "traces; give one of them", err=True)
        raise typer.Exit(2)
    # output paths first: a bad one costs nothing and writes nothing (the HTML target's kind, one
    # file or a folder, is known once the runs are read; it is checked then, before any statistics)
    files = {"--json": json_path, "--csv": csv_path}
    html_paths = {"--html": html, "--html-folder": html_folder}
    owned = _output_problem(run_dirs, {**files, **html_paths})
    problem = OutputProblem(owned) if owned else first_problem(files, html_paths)
    if problem:
        typer.echo(f"error: {problem.line}", err=True)
        raise typer.Exit(problem.exit_code)
    audits, audit_warnings = load_judge_audits(run_dirs, judge_audit or [], packaged=True)
    for w in audit_warnings:
        typer.echo(f"warning: {w}", err=True)
    status = Console(stderr=True, emoji=False)
    from callbench.report.model.workers import WorkerCrash

    # settled before any call file of a folder report is written (those written while reading
    # included), so every output marks the same budget
    budget = _report_budget(given_budget, run_dirs)

    early: dict[str, Any] = {}

    def calls_while_reading(n_calls: int) -> CallFiles | None:
        """A folder report of one run: its call files are written while the run is read (each
        trace read once); the target and its checks are the same as after reading."""
        if no_html:
            return None
        target = html_target(None, run_dirs[0], html, html_folder, include_traces=not no_traces,
                             n_calls=n_calls)
        early["target"] = target
        if not target.folder or _target_problem(run_dirs, target, json_path, csv_path, html_folder):
            return None
        build = target.start(None, budget)
        if build is None:
            return None
        early["build"] = build
        return build.while_reading()

    written: list[str] = []  # the report files finished so far, for the line of a stop
    try:
        try:
            with status.status("report: reading the run(s)"):
                runs = load_runs(run_dirs, grade_set, calls=calls_while_reading)
        except (ReportInputError, WorkerCrash) as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        target = early.get("target") or (None if no_html else html_target(
            runs, run_dirs[0], html, html_folder, include_traces=not no_traces))
        problem = _target_problem(run_dirs, target, json_path, csv_path, html_folder)
        if problem:
            typer.echo(f"error: {problem.line}", err=True)
            raise typer.Exit(problem.exit_code)
        # a folder's call files not written while reading are written by the worker processes while
        # the statistics run
        if "build" not in early:
            early["build"] = target.start(runs, budget) if target is not None else None
        _report_outputs(runs, target, early["build"], status, run_dirs, samples, seed, confidence, audits,
                        json_path, csv_path, written, budget)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP: say what was written (report files are atomic)
        from callbench.runs.supervisor import requested_stop, stop_message, stop_status

        typer.echo(stop_message(requested_stop(), command=["report"], written=written), err=True)
        raise typer.Exit(stop_status()) from None
    finally:
        if early.get("build") is not None:
            early["build"].abort()  # a no-op once finished


def _target_problem(
    run_dirs: list[Path], target: HtmlTarget | None, json_path: Path | None, csv_path: Path | None,
    html_folder: Path | None,
) -> OutputProblem | None:
    """Why the outputs cannot be written where asked, as one located line, or None (checked before
    any statistics)."""
    from callbench.cli.output_paths import OutputProblem

    owned = _output_problem(run_dirs, {"--json": json_path, "--csv": csv_path,
                                       "--html": target.path if target else None})
    problem = OutputProblem(owned) if owned else None
    if problem is None and target is not None and target.named:
        problem = target.problem("--html-folder" if html_folder is not None else "--html")
    return problem


def _report_outputs(
    runs: list, target: HtmlTarget | None, build: object | None, status: Console, run_dirs: list[Path],
    samples: int, seed: int | None, confidence: float, audits: list, json_path: Path | None,
    csv_path: Path | None, written: list[str], latency_budget_s: float,
) -> None:
    """The statistics, then the terminal report, JSON, CSV and HTML (``report``'s second half), all
    with the latency budget ``latency_budget_s`` (seconds; :func:`~callbench.cli.common._report_budget`);
    each file written is appended to ``written`` (e.g. ``"JSON report r.json"``) as it is finished."""
    from rich.console import Console

    from callbench.cli.html_output import write_default_html
    from callbench.report.export.json_csv import write_csv, write_json
    from callbench.report.html.folder import ReportFolderError
    from callbench.report.model.build import build_report
    from callbench.report.model.fairness import UnfairComparisonError
    from callbench.report.model.load import ReportInputError
    from callbench.report.model.workers import WorkerCrash
    from callbench.report.terminal.fit import labelled_path
    from callbench.report.terminal.tables import render_terminal

    try:
        # the statistics take seconds to minutes on a large run: say so while they run (a transient
        # line on a terminal; nothing in a pipe)
        with status.status(f"statistics: drawing {samples:,} bootstrap samples per interval"):
            result = build_report(runs, seed=seed, n_samples=samples, confidence=confidence,
                                  judge_audits=audits, latency_budget_s=latency_budget_s)
    except (ReportInputError, UnfairComparisonError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    render_terminal(result, Console(emoji=False))
    try:
        if json_path is not None:
            write_json(result, json_path)
            written.append(f"JSON report {json_path}")
            typer.echo("\n".join(labelled_path("JSON report:", str(json_path))))
        if csv_path is not None:
            write_csv([r for run in runs for r in run.records], csv_path, result.grade_sets)
            written.append(f"CSV {csv_path}")
            typer.echo("\n".join(labelled_path("CSV (one row per episode):", str(csv_path))))
        if target is not None and target.named:
            with status.status("report: writing the HTML report"):
                target.write(result, runs, target.path, build)
            written.append(f"HTML report {target.page(target.path)}")
            typer.echo("\n".join(labelled_path("HTML report:", target.page(target.path).resolve().as_uri())))
        elif target is not None:
            with status.status("report: writing the HTML report"):
                write_default_html(result, runs, target, build)
    except (ReportFolderError, ReportInputError, WorkerCrash) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    except OSError as e:
        from callbench.runs.machine import EXIT_MACHINE_FAULT, machine_fault_message

        line = machine_fault_message(e, e.filename or run_dirs[0], option="--html/--json/--csv")
        if line is not None:
            typer.echo(f"error: {line}", err=True)
            raise typer.Exit(EXIT_MACHINE_FAULT) from None
        where = f"{e.filename}: " if e.filename else ""
        typer.echo(f"error: cannot write the report: {where}{(e.strerror or str(e)).lower()}", err=True)
        raise typer.Exit(2) from None


@app.command()
def agreement(
    run_dir: Annotated[Path, typer.Argument(help="A run folder with at least two grade sets.")],
    grade_set: Annotated[
        list[str], typer.Option("--grade-set", help="A grade set id; give exactly two (A, then B).")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    samples: Annotated[int, typer.Option("--samples", min=1, help="Bootstrap samples.")] = 2000,
    confidence: Annotated[
        float, typer.Option("--confidence", min=0.5, max=0.999, help="Interval confidence level.")
    ] = 0.95,
    seed: Annotated[
        int | None, typer.Option("--seed", min=0, help="Bootstrap seed (default: the run's seed).")
    ] = None,
) -> None:
    """Agreement between two grade sets of a run (two judges, one judge twice, or a judge and
    human labels): percent agreement and Cohen's kappa on criterion labels, quadratic-weighted
    kappa on ratings, overall, per pillar and per diagnostic, each with an interval from
    resampling episodes.

    Exit codes: 0 ok; 2 bad input (not a run, unknown grade set, not exactly two grade sets).
    """
    from rich.console import Console

    from callbench.grade.action_checks import GradeError
    from callbench.report.model.agreement import run_agreement
    from callbench.report.terminal.agreement import render_agreement

    if len(grade_set) != 2:
        typer.echo(f"error: give --grade-set exactly twice (got {len(grade_set)})", err=True)
        raise typer.Exit(2)
    try:
        result = run_agreement(
            run_dir, grade_set[0], grade_set[1], seed=seed, n_samples=samples, confidence=confidence
        )
    except (GradeError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(result.model_dump_json(indent=1))
    else:
        render_agreement(result, Console(emoji=False))


labels_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Human labels: export a labelling sheet, import it as a grade set of kind human.",
)
app.add_typer(labels_app, name="labels")


@labels_app.command("export")
def labels_export(
    run_dir: Annotated[Path, typer.Argument(help="A graded run folder.")],
    out: Annotated[Path, typer.Option("--out", help="CSV file to write.")],
    grade_set: Annotated[
        str | None,
        typer.Option("--grade-set", help="Grade set whose items to list (default: the latest)."),
    ] = None,
) -> None:
    """Write a CSV labelling sheet: one row per judged criterion or rating of every graded
    episode, with its statement, anchors, cited messages and transcript, and an empty label
    column (met / partial / not_met for criteria, 1-5 for ratings). The judges' labels are not
    included. Exit codes: 0 ok; 2 bad input; 4 the sheet cannot be written (disk full, permission
    denied, read-only folder)."""
    from callbench.grade.action_checks import GradeError
    from callbench.grade.labels import export_labels
    from callbench.runs.machine import EXIT_MACHINE_FAULT, machine_fault_message

    problem = _output_problem([run_dir], {"--out": out})
    if problem:
        typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(2)
    try:
        n = export_labels(run_dir, out, grade_set)
    except GradeError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    except OSError as e:
        line = machine_fault_message(e, out.parent, option="--out")
        if line is not None:
            typer.echo(f"error: {line.replace(str(e.filename), str(out)) if e.filename else line}", err=True)
            raise typer.Exit(EXIT_MACHINE_FAULT) from None
        typer.echo(f"error: cannot write {out}: {e.strerror or e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{n} row(s) written to {out}; fill the label column, then run:")
    typer.echo(f"callbench labels import {run_dir} {out}")


@labels_app.command("import")
def labels_import(
    run_dir: Annotated[Path, typer.Argument(help="The run folder the sheet was exported from.")],
    file: Annotated[Path, typer.Argument(help="The filled CSV sheet.")],
) -> None:
    """Store a filled labelling sheet as a new grade set of kind human and print its id (on
    stdout; a summary goes to stderr). Compare it with a judge's grade set with callbench
    agreement. Every bad row is reported as FILE: row N, column C. Exit codes: 0 ok; 2 bad input
    (nothing stored)."""
    from callbench.grade.action_checks import GradeError
    from callbench.grade.labels import import_labels, summary_lines
    from callbench.runfolder.lock import RunFolderBusy, hold_run_folder

    try:
        if not (run_dir / "manifest.json").is_file():
            raise GradeError(f"{run_dir}: no manifest.json; not a run folder")
        with hold_run_folder(run_dir, "callbench labels import"):
            result = import_labels(run_dir, file)
    except (GradeError, RunFolderBusy) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    gid, *rest = summary_lines(result)
    typer.echo(gid)
    for line in rest:
        typer.echo(line, err=True)


