"""The ``callbench`` typer app, its global options and ``version``."""

from __future__ import annotations

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


