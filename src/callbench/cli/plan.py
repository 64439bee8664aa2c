"""``run --dry-run`` (the cost plan, :mod:`callbench.runs.costplan`) and the one-line text of a
refused run input."""

from __future__ import annotations

from pathlib import Path

import typer


def _input_error(e: Exception, bundle_path: Path) -> str:
    """The one-line text of a refused input: an OS error as ``PATH: reason; what to do``
    (:func:`callbench.oserror.os_error_line`), anything else as its message."""
    if not isinstance(e, OSError):
        return str(e)
    from callbench.bundle.validate.audits import BUNDLE_FOLDER
    from callbench.oserror import os_error_line

    bundle = e.filename is not None and Path(e.filename) in (bundle_path, bundle_path.parent)
    return os_error_line(e, expected=BUNDLE_FOLDER if bundle else "")


def _dry_run(config: object) -> None:
    """Print the cost plan of ``config`` (:mod:`callbench.runs.costplan`); exit 2 on bad input."""
    from callbench.bundle.loader import BundleError
    from callbench.bundle.validate.audits import load_bundle
    from callbench.runs.costplan import plan_for_run, plan_lines
    from callbench.runs.executor import RunConfig
    from callbench.runs.session import check_run_folder

    assert isinstance(config, RunConfig)
    try:
        check_run_folder(Path(config.out))
        plan = plan_for_run(config, load_bundle(config.bundle_path))
    except BundleError as e:
        for p in e.problems:
            typer.echo(str(p), err=True)
        typer.echo(f"error: the bundle has {len(e.problems)} problem(s); run callbench validate", err=True)
        raise typer.Exit(2) from None
    except (ValueError, OSError) as e:
        typer.echo(f"error: {_input_error(e, config.bundle_path)}", err=True)
        raise typer.Exit(2) from None
    for line in plan_lines(plan):
        typer.echo(line)
    if config.max_cost_usd is not None and plan.cost_usd is not None and plan.spent_usd is not None:
        verdict = ("within" if plan.spent_usd + plan.cost_usd.expected <= config.max_cost_usd
                   else "over")
        typer.echo(f"--max-cost ${config.max_cost_usd:,.4f}: the expected total is {verdict} it")
