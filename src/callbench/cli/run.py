"""``run`` and ``demo``: simulate episodes with a progress bar, then grade and report."""

from __future__ import annotations

from pathlib import Path

import typer

from callbench.cli.app import app
from callbench.cli.common import _latency_budget, _pass_rule, _role_settings, _split
from callbench.cli.execute import execute
from callbench.cli.plan import _dry_run
from callbench.cli.results import report


def _persona_library(path: Path | None) -> object:
    """The persona library at ``path`` (None without one); every problem of the file, located,
    and exit 2 when it does not validate."""
    if path is None:
        return None
    from callbench.bundle.loader import BundleError
    from callbench.bundle.personas import load_personas

    try:
        return load_personas(path)
    except BundleError as e:
        for p in e.problems:
            typer.echo(str(p), err=True)
        typer.echo(f"error: --personas {path}: {len(e.problems)} problem(s) (docs/personas.md)", err=True)
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
    out: Path | None = typer.Option(
        None, "--out", help="Run folder (created; an existing run is resumed). Required unless --dry-run."
    ),
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
    pass_rule: str = typer.Option(
        "outcome_and_overall", "--pass-rule",
        help="outcome_and_overall (default: the outcome met and overall >= the cutoff) or overall "
        "(the paper's rule: overall >= the cutoff alone; named as such in every report) or "
        "outcome_overall_latency (outcome_and_overall and the call's p90 time to first word within "
        "--latency-budget).",
    ),
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
    dry_run: bool = typer.Option(
        False, "--dry-run",
        help="Print the cost plan (episodes, requests, tokens and USD per role, with a low .. high "
        "span) and exit without calling any model or writing anything.",
    ),
    channel: str | None = typer.Option(
        None, "--channel",
        help="text: every scenario through the text channel; audio: every scenario spoken (TTS), "
        "carried over a phone line and recognised (ASR); default: the scenarios whose channel.audio "
        "is enabled are spoken (docs/voice.md).",
    ),
    voice: str = typer.Option(
        "offline", "--voice",
        help="Voice engines: offline (piper + faster-whisper tiny.en, English only, needs the [audio] "
        "extra), espeak (espeak-ng stress channel into the same recogniser), openai (an OpenAI-"
        "compatible audio API at --voice-base-url, key in $OPENAI_API_KEY).",
    ),
    agent_speech: str = typer.Option(
        "off", "--agent-speech",
        help="The agent's side on the voice channel: off (default); tts (each candidate turn is "
        "synthesised and its measured duration is the turn's talk time); line (also carried over the "
        "line and recognised: the caller simulator hears the recogniser's text). Needs spoken "
        "scenarios (docs/voice.md).",
    ),
    voice_base_url: str | None = typer.Option(
        None, "--voice-base-url", help="OpenAI-compatible API for --voice openai."),
    voice_tts_model: Path | None = typer.Option(
        None, "--voice-tts-model", help="Your own piper voice (.onnx with its .onnx.json beside it)."),
    voice_asr: str = typer.Option(
        "tiny.en", "--voice-asr",
        help="Packaged offline recogniser: tiny.en (default) or base (about twice the recognition CPU; "
        "docs/voice.md gives both error rates)."),
    voice_asr_model: Path | None = typer.Option(
        None, "--voice-asr-model", help="Your own CTranslate2 whisper model folder (faster-whisper)."),
    latency_budget: str | None = typer.Option(
        None, "--latency-budget",
        help="Budget of a turn's time to first word, e.g. 800ms or 1.2s (default 800ms): recorded in the "
        "run, the report's default, and the budget of --pass-rule outcome_overall_latency.",
    ),
    latency_note: str | None = typer.Option(
        None, "--latency-note",
        help="Free text recorded with the run's latency: region, network, anything the machine cannot tell.",
    ),
    personas: Path | None = typer.Option(
        None, "--personas",
        help="A persona library (YAML): sweep every persona across the scenarios, each persona x "
        "scenario x repeat one call (docs/personas.md).",
    ),
    max_cost: float | None = typer.Option(
        None, "--max-cost", min=0.000001,
        help="Budget in USD for the whole run folder: stop starting episodes when the spend plus the "
        "projected cost of the episodes in flight would pass it (exit 5); the same command with a "
        "higher --max-cost resumes.",
    ),
) -> None:
    """Run candidates over a bundle: simulate every episode, save traces, grade as they finish.

    Before the first episode, each role model served over the network gets one minimal request
    (authentication, model name, tool calling for candidates, JSON output for the caller and
    judges); --no-preflight skips it, and a replay_only cache needs none. Rerunning the same
    command resumes (finished episodes are kept; episodes skipped for a provider fault run again).
    Exit codes: 0 done; 2 bad input; 3 a role's provider cannot be used (preflight, or a role
    failing with HTTP 401/403/404 three times in a row); 4 disk full, permission denied or a
    read-only folder; 5 --max-cost reached (finished episodes are kept).
    """
    from callbench.models.base import ModelSettings
    from callbench.runs.executor import RoleSpec, RunConfig
    from callbench.runs.plan import ScenarioFilters
    from callbench.sim.episode import LoopLimits
    from callbench.sim.voice.setup import VoiceSettings
    from callbench.stats.latency import DEFAULT_LATENCY_BUDGET_S

    budget = _latency_budget(latency_budget)

    if out is None and not dry_run:
        typer.echo("error: --out: give the run folder (created; an existing run is resumed); only "
                   "--dry-run works without one", err=True)
        raise typer.Exit(2)
    if executor not in ("local", "ray"):
        typer.echo(f"error: --executor {executor!r}: expected local or ray", err=True)
        raise typer.Exit(2)
    if channel not in (None, "text", "audio"):
        typer.echo(f"error: --channel {channel!r}: expected text or audio", err=True)
        raise typer.Exit(2)
    if agent_speech not in ("off", "tts", "line"):
        typer.echo(f"error: --agent-speech {agent_speech!r}: expected off, tts or line", err=True)
        raise typer.Exit(2)
    if voice not in ("offline", "espeak", "openai"):
        typer.echo(f"error: --voice {voice!r}: expected offline, espeak or openai", err=True)
        raise typer.Exit(2)
    if voice_asr not in ("base", "tiny.en"):
        typer.echo(f"error: --voice-asr {voice_asr!r}: expected base or tiny.en", err=True)
        raise typer.Exit(2)
    if ray_address is not None and executor != "ray":
        typer.echo("error: --ray-address needs --executor ray", err=True)
        raise typer.Exit(2)
    per_role = _role_settings(settings)
    library = _persona_library(personas)
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
        out=out or Path("."),  # a dry run without --out plans a new run; it never reads this path
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
        pass_rule=_pass_rule(pass_rule),
        preflight=not no_preflight,
        executor=executor,
        ray_address=ray_address,
        max_cost_usd=max_cost,
        latency_budget_s=DEFAULT_LATENCY_BUDGET_S if budget is None else budget,
        latency_note=latency_note,
        personas=library,
        personas_file=str(personas or ""),
        channel=channel,
        agent_speech=agent_speech,
        voice=VoiceSettings(engines=voice, base_url=voice_base_url, tts_model=voice_tts_model,
                            asr=voice_asr, asr_model=voice_asr_model,
                            cache_dir=cache.with_name(cache.name + ".voice") if cache else None),
    )
    if dry_run:
        _dry_run(config, new_run=out is None)
        return
    _manifest, gid = execute(config, cache, cache_mode, "episodes")
    from callbench.report.terminal.fit import labelled_path

    typer.echo("\n".join(labelled_path("run folder:", str(config.out))))
    if gid:
        typer.echo(f"grade set: {gid}; report with:")
        typer.echo(f"  callbench report {config.out}")


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

    from callbench.bundle.validate.audits import load_bundle
    from callbench.report.terminal.fit import echo_wrapped, labelled_path
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
    from callbench.models.specs import parse_spec

    try:
        parse_spec(spec)
    except ValueError as e:
        typer.echo(f"error: --model: {e}", err=True)
        raise typer.Exit(2) from None
    if spec.startswith("local") and importlib.util.find_spec("llama_cpp") is None:
        from callbench.models.local.extra import install_hint

        typer.echo(f"error: the embedded model needs the local extra: {install_hint('local')}", err=True)
        raise typer.Exit(2)
    bundle = load_bundle(starter_path())
    config = demo_config(
        out, spec, bundle, scenarios, max_turns or DEMO_MAX_TURNS,
        reference=reference, model_caller=model_caller,
    )
    try:
        if fresh and clear_demo_run(config.out):
            typer.echo("\n".join(labelled_path("--fresh: deleted the earlier demo run in", str(config.out))))
        state = demo_run_state(config, bundle)
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    for line in demo_banner(config):
        typer.echo("\n".join(echo_wrapped(line)))
    typer.echo("\n".join(labelled_path("Run folder:", str(config.out))))
    note = state.message()
    if note:
        typer.echo("\n".join(echo_wrapped(note)))
    execute(config, None, "off", "demo episodes")
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


