"""``serve-local``: the embedded model behind llama-cpp-python's OpenAI-compatible server;
``serve-backend``: one scenario's mock backend over HTTP for a hosted agent behind a tunnel."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from callbench.cli.app import app

if TYPE_CHECKING:
    from callbench.bundle.models import LoadedAgent, Scenario
    from callbench.models.deployed.base import WebhookConfig


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
        "template",
        "--chat-format",
        help="template (the GGUF's own chat template; tool calls come back as JSON text, which the "
        "printed settings parse) or chatml-function-calling (llama-cpp-python's grammar format).",
    ),
    cache_mb: int = typer.Option(
        1024,
        "--cache-mb",
        min=0,
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

    options = ServeOptions(
        host=host,
        port=port,
        model=model,
        threads=threads,
        n_ctx=n_ctx,
        chat_format=chat_format,
        cache_bytes=cache_mb << 20,
    )
    try:
        serve(options, settings_path=write_settings, echo=lambda text: print(text, flush=True))
    except ServeError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None


@app.command("serve-backend")
def serve_backend(
    bundle_path: Path = typer.Argument(..., help="Bundle folder."),
    agent_id: str = typer.Option(..., "--agent", help="The agent whose tools are served."),
    scenario_id: str = typer.Option(
        None, "--scenario", help="The scenario whose fixtures and state answer (default: the agent's first)."
    ),
    port: int = typer.Option(8787, "--port", min=0, max=65535, help="Port to listen on (0: any free one)."),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to listen on (keep loopback; expose it through a tunnel)."
    ),
    seed: int = typer.Option(0, "--seed", help="Backend seed of every call."),
) -> None:
    """Serve one scenario's mock backend over HTTP until Ctrl-C, for a hosted agent reached
    through a tunnel (docs/deployed.md). Each new platform call gets a fresh backend.

    The path secret is CALLBENCH_WEBHOOK_SECRET when set (so the URLs stay the same across
    restarts), else a random one printed once; VAPI_WEBHOOK_SECRET and RETELL_API_KEY are checked
    as in a run. Prints the routes and one line per tool call (tool and outcome, never arguments).
    """
    import os

    from callbench.bundle.loader import BundleError
    from callbench.bundle.validate.audits import load_bundle
    from callbench.runs import event_loop

    try:
        bundle = load_bundle(bundle_path)
    except (BundleError, FileNotFoundError) as e:
        typer.echo(f"error: {bundle_path}: {e}", err=True)
        raise typer.Exit(2) from None
    agent = bundle.agents.get(agent_id)
    if agent is None:
        typer.echo(
            f"error: --agent {agent_id!r}: not in the bundle ({', '.join(sorted(bundle.agents))})", err=True
        )
        raise typer.Exit(2)
    scenarios = sorted(agent.scenarios, key=lambda s: s.id)
    scenario = next((s for s in scenarios if s.id == scenario_id), None) if scenario_id else scenarios[0]
    if scenario is None:
        names = ", ".join(s.id for s in scenarios)
        typer.echo(f"error: --scenario {scenario_id!r}: not a scenario of {agent_id} ({names})", err=True)
        raise typer.Exit(2)
    from callbench.models.deployed.base import WebhookConfig

    config = WebhookConfig.from_env()
    config.host, config.port = host, port
    shown_secret = "$CALLBENCH_WEBHOOK_SECRET" if os.environ.get("CALLBENCH_WEBHOOK_SECRET") else None
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how it stops: the server is closed
        event_loop.run(_serve_backend(config, agent, scenario, seed, shown_secret))
    print("stopped", flush=True)


async def _serve_backend(
    config: WebhookConfig, agent: LoadedAgent, scenario: Scenario, seed: int, shown: str | None
) -> None:
    import asyncio

    from callbench.sim.webhook.server import WebhookServer
    from callbench.sim.webhook.standalone import CallLog, StandaloneBackend
    from callbench.trace import ToolEvent

    def heard(call: CallLog, route: str, ev: ToolEvent) -> None:
        end = " (the call ended)" if ev.ended_call else ""
        print(f"call {call.number} [{route}] {ev.name} -> {ev.outcome}{end}", flush=True)

    server = WebhookServer(config)
    try:
        base = await server.start()
        backend = StandaloneBackend(server, agent, scenario, seed, heard)
        urls = backend.new_generic()
        if shown is not None:
            urls = {k: v.replace(f"/{server.config.secret}/", f"/{shown}/") for k, v in urls.items()}
        loopback = server.config.host in ("127.0.0.1", "::1", "localhost")
        print(f"callbench backend of {agent.config.id} / {scenario.id} on {base}", flush=True)
        print(f"  vapi:    POST {urls['vapi_url']}", flush=True)
        print(f"  retell:  POST {urls['retell_url']}", flush=True)
        print(f"  generic: POST {urls['tools_url']}/<tool>", flush=True)
        print(f"  openapi: GET  {urls['openapi_url']}", flush=True)
        if loopback:
            print(
                "Listening on loopback only. To reach it from a hosted platform, run a tunnel of your "
                f"choice to port {base.rsplit(':', 1)[-1]} and use the tunnel's https URL in place "
                f"of {base}.",
                flush=True,
            )
        else:
            print(
                f"Warning: listening on {server.config.host}, not loopback: anyone who can reach it and "
                "knows the secret can call the backend.",
                flush=True,
            )
        print("Each new call id starts a fresh backend. Ctrl-C stops.", flush=True)
        await asyncio.Event().wait()
    finally:
        await server.stop()
