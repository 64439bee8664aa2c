"""``callbench import``: other benchmarks' tasks as bundles (one subcommand per source)."""

from __future__ import annotations

from pathlib import Path

import typer

from callbench.cli.app import app

import_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Import another benchmark's tasks as a callbench bundle.",
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(import_app, name="import")


@import_app.command("tau2")
def import_tau2_command(
    path: Path = typer.Argument(
        ...,
        help="A tau2-bench checkout (its data/tau2/domains/retail/ is read), a data folder "
        "holding retail/, or the retail folder itself.",
    ),
    out: Path = typer.Option(..., "--out", help="The bundle folder to write (must not exist)."),
    domain: str = typer.Option("retail", "--domain", help="The tau2-bench domain (retail)."),
    force: bool = typer.Option(False, "--force", help="Replace --out if it exists."),
) -> None:
    """Write tau2-bench's tasks (sierra-research/tau2-bench, MIT) as a bundle: one agent (the
    source policy, its tools answered from a stateful backend over the source database) and one
    scenario per task, with action checks from the gold writes, a state check, criteria from
    communicate_info and nl_assertions, and the gold actions as the reference path, with the lookups
    they leave out inserted (docs/peers.md); prints those figures and any value with no source.

    Exit codes: 0 written; 2 unusable input (a missing or malformed source file, an unknown domain,
    an existing --out without --force)."""
    from callbench.importers.tau2 import Tau2ImportError, import_tau2

    try:
        summary = import_tau2(path, out, domain=domain, force=force)
    except Tau2ImportError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    except OSError as e:
        typer.echo(f"error: {out}: cannot write: {getattr(e, 'strerror', None) or e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(
        f"Wrote {summary.out}: {summary.scenarios} scenario(s) "
        f"({summary.hard} hard, {summary.medium} medium). "
        f"Check it with: callbench validate {summary.out} && callbench audit {summary.out}"
    )
    notes = summary.lookups
    typer.echo(
        f"Reference paths: {notes.inserted} lookup(s) the gold actions leave out inserted, "
        f"{notes.told} value(s) from the user's instructions added to the caller's known facts, "
        f"{len(notes.unresolved)} value(s) with no source (docs/peers.md)."
    )
    for line in notes.unresolved:
        typer.echo(f"  no source: {line}")


@import_app.command("transcript")
def import_transcript_command(
    file: Path = typer.Argument(..., help="The call: callbench JSON/JSONL, an OpenAI-style message list, "
                                "or a Vapi or Retell call object (docs/generating.md)."),
    agent: str = typer.Option(..., "--agent", help="The agent the call was made to."),
    bundle: Path = typer.Option(Path("."), "--bundle", help="The bundle folder to write the draft into."),
    model: str = typer.Option(..., "--model", help="Generator model spec (openai:, anthropic:, local, "
                               "scripted:)."),
    pii_name: list[str] = typer.Option([], "--pii-name", help="A name to replace (repeat for each); phone "
                                       "numbers, e-mails and card numbers are always replaced."),
    scenario_id: str | None = typer.Option(None, "--id", help="The draft's scenario id (default: "
                                           "the model's)."),
    language: str | None = typer.Option(None, "--language", help="The call's language tag (default: the "
                                        "agent's first)."),
    difficulty: str = typer.Option("medium", "--difficulty", help="medium or hard."),
    max_attempts: int = typer.Option(3, "--max-attempts", min=1, max=10, help="Requests: the first "
                                     "and the repairs."),
    settings: Path | None = typer.Option(None, "--settings", help="YAML of the generator's model settings."),
    cache: Path | None = typer.Option(None, "--cache", help="Response cache file (SQLite)."),
    cache_mode: str = typer.Option("read_write", "--cache-mode", help="off, read_write or replay_only."),
) -> None:
    """Draft a scenario from a real call: PII replaced first (phones, e-mails, cards, --pii-name
    names), fixtures and FOR REVIEW action checks from its tool calls, the caller's brief, goal,
    criteria and reference path by the generator model through its audit-and-repair loop. The
    draft is written unreviewed (generation.yaml, provenance.yaml); check it with callbench review.

    Exit codes: 0 written; 1 no draft passed the audit (last problems listed); 2 bad input (an
    unreadable transcript, an unknown agent, a call already imported); 3 the provider failed."""
    from callbench.generate.generator import GenerateError
    from callbench.generate.settings import load_generator_settings
    from callbench.generate.transcript import TranscriptError
    from callbench.generate.transcript_import import ImportOptions, import_transcript
    from callbench.models.base import InfrastructureError, ModelSettings
    from callbench.models.registry import create_client
    from callbench.runs import event_loop
    from callbench.runs.session import open_cache

    if not bundle.is_dir():
        typer.echo(f"error: --bundle {bundle}: no such folder", err=True)
        raise typer.Exit(2)
    try:
        options = ImportOptions(path=file, agent=agent, pii_names=pii_name, scenario_id=scenario_id,
                                language=language, difficulty=difficulty, max_attempts=max_attempts)
        model_settings = load_generator_settings(settings, model) if settings else ModelSettings()
        response_cache = open_cache(cache, cache_mode)
        client = create_client(model, model_settings, cache=response_cache, role="generator")
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None

    async def go() -> object:
        try:
            return await import_transcript(bundle, client, options)
        finally:
            await client.aclose()

    try:
        outcome = event_loop.run(go())
    except (TranscriptError, GenerateError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    except InfrastructureError as e:
        typer.echo(f"error: the provider failed: {e}", err=True)
        raise typer.Exit(3) from None
    except OSError as e:
        typer.echo(f"error: {bundle}: cannot write: {getattr(e, 'strerror', None) or e}", err=True)
        raise typer.Exit(2) from None
    finally:
        if response_cache is not None:
            response_cache.close()
    from callbench.generate.transcript_import import ImportOutcome

    assert isinstance(outcome, ImportOutcome)
    found = ", ".join(f"{n} {k}(s)" for k, n in outcome.replaced.items() if n) or "nothing"
    typer.echo(f"PII replaced before anything was sent or written: {found}.")
    if outcome.unknown_tools:
        typer.echo(f"tools the call used that agent {agent} does not have (no fixture or check drafted): "
                   f"{', '.join(outcome.unknown_tools)}")
    if outcome.failed is not None:
        typer.echo(f"no draft written ({outcome.failed.reason}, {outcome.failed.attempts} attempt(s)); "
                   "last problems:")
        for p in outcome.failed.last_problems[:10]:
            typer.echo(f"    {p}")
        raise typer.Exit(1)
    typer.echo(f"wrote {outcome.file} (unreviewed; {outcome.drafted_checks} action check(s) marked "
               "FOR REVIEW). "
               f"Next: callbench review {bundle} --agent {agent}")
