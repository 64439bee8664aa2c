"""The ``new-agent``, ``generate`` and ``review`` commands, registered on the main typer
app by :func:`register`; thin over :mod:`callbench.generate`."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from callbench.cli.common import _bundle_folder


def _terminal() -> bool:
    """Whether stdin is a terminal (then missing answers are asked for)."""
    return sys.stdin.isatty()


def _split(values: list[str]) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def new_agent(
    bundle: Path = typer.Argument(..., help="Bundle folder (created with a bundle.yaml when missing)."),
    prompt: Path = typer.Option(..., "--prompt", help="The agent's system prompt (operating document) file."),
    tools: Path = typer.Option(
        ..., "--tools", help="Tools JSON: OpenAI function tools (or Anthropic tools)."
    ),
    agent_id: str | None = typer.Option(None, "--id", help="Agent id (default: from the prompt file name)."),
    name: str | None = typer.Option(None, "--name", help="Display name of the agent."),
    domain: str = typer.Option("general", "--domain"),
    languages: list[str] = typer.Option([], "--languages", help="BCP 47 tags served (default en)."),
    direction: str = typer.Option("inbound", "--direction", help="inbound or outbound."),
    call_ending: list[str] = typer.Option([], "--call-ending", help="A call-ending tool (repeatable)."),
    success: list[str] = typer.Option(
        [],
        "--success",
        help="Success condition TOOL:FIELD=VALUE of a call-ending tool's result (repeatable).",
    ),
    template: str = typer.Option(
        "auto", "--template", help="auto: translate the prompt's {{ }} (Liquid, as Vapi and Retell write "
        "it) into declared variables with defaults; none: keep the prompt verbatim, no templating."),
    platform_export: Path | None = typer.Option(
        None, "--platform-export", help="The agent's export from a voice platform (JSON: a Vapi "
        "assistant, a Retell LLM or agent): who speaks first is read from it (firstMessageMode and "
        "firstMessage; begin_message, start_speaker) into the agent's first_user_message."),
    first_user_message: str | None = typer.Option(
        None, "--first-user-message", help="Who speaks first, over what --platform-export says: "
        "none (the agent greets first), empty (an empty user turn comes first) or text:WORDS."),
) -> None:
    """Make an agent folder from a system prompt and a tools file, and validate it.

    Without --call-ending, asks for the call-ending tools and their success conditions when run in a
    terminal. Exit codes: 0 written; 1 the new agent has validation problems (nothing is kept);
    2 bad input.
    """
    from callbench.generate.new_agent import NewAgentError, make_agent
    from callbench.generate.tools_import import ToolsFileError, read_tools_file

    if template not in ("auto", "none"):
        typer.echo(f"error: --template {template!r}: use auto or none", err=True)
        raise typer.Exit(2)
    endings, conds = list(call_ending), list(success)
    if not endings and _terminal():
        try:
            names = [t.name for t in read_tools_file(tools)]
        except ToolsFileError as e:
            typer.echo(f"error: --tools {e}", err=True)
            raise typer.Exit(2) from None
        typer.echo(f"tools: {', '.join(names)}")
        endings = _split([typer.prompt("Call-ending tool(s), comma-separated")])
        for tool in endings:
            conds.append(
                f"{tool}:"
                + typer.prompt(f"Success condition of {tool}'s result (FIELD=VALUE)", default="status=ended")
            )
    try:
        result = make_agent(
            bundle,
            prompt,
            tools,
            agent_id=agent_id,
            name=name,
            domain=domain,
            languages=_split(languages) or None,
            direction=direction,
            call_ending=_split(endings),
            success=conds,
            template="none" if template == "none" else "auto",
            platform_export=platform_export,
            first_user_message=first_user_message,
        )
    except NewAgentError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    for note in result.notes:
        typer.echo(f"note: {note}")
    if result.problems:
        for p in result.problems:
            typer.echo(str(p))
        typer.echo(f"{len(result.problems)} problem(s); the agent was not kept", err=True)
        raise typer.Exit(1)
    typer.echo(
        f"wrote {result.agent_dir} (agent.yaml, prompt.md, scenarios/)"
        + (" and bundle.yaml" if result.created_bundle_file else "")
        + "; it validates"
    )


def _interrupted(bundle: Path) -> None:
    """Ctrl-C: say what is kept and how to resume, then exit 130 at once. Every scenario written
    so far was committed with its records (``callbench.generate.records``), and the request in
    progress is abandoned: a local model's computation runs in a worker thread that cannot be
    cancelled, and waiting for it (the interpreter joins worker threads at exit) could take many
    minutes, so the process exits without waiting when such a thread is still busy."""
    import os
    import threading

    typer.echo(
        f"interrupted: the request in progress was abandoned; every scenario written so far is recorded "
        f"in {bundle / 'generation.yaml'} and provenance.yaml. Run the same command to resume.",
        err=True,
    )
    main = threading.main_thread()
    busy = [t for t in threading.enumerate() if t is not main and t.is_alive() and not t.daemon]
    if busy:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    raise typer.Exit(130)


def generate(
    bundle: Path = typer.Argument(..., help="Bundle folder."),
    agent: str = typer.Option(..., "--agent", help="Agent id."),
    model: str = typer.Option(
        ..., "--model", help="Generator model spec (openai:, anthropic:, local, scripted:)."
    ),
    n: int = typer.Option(10, "--n", min=1, max=200, help="Scenarios to generate."),
    languages: str | None = typer.Option(None, "--languages", help="Language mix: hi,en or hi-IN=6,en-IN=4."),
    difficulty: str | None = typer.Option(None, "--difficulty", help="Difficulty mix, e.g. medium=5,hard=5."),
    seed: int = typer.Option(0, "--seed", min=0),
    settings: Path | None = typer.Option(None, "--settings", help="YAML of the generator's model settings."),
    max_attempts: int = typer.Option(
        3, "--max-attempts", min=1, max=10, help="Requests per scenario: the first and the repairs."
    ),
    sections_per_item: int = typer.Option(
        2, "--sections-per-item", min=1, max=6, help="Most sections of the operating document one "
        "scenario is asked to test; with a small --n the plan picks sections (untested ones first) and "
        "lists the rest as not planned."),
    cache: Path | None = typer.Option(None, "--cache", help="Response cache file (SQLite)."),
    cache_mode: str = typer.Option("read_write", "--cache-mode", help="off, read_write or replay_only."),
) -> None:
    """Generate audited scenarios for an agent from its own operating document and tools.

    Each scenario is requested as JSON constrained by the scenario schema, checked (schema, bundle
    ids, near-duplicates, callbench validate with the reference replay) and sent back with its
    located problems for repair; only scenarios that pass are written. The batch is recorded in
    generation.yaml and provenance.yaml (review: unreviewed; see callbench review).
    Ctrl-C stops the batch at once (the request in progress is abandoned); every scenario written
    before it keeps its records, and running the same command resumes the batch.
    Exit codes: 0 every scenario written; 1 some were not (listed); 2 bad input; 3 the provider
    failed (the batch stopped; what was written is recorded); 130 interrupted.
    """
    from callbench.generate.generator import GenerateError, GenerateOptions, ItemResult, generate_batch
    from callbench.generate.settings import load_generator_settings
    from callbench.models.base import ModelSettings
    from callbench.models.registry import create_client
    from callbench.runs import event_loop
    from callbench.runs.session import open_cache

    _bundle_folder(bundle)
    try:
        model_settings = load_generator_settings(settings, model) if settings else ModelSettings()
        response_cache = open_cache(cache, cache_mode)
        client = create_client(model, model_settings, cache=response_cache, role="generator")
        options = GenerateOptions(
            agent=agent, n=n, languages=languages, difficulty=difficulty, seed=seed,
            max_attempts=max_attempts, sections_per_item=sections_per_item,
        )
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None

    def show(r: ItemResult) -> None:
        if r.scenario_id:
            typer.echo(f"item {r.item + 1}/{n}: wrote {r.scenario_id} ({r.attempts} attempt(s))")
        elif r.failed is not None:
            typer.echo(
                f"item {r.item + 1}/{n}: not written ({r.failed.reason}, {r.attempts} attempt(s)); "
                "last problems:"
            )
            for p in r.failed.last_problems[:10]:
                typer.echo(f"    {p}")

    async def go() -> object:
        try:
            return await generate_batch(bundle, client, options, on_item=show)
        finally:
            await client.aclose()

    try:
        outcome = event_loop.run(go())
    except GenerateError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        if response_cache is not None:
            response_cache.close()
            response_cache = None
        _interrupted(bundle)
    finally:
        if response_cache is not None:
            response_cache.close()
    from callbench.generate.generator import GenerationOutcome

    assert isinstance(outcome, GenerationOutcome)
    if outcome.resumed:
        typer.echo(f"resumed batch {outcome.batch_id}: {outcome.resumed} item(s) were done by an earlier, "
                   "interrupted run")
    if outcome.rolled_back:
        typer.echo(f"removed the records of {len(outcome.rolled_back)} scenario(s) an interrupted batch "
                   f"left without their file ({', '.join(outcome.rolled_back)}); generated again below")
    if outcome.uncovered:
        typer.echo(f"not planned: {len(outcome.uncovered)} section(s) no scenario of this batch was asked to "
                   f"test ({'; '.join(outcome.uncovered)}); a larger --n or another batch covers them")
    cost = "unknown" if outcome.usage.cost_usd is None else f"${outcome.usage.cost_usd:.4f}"
    typer.echo(
        f"batch {outcome.batch_id}: {len(outcome.written)} written, {len(outcome.failed)} not; "
        f"{outcome.usage.input_tokens:,} input + {outcome.usage.output_tokens:,} output tokens, cost {cost}; "
        f"recorded in {outcome.manifest}."
        + (f" Next: callbench review {bundle} --agent {agent}" if outcome.written else "")
    )
    if outcome.stopped:
        typer.echo(f"error: the batch stopped: {outcome.stopped}", err=True)
        raise typer.Exit(3)
    raise typer.Exit(0 if not outcome.failed else 1)


def review(
    bundle: Path = typer.Argument(..., help="Bundle folder."),
    agent: str | None = typer.Option(None, "--agent", help="Only this agent's scenarios."),
    accept: list[str] = typer.Option(
        [], "--accept", help="Scenario ids to accept (repeatable or comma-separated)."
    ),
    reject: list[str] = typer.Option(
        [], "--reject", help="Scenario ids to reject (their files are removed)."
    ),
    reviewer: str | None = typer.Option(None, "--reviewer", help="Who reviewed (recorded with the time)."),
    notes: str = typer.Option("", "--notes", help="A note recorded with the decisions."),
    show_all: bool = typer.Option(False, "--all", help="Show reviewed scenarios too."),
) -> None:
    """Show generated scenarios awaiting review, and record accept / reject decisions.

    With --accept/--reject the decisions are recorded (needs --reviewer). Without them, each
    unreviewed scenario is shown; on a terminal you are asked to accept, reject or skip each one.
    Exit codes: 0 done; 2 bad input.
    """
    from callbench.generate.manifest import ManifestError
    from callbench.generate.review import ReviewError, pending, record_review, render_pending

    acc, rej = _split(accept), _split(reject)
    _bundle_folder(bundle)
    try:
        if acc or rej:
            res = record_review(bundle, accept=acc, reject=rej, reviewer=reviewer or "", notes=notes)
            typer.echo(
                f"accepted {len(res.accepted)}, rejected {len(res.rejected)} (by {reviewer}); "
                "recorded in generation.yaml and provenance.yaml"
            )
            return
        items = pending(bundle, agent, include_reviewed=show_all)
    except (ReviewError, ManifestError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    if not items:
        typer.echo("no generated scenario awaits review")
        return
    interactive = _terminal() and not show_all
    if interactive and not reviewer:
        reviewer = typer.prompt("Reviewer name")
    for k, item in enumerate(items):
        typer.echo(("=" * 78) + f"\n({k + 1}/{len(items)}) " + render_pending(item) + "\n")
        if not interactive:
            continue
        answer = typer.prompt("accept, reject or skip? [a/r/s]", default="s").strip().lower()[:1]
        if answer in ("a", "r"):
            record_review(
                bundle,
                accept=[item.scenario_id] if answer == "a" else [],
                reject=[item.scenario_id] if answer == "r" else [],
                reviewer=reviewer or "",
            )
            typer.echo(f"{item.scenario_id}: {'accepted' if answer == 'a' else 'rejected'}")
    if not interactive:
        typer.echo(
            f"{len(items)} scenario(s) shown; record decisions with --accept/--reject ID --reviewer NAME"
        )


def register(app: typer.Typer) -> None:
    """Add the three commands to ``app``."""
    app.command("new-agent")(new_agent)
    app.command("generate")(generate)
    app.command("review")(review)
