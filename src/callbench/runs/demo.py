"""``callbench demo``: a small slice of the starter bundle with the embedded local model in every role.

The slice is chosen, not hard-coded: for each language, the agent with the shortest rendered
operating document, and of its medium scenarios the one with the fewest plan steps; then the three
cheapest languages in a fixed preference order (so the demo shows several languages and scripts
while keeping prompt processing on a 2-core CPU within the time budget). The loop is capped at
``DEMO_MAX_TURNS`` caller turns; both are printed, and the report says plainly that every role ran
on the embedded smoke-test model.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from callbench.bundle.loader import render_instructions
from callbench.bundle.models import Bundle, LoadedAgent, Scenario
from callbench.models.base import ModelSettings
from callbench.runs.executor import RoleSpec, RunConfig
from callbench.runs.plan import ScenarioFilters
from callbench.sim.episode import LoopLimits

DEMO_MAX_TURNS = 6
DEMO_MAX_TOKENS = {"candidate": 320, "caller": 160, "judge": 1400}
"""Output caps per role (tokens): a phone turn is short; a judge's JSON lists every item."""
DEMO_LANGUAGE_PREFERENCE = ("en", "hi", "gu", "mr", "ta", "bn")
"""Order in which languages enter the demo slice (primary subtag of BCP 47)."""


def starter_path() -> Path:
    """The starter bundle installed with the package."""
    return Path(str(files("callbench") / "examples" / "starter"))


def choose_demo_scenarios(bundle: Bundle, n: int = 3) -> list[Scenario]:
    """Pick ``n`` medium scenarios in ``n`` different languages (see the module docstring).

    Raises ``ValueError`` when the bundle has fewer than ``n`` languages with a medium scenario.
    """
    best: dict[str, tuple[int, int, str, Scenario]] = {}
    agents: list[LoadedAgent] = [a for a in bundle.agents.values() if a.config.active]
    for agent in agents:
        for s in agent.scenarios:
            if s.difficulty != "medium":
                continue
            lang = s.language.split("-")[0].lower()
            key = (len(render_instructions(agent, s)), len(s.brief.plan), s.id, s)
            if lang not in best or key[:3] < best[lang][:3]:
                best[lang] = key
    order = [lang for lang in DEMO_LANGUAGE_PREFERENCE if lang in best]
    order += sorted(set(best) - set(order))
    if len(order) < n:
        raise ValueError(
            f"the bundle has medium scenarios in only {len(order)} language(s); the demo needs {n}"
        )
    return [best[lang][3] for lang in order[:n]]


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

    def role(max_tokens: int) -> RoleSpec:
        return RoleSpec(spec=model, settings=ModelSettings(temperature=0.0, seed=seed, max_tokens=max_tokens))

    return RunConfig(
        bundle_path=Path(bundle.root),
        out=out,
        candidates=[role(DEMO_MAX_TOKENS["candidate"])],
        caller=role(DEMO_MAX_TOKENS["caller"]),
        task_judge=role(DEMO_MAX_TOKENS["judge"]),
        conversation_judge=role(DEMO_MAX_TOKENS["judge"]),
        repeats=1,
        seed=seed,
        concurrency=1,
        provider_limits={"local": 1},
        filters=ScenarioFilters(scenarios=[s.id for s in chosen]),
        limits=LoopLimits(max_caller_turns=max_turns),
    )
