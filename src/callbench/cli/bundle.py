"""Bundle commands: ``validate``, ``audit``, ``inspect``, ``schema``, ``provenance``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from callbench.cli.app import app
from callbench.cli.common import _one_shot_gc, _role_settings, _split
from callbench.oserror import os_error_line

if TYPE_CHECKING:
    from callbench.bundle.validate import cache as validate_cache


@app.command()
def validate(
    path: Path = typer.Argument(..., help="A bundle folder (or its bundle.yaml)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list of {file, path, code, message}."),
    providers: str = typer.Option(
        "openai,anthropic", "--providers",
        help="Provider targets whose request rules every tool schema must pass, comma-separated: "
             "openai, openai-strict, anthropic, gemini (warnings only), or all; 'none' skips."),
) -> None:
    """Run the static audits of a bundle (schemas, references, matchers, excerpts, provenance) and
    the reference-path replay, check every tool schema against the chosen providers' request rules
    (a schema OpenAI or Anthropic would reject is a problem, code provider.<target>; Gemini's
    subset gives warnings), and list every problem at once. `callbench audit` runs these and
    the measurement-validity audits (do-nothing floor, hidden-value leaks, channel events).

    Exit codes: 0 clean; 1 problems found; 2 the path cannot be read or --providers is unknown.
    """
    from callbench.bundle.validate import cache as validate_cache

    options = {"json": str(as_json), "providers": providers}
    key = validate_cache.cache_key(path, options)
    replay = validate_cache.load(key) if key is not None else None
    if replay is None:
        replay = _validate_uncached(path, as_json, providers)
        # kept only when the bundle is as it was before the audits (an edit saved while they ran
        # would otherwise file the new content's result under the old content's key): ~8 ms
        if key is not None and validate_cache.cache_key(path, options) == key:
            validate_cache.save(key, replay)
    for stream, text in replay.lines:
        typer.echo(text, err=stream == "err")
    raise typer.Exit(replay.exit_code)


def _validate_uncached(path: Path, as_json: bool, providers: str) -> validate_cache.Replay:
    """``validate``'s work: its stdout and stderr text and exit code (``validate_cache.Replay``)."""
    import json

    from callbench.bundle.validate.audits import validate_safely
    from callbench.bundle.validate.cache import Replay
    from callbench.models.remote.rules import parse_targets

    _one_shot_gc()
    lines: list[tuple[str, str]] = []

    def echo(line: str, to_err: bool = False) -> None:
        lines.append(("err" if to_err else "out", line))

    try:
        targets = [] if providers.strip().lower() == "none" else parse_targets(providers)
    except ValueError as e:
        echo(f"error: --providers: {e}", True)
        return Replay(tuple(lines), 2)
    outcome = validate_safely(path)
    if outcome.bundle is not None and targets:
        from callbench.runs.provider_check import bundle_provider_problems

        errors, warnings = bundle_provider_problems(outcome.bundle, targets)
        outcome.problems.extend(errors)
        for w in warnings:
            echo(f"warning: {w}", as_json)
    if as_json:
        echo(json.dumps([p.model_dump() for p in outcome.problems], ensure_ascii=False, indent=2))
    elif not outcome.readable:
        echo(f"error: {path}: {outcome.problems[0].message}", True)
    else:
        for p in outcome.problems:
            echo(str(p))
        b = outcome.bundle
        if outcome.problems:
            n_files = len({p.file for p in outcome.problems})
            echo(f"{len(outcome.problems)} problem(s) in {n_files} file(s)")
        elif b is not None:
            echo(
                f"OK: {b.meta.name} {b.meta.version} (hash {b.content_hash[:12]}): "
                f"{len(b.agents)} agent(s), {len(b.scenarios())} scenario(s), no problems"
            )
    if outcome.bundle is not None:  # a warning, never a problem: the exit code stays as it is
        from callbench.bundle.provenance import unreviewed_generated

        waiting = unreviewed_generated(Path(outcome.bundle.root))
        if waiting:
            shown = ", ".join(waiting[:5]) + (", ..." if len(waiting) > 5 else "")
            echo(f"warning: {len(waiting)} generated scenario(s) not reviewed yet ({shown}); "
                 f"review them with: callbench review {path}", as_json)
    return Replay(tuple(lines), outcome.exit_code)


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
    min_balanced_accuracy: float = typer.Option(
        0.80, "--min-balanced-accuracy", min=0.0, max=1.0,
        help="With --judges: the gate's lowest balanced accuracy a judge may have (docs/validity.md)."),
    max_null_met: float = typer.Option(
        0.10, "--max-null-met", min=0.0, max=1.0,
        help="With --judges: the gate's largest share of null-trace criteria a judge may call met."),
    note: str = typer.Option("", "--note", help="With --save: a note kept with the saved validation."),
) -> None:
    """Audit what a bundle's scores measure, beyond validate: replay every scenario's reference
    path through the episode loop and grading (every action check must be met, every authored
    channel event must apply, every reference argument must be known before its call), play
    do-nothing candidates (scripted:hangup, scripted:talk) and gaming candidates
    (scripted:junk-lookups, scripted:junk-all, scripted:claim-done) for the floor, and look for
    hidden values written, in any normalised form, in the instructions, the tool schemas or the
    scenario's variables (and, as validate does by default, tool schemas OpenAI or Anthropic would
    reject). With --judges, also derive contrastive traces from each reference (no tool calls, one
    wrong argument, cut short), grade all of them with the judges and report each judge's balanced
    accuracy; a judge under --min-balanced-accuracy, or calling more than --max-null-met of the
    null-trace criteria met, fails the gate (a problem). --save keeps the validation where
    callbench report finds it.

    Exit codes: 0 no problem; 1 problems found (a judge failing the gate among them); 2 unusable
    input (unreadable path, a bundle that cannot be loaded, unknown scenario ids, bad judge options).
    """
    import json

    from rich.console import Console

    from callbench.audit.core import AuditReport, audit_bundle
    from callbench.audit.judges import AuditJudges
    from callbench.audit.store import save_judge_audit
    from callbench.bundle.validate.audits import validate_safely
    from callbench.report.terminal.audit import render_audit
    from callbench.runs import event_loop

    _one_shot_gc()

    if judges != (task_judge is not None and conversation_judge is not None) or (
            not judges and (task_judge or conversation_judge or save)):
        typer.echo("error: --judges needs --task-judge and --conversation-judge (and they, and --save, "
                   "need --judges)", err=True)
        raise typer.Exit(2)
    outcome = validate_safely(path)
    if outcome.bundle is None and not path.is_dir():  # a missing path or a file: one line
        typer.echo(f"error: {path}: {'not a folder' if path.exists() else 'no such folder'}; nothing was "
                   "audited", err=True)
        raise typer.Exit(2)
    if outcome.bundle is None:
        for p in outcome.problems:
            typer.echo(str(p), err=True)
        typer.echo(f"error: {path}: the bundle cannot be loaded; nothing was audited", err=True)
        raise typer.Exit(2)
    from callbench.models.remote.rules import DEFAULT_TARGETS, TARGETS
    from callbench.runs.provider_check import bundle_provider_problems

    # tool schemas OpenAI or Anthropic would reject, as validate reports them by default
    defaults = [TARGETS[t] for t in DEFAULT_TARGETS]
    outcome.problems.extend(bundle_provider_problems(outcome.bundle, defaults)[0])
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
        clients = AuditJudges(made["task_judge"], made["conversation_judge"], concurrency=concurrency,
                              min_balanced_accuracy=min_balanced_accuracy, max_null_met=max_null_met)

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
        result = event_loop.run(go())
    except KeyError as e:
        typer.echo(f"error: {e.args[0]}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(json.dumps(result.to_json(), ensure_ascii=False, indent=1))
    else:
        render_audit(result, Console(emoji=False))
    if save is not None and result.judges is not None:
        result.judges.note = note
        try:
            written = save_judge_audit(result.judges, save)
        except OSError as e:
            typer.echo(f"error: cannot write {save}: {e}", err=True)
            raise typer.Exit(2) from None
        typer.echo(f"judge validation saved: {written}", err=True)
    raise typer.Exit(1 if result.problems else 0)


@app.command()
def inspect(
    path: Path = typer.Argument(..., help="A bundle folder (or its bundle.yaml)."),
    as_json: bool = typer.Option(False, "--json", help="Print the composition as JSON."),
    agent: str | None = typer.Option(None, "--agent", help="Show this agent's coverage section by section."),
    scenarios: bool = typer.Option(
        False, "--scenarios",
        help="List every scenario id (what run --scenarios takes), with its agent, language and "
        "difficulty, one a line.",
    ),
) -> None:
    """Summarise a bundle's composition: agents, scenarios by language and difficulty, tools per
    agent, rendered instruction length (median, min, max), and coverage: which sections of each
    operating document and which tools the agent's scenarios exercise, and which none does.
    --scenarios lists the scenario ids instead.

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
        from callbench.bundle.validate.audits import BUNDLE_FOLDER

        typer.echo(f"error: {os_error_line(e, path, expected=BUNDLE_FOLDER)}", err=True)
        raise typer.Exit(2) from None
    except Exception as e:  # never a traceback on any input
        typer.echo(f"error: {path}: cannot inspect: {type(e).__name__}: {e}", err=True)
        raise typer.Exit(1) from None
    if comp is None:
        for p in problems:
            typer.echo(str(p), err=True)
        typer.echo(f"error: {path}: the bundle cannot be loaded ({len(problems)} problem(s))", err=True)
        raise typer.Exit(1)
    if scenarios and bundle is not None:
        for a, s in bundle.scenarios():
            state = "" if a.config.active else ", agent inactive"
            typer.echo(f"{s.id}  (agent {a.config.id}, {s.language}, {s.difficulty}{state})")
    elif as_json:
        typer.echo(comp.model_dump_json(indent=2))
    else:
        from callbench.bundle.inspect import coverage_tables
        from callbench.report.terminal.fit import print_table

        console = Console(emoji=False)
        try:
            tables = composition_tables(comp) + coverage_tables(comp, agent)
        except KeyError as e:
            typer.echo(f"error: --agent: {e.args[0]}", err=True)
            raise typer.Exit(2) from None
        for table in tables:
            print_table(console, table)
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
    Exit codes: 0 ok; 1 problems (or bad options); 2 the path cannot be read; 4 the provenance file
    cannot be written (disk full, permission denied, read-only folder).
    """
    import json

    from callbench.bundle.loader import load_bundle_collect
    from callbench.bundle.provenance import (
        MADE_MEANING,
        REVIEW_MEANING,
        Generation,
        Review,
        audit_provenance,
        machine_written,
        provenance_path,
        today,
        update_provenance,
    )
    from callbench.bundle.validate.audits import scenario_files

    if path.is_file() and path.stem == "bundle":
        path = path.parent
    try:
        bundle, problems = load_bundle_collect(path)
    except OSError as e:
        from callbench.bundle.validate.audits import BUNDLE_FOLDER

        typer.echo(f"error: {os_error_line(e, path, expected=BUNDLE_FOLDER)}", err=True)
        raise typer.Exit(2) from None
    if bundle is None:
        for p in problems:
            typer.echo(str(p), err=True)
        typer.echo(f"error: {path}: the bundle cannot be loaded ({len(problems)} problem(s))", err=True)
        raise typer.Exit(1)
    files = scenario_files(bundle)
    if not update:
        if provenance_path(path) is None:
            machine = machine_written(path, files)
            if machine:
                typer.echo(f"{path} has no provenance file, and {len(machine)} scenario file(s) were written "
                           f"by callbench generate without their records ({', '.join(machine[:5])}): rerun "
                           "that generate command, delete them, or record them with --update --made "
                           "generated --model M")
            else:
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
        from callbench.runs.machine import EXIT_MACHINE_FAULT, machine_fault_message

        line = machine_fault_message(e, path, option="bundle")
        if line is not None:
            typer.echo(f"error: {line}", err=True)
            raise typer.Exit(EXIT_MACHINE_FAULT) from None
        typer.echo(f"error: cannot write the provenance file: {getattr(e, 'strerror', None) or e}", err=True)
        raise typer.Exit(1) from None
    for label, ids in (("added", result.added), ("new hash", result.rehashed), ("removed", result.removed)):
        for sid in ids:
            typer.echo(f"{label}: {sid}")
    typer.echo(f"{result.path}: {len(result.added)} added, {len(result.rehashed)} re-hashed, "
               f"{len(result.removed)} removed, {result.unchanged} unchanged")


