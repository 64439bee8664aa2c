"""The ``callbench`` command line (typer): thin over the library."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help="callbench: benchmark LLM phone agents.")


@app.command()
def version() -> None:
    """Print the callbench version."""
    from callbench import __version__

    typer.echo(__version__)
