"""``callbench demo``: a small slice of the starter bundle with the embedded local model in every role.

The slice is chosen, not hard-coded: for each language, the medium scenario whose prompts (the
candidate's operating document and tools, the caller's brief) are cheapest for the embedded model's
tokenizer; then the three cheapest languages. On a 2-core CPU prompt processing dominates (about
70 tokens a second for the 0.5B model), so this keeps several languages and scripts while keeping
the run short. The loop is capped at ``DEMO_MAX_TURNS`` caller turns; both are printed, and the
report says plainly that every role ran on the embedded smoke-test model.
"""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

from callbench.bundle.loader import render_instructions
from callbench.bundle.models import Bundle, LoadedAgent, Scenario
from callbench.models.base import ModelSettings
from callbench.runs.executor import RoleSpec, RunConfig
from callbench.runs.plan import ScenarioFilters
from callbench.sim.episode import LoopLimits

DEMO_MAX_TURNS = 4
DEMO_CALLER_TEMPERATURE = 0.7
"""The caller samples (seeded, so reproducible): a rejected turn's retry then differs from it."""
DEMO_MAX_TOKENS = {"candidate": 320, "caller": 160, "judge": 1000}
"""Output caps per role (tokens): a phone turn is short; a judge's JSON lists every item."""


def starter_path() -> Path:
    """The starter bundle installed with the package."""
    return Path(str(files("callbench") / "examples" / "starter"))


def estimate_tokens(text: str) -> float:
    """Rough token count for the embedded Qwen tokenizer (DESIGN.md: English about 5 characters a
    token, Indic scripts about 1): ASCII characters / 4.5 plus one per other character."""
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return ascii_chars / 4.5 + (len(text) - ascii_chars)


def _episode_cost(agent: LoadedAgent, scenario: Scenario) -> float:
    """Prompt tokens that dominate a demo episode on a CPU: the candidate's instructions and tools,
    and the caller's brief."""
    tools = json.dumps([t.model_dump() for t in agent.config.tools], ensure_ascii=False)
    brief = scenario.brief.model_dump_json()
    return (
        estimate_tokens(render_instructions(agent, scenario))
        + estimate_tokens(tools)
        + estimate_tokens(brief)
    )


def choose_demo_scenarios(bundle: Bundle, n: int = 3) -> list[Scenario]:
    """Pick ``n`` medium scenarios in ``n`` different languages, cheapest first.

    For each language, the medium scenario with the smallest estimated prompt cost
    (:func:`_episode_cost`); then the ``n`` cheapest languages. Ties break on scenario id.
    Raises ``ValueError`` when fewer than ``n`` languages have a medium scenario.
    """
    best: dict[str, tuple[float, str, Scenario]] = {}
    for agent in (a for a in bundle.agents.values() if a.config.active):
        for s in agent.scenarios:
            if s.difficulty != "medium":
                continue
            lang = s.language.split("-")[0].lower()
            key = (_episode_cost(agent, s), s.id, s)
            if lang not in best or key[:2] < best[lang][:2]:
                best[lang] = key
    if len(best) < n:
        raise ValueError(
            f"the bundle has medium scenarios in only {len(best)} language(s); the demo needs {n}"
        )
    return [v[2] for v in sorted(best.values(), key=lambda v: v[:2])[:n]]


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
        limits=LoopLimits(max_caller_turns=max_turns),
    )
