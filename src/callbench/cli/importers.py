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
