"""``serve-local``: the embedded model behind llama-cpp-python's OpenAI-compatible server."""

from __future__ import annotations

from pathlib import Path

import typer

from callbench.cli.app import app


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
        1024, "--cache-mb", min=0,
        help="RAM prompt cache in MB (0: off); every byte of a cached state counts toward it.",
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


