"""``callbench demo``: a small slice of the starter bundle with the embedded local model in every role.

The slice is chosen, not hard-coded: ``n`` medium scenarios in ``n`` languages whose prompts cost
the embedded model the fewest tokens to read. On a 2-core CPU prompt processing dominates (about
70 tokens a second for the 0.5B model on short prompts, under 50 past 8,000 tokens), and llama.cpp
re-reads only what follows the longest prefix shared with the previous prompt of the same role
(:mod:`callbench.models.local.client`): the static part of an agent's operating document is read once for
all its scenarios, so the cost model counts it once per agent (see
:func:`choose_demo_scenarios`). The loop is capped at ``DEMO_MAX_TURNS`` caller turns; both are
printed, and the report says plainly that every role ran on the embedded smoke-test model.
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from callbench.bundle.loader import render_instructions, static_prefix_chars
from callbench.bundle.models import Bundle, LoadedAgent, Scenario
from callbench.models.base import ModelSettings
from callbench.models.local.format import tools_block_position
from callbench.runs.executor import RoleSpec, RunConfig
from callbench.runs.plan import ScenarioFilters
from callbench.sim.episode import LoopLimits

DEMO_MAX_TURNS = 3
DEMO_MAX_TOOL_CALLS = 4
"""Tool calls per candidate turn in the demo (the harness default is the paper's ten): a small
model that chains one call per request would otherwise spend ten or more requests on one turn."""
DEMO_CALLER_TEMPERATURE = 0.7
"""The caller samples (seeded, so reproducible): a rejected turn's retry then differs from it."""
DEMO_MAX_TOKENS = {"candidate": 320, "caller": 160, "judge": 1000}
"""Output caps per role (tokens): a phone turn is short; a judge's JSON lists every item."""


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
    out: Path,
    model: str = "local",
    bundle: Bundle | None = None,
    n_scenarios: int = 3,
    max_turns: int = DEMO_MAX_TURNS,
    seed: int = 0,
) -> RunConfig:
    """The demo's run configuration: every role on ``model``, one repeat, one episode at a time."""
    from callbench.bundle.loader import load_bundle

    bundle = bundle or load_bundle(starter_path())
    chosen = choose_demo_scenarios(bundle, n_scenarios)

    def role(max_tokens: int, temperature: float = 0.0) -> RoleSpec:
        return RoleSpec(
            spec=model, settings=ModelSettings(temperature=temperature, seed=seed, max_tokens=max_tokens)
        )

    return RunConfig(
        bundle_path=Path(bundle.root),
        out=out,
        candidates=[role(DEMO_MAX_TOKENS["candidate"])],
        caller=role(DEMO_MAX_TOKENS["caller"], DEMO_CALLER_TEMPERATURE),
        task_judge=role(DEMO_MAX_TOKENS["judge"]),
        conversation_judge=role(DEMO_MAX_TOKENS["judge"]),
        repeats=1,
        seed=seed,
        concurrency=1,
        provider_limits={"local": 1},
        filters=ScenarioFilters(scenarios=[s.id for s in chosen]),
        limits=LoopLimits(max_caller_turns=max_turns, max_tool_calls_per_turn=DEMO_MAX_TOOL_CALLS),
    )
