"""``callbench demo``: a small slice of the starter bundle with the embedded local model in every role.

The slice is chosen, not hard-coded: ``n`` medium scenarios in ``n`` languages whose prompts cost
the embedded model the fewest tokens to read. On a 2-core CPU prompt processing dominates (about
70 tokens a second for the 0.5B model on short prompts, under 50 past 8,000 tokens), and llama.cpp
re-reads only what follows the longest prefix shared with the previous prompt of the same role
(:mod:`callbench.models.local.client`): the static part of an agent's operating document is read once for
all its scenarios, so the cost model counts it once per agent (see
:func:`choose_demo_scenarios`). The loop is capped at ``DEMO_MAX_TURNS`` caller turns.

Beside the model, the demo runs the bundle's reference path as a second candidate
(``scripted:reference``, :data:`REFERENCE_SPEC`): the authored correct call replayed turn by turn,
with its tool calls going through the mock backend. It costs no model time for its own turns (its
calls still need the caller and both judges), and it gives the report what a smoke-test model alone
cannot: tool calls and results, checks met beside checks not met, speech in each scenario's language
and script, and a paired comparison with intervals. It is a reference ceiling, not a model, and
:func:`demo_banner` says so, with exactly which roles ran on the embedded smoke-test model.

The run folder defaults to one outside any checkout (:func:`default_demo_out`), named by the
demo's configuration, so a different slice never collides with a finished one; a rerun says whether
it reuses a finished run or resumes one (:func:`demo_run_state`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import shutil
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from callbench import __version__
from callbench.bundle.models import Bundle, LoadedAgent, Scenario
from callbench.bundle.render import render_instructions, static_prefix_chars
from callbench.grade.prompts import PROMPT_VERSION
from callbench.models.base import ModelSettings
from callbench.models.local.format import tools_block_position
from callbench.models.specs import parse_spec
from callbench.runfolder.manifest import MANIFEST
from callbench.runfolder.store import RunStore
from callbench.runs.executor import RoleSpec, RunConfig, rerun_ids
from callbench.runs.plan import ScenarioFilters, plan_episodes
from callbench.sim.episode import LoopLimits

DEMO_MAX_TURNS = 2
DEMO_MAX_TOOL_CALLS = 4
"""Tool calls per candidate turn in the demo (the harness default is the paper's ten): a small
model that chains one call per request would otherwise spend ten or more requests on one turn."""
DEMO_CALLER_TEMPERATURE = 0.7
"""The caller samples (seeded, so reproducible): a rejected turn's retry then differs from it."""
DEMO_MAX_TOKENS = {"candidate": 320, "caller": 160, "judge": 1000}
"""Output caps per role (tokens): a phone turn is short; a judge's JSON lists every item."""
REFERENCE_SPEC = "scripted:reference"
"""The demo's second candidate: each scenario's reference path replayed
(:class:`callbench.models.scripted.models.ReferenceCandidate`)."""
PLAN_CALLER_SPEC = "scripted:plan"
"""The demo's default caller (:class:`callbench.models.scripted.models.PlanCaller`)."""
PLAN_CALLER_NOTE = (
    "speaks each step of the caller's brief in order, in the brief's own words, language and "
    "script, with no model"
)
REFERENCE_NOTE = (
    "the bundle's reference path replayed turn by turn, with no model: the authored correct call, "
    "a reference ceiling to compare against, not a model"
)


def default_demo_model() -> str:
    """``local:0.5b`` when the 0.5B weights are installed (the ``[local]`` extra), else ``local``
    (the best installed variant, or a clear install hint when there is none).

    The demo prefers the smaller variant even beside 1.5B: on a 2-core CPU 1.5B reads prompts about
    2.3 times slower (measured: 6,688 prompt tokens in 238 s against 116 s), which breaks the
    demo's time budget. Not the Q4_0 copy (``local:0.5b-q4_0``): it read the first prompt 20%
    faster (101 s against 126 s), but as the candidate it chained a tool call per request up to
    the loop limit on its first turn (12 requests of 119 tokens), which cost far more.
    """
    from callbench.models.local.weights import installed_variants

    return "local:0.5b" if "0.5b" in installed_variants() else "local"


def starter_path() -> Path:
    """The starter bundle installed with the package."""
    return Path(str(files("callbench") / "examples" / "starter"))


def estimate_tokens(text: str) -> float:
    """Rough token count for the embedded Qwen tokenizer (DESIGN.md: English about 5 characters a
    token, Indic scripts about 1): ASCII characters / 4.5 plus one per other character."""
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return ascii_chars / 4.5 + (len(text) - ascii_chars)


@dataclass(frozen=True)
class PromptCost:
    """Estimated prompt tokens of an agent's scenarios for the local model: ``shared`` is read once
    per agent (the operating document up to the first character that differs between its
    scenarios, and the tools list when the local format puts it before that character);
    ``per_scenario`` maps a scenario id to what each call adds (the rest of the rendered document,
    the tools list otherwise, and the caller's brief)."""

    shared: float
    per_scenario: dict[str, float]


def prompt_cost(agent: LoadedAgent) -> PromptCost:
    """The :class:`PromptCost` of ``agent``'s scenarios (estimates from :func:`estimate_tokens`).

    The tools block counts as shared when the local format places it before the first character
    that differs between scenarios (:func:`~callbench.models.local.format.tools_block_position`),
    else once per scenario."""
    tools = estimate_tokens(json.dumps([t.model_dump() for t in agent.config.tools], ensure_ascii=False))
    rendered = {s.id: render_instructions(agent, s) for s in agent.scenarios}
    # a character prefix is what is wanted here (the shared start of the rendered documents)
    common = os.path.commonprefix(list(rendered.values())) if rendered else ""  # noqa: RUF071
    shared, per = estimate_tokens(common), {}
    tools_shared = bool(rendered) and all(
        tools_block_position(text, static_prefix_chars(agent, text)) <= len(common)
        for text in rendered.values()
    )
    if tools_shared:
        shared += tools
    for s in agent.scenarios:
        per[s.id] = (
            estimate_tokens(rendered[s.id][len(common) :])
            + (0.0 if tools_shared else tools)
            + estimate_tokens(s.brief.model_dump_json())
        )
    return PromptCost(shared=shared, per_scenario=per)


def choose_demo_scenarios(bundle: Bundle, n: int = 3, max_agents: int = 16) -> list[Scenario]:
    """Pick ``n`` medium scenarios in ``n`` different languages with the lowest total prompt cost.

    Total cost = the ``shared`` cost of every agent used + the ``per_scenario`` cost of every
    scenario (:func:`prompt_cost`). Exact: every subset of the active agents that have medium
    scenarios is tried (at most ``2**max_agents``); within a subset, the cheapest scenario of each
    language, then the ``n`` cheapest languages. Ties break on agent ids, then scenario ids, so the
    choice is stable. Returned in (agent, scenario id) order, so one agent's calls run one after the
    other. Raises ``ValueError`` when fewer than ``n`` languages have a medium scenario, or when more
    than ``max_agents`` agents would have to be searched.
    """
    costs: dict[str, PromptCost] = {}
    medium: dict[str, list[Scenario]] = {}
    for agent_id in sorted(bundle.agents):
        agent = bundle.agents[agent_id]
        scen = [s for s in agent.scenarios if s.difficulty == "medium"]
        if agent.config.active and scen:
            medium[agent_id] = sorted(scen, key=lambda s: s.id)
            costs[agent_id] = prompt_cost(agent)
    languages = {_lang(s) for scen in medium.values() for s in scen}
    if len(languages) < n:
        raise ValueError(
            f"the bundle has medium scenarios in only {len(languages)} language(s); the demo needs {n}"
        )
    if len(medium) > max_agents:
        raise ValueError(f"{len(medium)} agents with medium scenarios: too many to search (max {max_agents})")
    ids = list(medium)
    best: tuple[float, list[str], list[str]] | None = None
    for size in range(1, len(ids) + 1):
        for subset in itertools.combinations(ids, size):
            per_lang: dict[str, tuple[float, str, str]] = {}
            for agent_id in subset:
                for s in medium[agent_id]:
                    key = (costs[agent_id].per_scenario[s.id], agent_id, s.id)
                    if _lang(s) not in per_lang or key < per_lang[_lang(s)]:
                        per_lang[_lang(s)] = key
            if len(per_lang) < n:
                continue
            picked = sorted(per_lang.values())[:n]
            used = sorted({a for _, a, _ in picked})
            total = sum(costs[a].shared for a in used) + sum(c for c, _, _ in picked)
            candidate = (total, used, sorted(f"{a}/{sid}" for _, a, sid in picked))
            if best is None or candidate < best:
                best = candidate
    assert best is not None
    by_id = {s.id: s for scen in medium.values() for s in scen}
    return [by_id[key.split("/", 1)[1]] for key in best[2]]


def _lang(s: Scenario) -> str:
    return s.language.split("-")[0].lower()


def demo_config(
    out: Path | None,
    model: str = "local",
    bundle: Bundle | None = None,
    n_scenarios: int = 3,
    max_turns: int = DEMO_MAX_TURNS,
    seed: int = 0,
    reference: bool = True,
    model_caller: bool = False,
) -> RunConfig:
    """The demo's run configuration: the candidate and both judges on ``model``, the caller
    :data:`PLAN_CALLER_SPEC` (``model`` too when ``model_caller``), plus the reference candidate
    :data:`REFERENCE_SPEC` when ``reference`` (listed second); one repeat, one episode at a time,
    scenario by scenario (``RunConfig.scenario_major``). ``out`` None: :func:`default_demo_out`.
    Raises ``ValueError`` from :func:`choose_demo_scenarios`.

    Why the scripted caller by default (measured, docs/decisions.md): as the caller the embedded
    0.5B model ended four of six demo calls after its first turn and, in the Hindi and Tamil calls,
    repeated the agent's words or its own brief instead of its plan, so the reference candidate
    never reached a tool call."""
    from callbench.bundle.validate.audits import load_bundle

    bundle = bundle or load_bundle(starter_path())
    chosen = choose_demo_scenarios(bundle, n_scenarios)

    def role(max_tokens: int, temperature: float = 0.0) -> RoleSpec:
        return RoleSpec(
            spec=model, settings=ModelSettings(temperature=temperature, seed=seed, max_tokens=max_tokens)
        )

    candidates = [role(DEMO_MAX_TOKENS["candidate"])]
    if reference:
        candidates.append(RoleSpec(spec=REFERENCE_SPEC, settings=ModelSettings(seed=seed)))
    config = RunConfig(
        bundle_path=Path(bundle.root),
        out=out or Path("."),
        candidates=candidates,
        caller=(
            role(DEMO_MAX_TOKENS["caller"], DEMO_CALLER_TEMPERATURE)
            if model_caller
            else RoleSpec(spec=PLAN_CALLER_SPEC, settings=ModelSettings(seed=seed))
        ),
        task_judge=role(DEMO_MAX_TOKENS["judge"]),
        conversation_judge=role(DEMO_MAX_TOKENS["judge"]),
        repeats=1,
        seed=seed,
        concurrency=1,
        provider_limits={"local": 1},
        scenario_major=True,
        filters=ScenarioFilters(scenarios=[s.id for s in chosen]),
        limits=LoopLimits(max_caller_turns=max_turns, max_tool_calls_per_turn=DEMO_MAX_TOOL_CALLS),
    )
    if out is None:
        config.out = default_demo_out(config, bundle)
    return config


def demo_root() -> Path:
    """Where demo runs go by default: ``demo/`` in callbench's cache folder
    (``$CALLBENCH_CACHE_DIR`` or ``~/.cache/callbench``, as for the model weights), outside any
    checkout, so a demo never leaves files in the working tree it was started from."""
    from callbench.models.local.weights import cache_root

    return cache_root() / "demo"


def default_demo_out(config: RunConfig, bundle: Bundle) -> Path:
    """The default run folder of ``config``: :func:`demo_root` / ``<model>-<n>-scenarios-<hash>``,
    where ``<hash>`` is 10 hex digits of SHA-256 over the bundle's content hash, everything that
    defines the run (roles with their settings, seed, repeats, scenarios, loop limits), callbench's
    version and the judge prompts' version (:data:`~callbench.grade.prompts.PROMPT_VERSION`). The
    same demo command maps to the same folder (so it is reused or resumed); any other slice, model,
    setting, bundle version or judge prompt gets a folder of its own instead of a conflict with a
    finished run or the reuse of one graded by other prompts."""
    identity = config.model_dump(mode="json", exclude={"out", "bundle_path"})
    payload = json.dumps(
        [bundle.content_hash, identity, __version__, PROMPT_VERSION], sort_keys=True, ensure_ascii=False
    )
    digest = hashlib.sha256(payload.encode()).hexdigest()[:10]
    model = re.sub(r"[^A-Za-z0-9._-]+", "_", config.candidates[0].spec).strip("_")[:40] or "model"
    n = len(config.filters.scenarios)
    return demo_root() / f"{model}-{n}-scenario{'s' if n != 1 else ''}-{digest}"


def is_embedded_spec(spec: str) -> bool:
    """True for the specs whose client is the embedded smoke-test model: ``local``,
    ``local:<variant>`` and its requantised copies, not ``local:<path to a .gguf file>`` (the
    rule of :func:`callbench.models.registry.create_client`). Raises ``ValueError`` for a bad spec."""
    provider, model = parse_spec(spec)
    return provider == "local" and not (model.endswith(".gguf") or "/" in model)


def demo_banner(config: RunConfig) -> list[str]:
    """The lines the demo prints before it runs: the slice and its limits, exactly which roles run
    on the embedded smoke-test model (or on which other model), and which candidate is the scripted
    reference (:data:`REFERENCE_NOTE`)."""
    named = {"caller": config.caller, "task judge": config.task_judge,
             "conversation judge": config.conversation_judge}
    by_spec: dict[str, list[str]] = {}
    for c in config.candidates:
        if c.spec != REFERENCE_SPEC:
            by_spec.setdefault(c.spec, []).append(f"candidate {c.spec}")
    for name, r in named.items():
        if r.spec != PLAN_CALLER_SPEC:
            by_spec.setdefault(r.spec, []).append(name)
    n, ids = len(config.filters.scenarios), ", ".join(config.filters.scenarios)
    lines = [
        f"callbench demo: {n} starter scenario{'s' if n != 1 else ''} ({ids}) "
        f"x {len(config.candidates)} candidate{'s' if len(config.candidates) != 1 else ''}, at most "
        f"{config.limits.max_caller_turns} caller turns and {config.limits.max_tool_calls_per_turn} "
        "tool calls per turn each."
    ]
    for spec, roles in by_spec.items():
        what = "the embedded smoke-test model" if is_embedded_spec(spec) else "model"
        lines.append(f"On {what} {spec}: {', '.join(roles)}.")
    if config.caller.spec == PLAN_CALLER_SPEC:
        lines.append(f"Caller {PLAN_CALLER_SPEC}: {PLAN_CALLER_NOTE}.")
    if any(c.spec == REFERENCE_SPEC for c in config.candidates):
        lines.append(f"Candidate {REFERENCE_SPEC}: {REFERENCE_NOTE}.")
    if any(is_embedded_spec(s) for s in by_spec):
        lines.append(
            "NOTE: the embedded model is a small smoke-test model; its scores show the harness "
            "working end to end, not what a production model would score."
        )
    lines.append(
        f"Calls are cut at {config.limits.max_caller_turns} caller turns to save time: a call whose "
        "correct version needs more turns is reported as cut (its outcome 'not reached', no pass "
        "verdict), not as failed."
    )
    return lines


@dataclass(frozen=True)
class DemoRunState:
    """What a demo run folder already holds: ``planned`` episodes of this configuration,
    ``finished`` of them (saved and not to be run again), ``ended`` (the manifest's end time, or
    None when the run never finished)."""

    out: Path
    planned: int
    finished: int
    ended: str | None

    def message(self) -> str | None:
        """One line for the user: reusing a finished run, resuming one, or None for a new run."""
        if self.finished == 0:
            return None
        if self.finished >= self.planned:
            when = f", finished {self.ended}" if self.ended else ""
            return (
                f"Reusing the finished demo run in {self.out}{when}: its {self.planned} episodes are not "
                "run again (add --fresh to run them anew)."
            )
        return (
            f"Resuming the demo run in {self.out}: {self.finished} of {self.planned} episodes are "
            "already finished and kept; the rest run now (add --fresh to start over)."
        )


def demo_run_state(config: RunConfig, bundle: Bundle) -> DemoRunState:
    """The :class:`DemoRunState` of ``config.out`` (zero finished when it holds no run). Episodes
    skipped for an infrastructure fault count as not finished (a resume runs them again,
    :func:`callbench.runs.executor.rerun_ids`). Raises ``ValueError`` for an unreadable manifest."""
    cands = [(c.spec, c.settings) for c in config.candidates]
    planned = {k.episode_id for k in plan_episodes(bundle, cands, config.repeats, config.filters)}
    store = RunStore(config.out)
    manifest = store.load_manifest() if config.out.is_dir() else None
    if manifest is None:
        return DemoRunState(config.out, len(planned), 0, None)
    finished = planned & (store.finished_ids() - rerun_ids(store))
    return DemoRunState(config.out, len(planned), len(finished), manifest.ended)


def clear_demo_run(out: Path) -> bool:
    """Delete the run folder ``out`` for ``--fresh``; True when something was deleted. Only a
    callbench run folder (one holding ``manifest.json``) is ever deleted: raises ``ValueError``
    for a file or a non-empty folder that is not a run."""
    if not out.exists():
        return False
    if not out.is_dir() or not (out / MANIFEST).is_file():
        if out.is_dir() and not any(out.iterdir()):
            return False
        raise ValueError(
            f"--out {out}: not a callbench run folder (no {MANIFEST}); --fresh deletes only runs"
        )
    shutil.rmtree(out)
    return True
