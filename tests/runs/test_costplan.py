"""The cost plan (``run --dry-run``) and ``--max-cost``, against a fake provider whose usage is known.

The fake provider answers like the scripted models (reference candidate, plan caller, "met"
judges) but bills every request like a network model: one token per 4 UTF-8 bytes of everything it
is sent (messages and tool schemas) and of everything it answers, at the pinned price of the
role's spec. Its usage is a known function of the request, independent of the plan's turn model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.bundle.models import Bundle
from callbench.bundle.validate.audits import load_bundle
from callbench.cli import app
from callbench.grade.grader import load_episode_grades
from callbench.models.base import ModelClient, ModelRequest, ModelResponse, ModelSettings, Usage
from callbench.models.pricing import call_cost
from callbench.runfolder.manifest import EpisodeKey
from callbench.runfolder.store import RunStore
from callbench.runs.budget import Budget, BudgetReached
from callbench.runs.costplan import plan_for_run, plan_lines, text_tokens
from callbench.runs.executor import RoleSpec, RunConfig
from callbench.runs.plan import candidate_slug
from callbench.runs.session import run_and_grade

from .conftest import DAIRY, scripted_clients

CANDIDATE, CALLER, JUDGE = "openai:gpt-4o", "openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"


class FakeProvider:
    """Delegates to a scripted model; bills bytes/4 tokens at ``spec``'s pinned price."""

    def __init__(self, spec: str, inner: ModelClient) -> None:
        self.spec, self.settings, self.inner = spec, ModelSettings(), inner
        self.billed = Usage()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        resp = await self.inner.complete(request)
        sent = json.dumps([m.model_dump() for m in request.messages]
                          + [t.model_dump() for t in request.tools], ensure_ascii=False)
        calls = [c.model_dump() for c in resp.tool_calls]
        said = (resp.content or "") + json.dumps(calls, ensure_ascii=False)
        usage = Usage(input_tokens=len(sent.encode()) // 4, output_tokens=len(said.encode()) // 4, calls=1)
        usage.cost_usd = call_cost(self.spec, usage)
        self.billed = self.billed + usage
        return resp.model_copy(update={"usage": usage})

    async def aclose(self) -> None:
        await self.inner.aclose()


def priced_config(out: Path, repeats: int = 1, max_cost: float | None = None) -> RunConfig:
    return RunConfig(
        bundle_path=DAIRY, out=out, candidates=[RoleSpec(spec=CANDIDATE)], caller=RoleSpec(spec=CALLER),
        task_judge=RoleSpec(spec=JUDGE), conversation_judge=RoleSpec(spec=JUDGE), repeats=repeats, seed=7,
        concurrency=1, preflight=False, max_cost_usd=max_cost,
    )


def fake_clients(config: RunConfig, bundle: Bundle) -> dict[str, ModelClient]:
    scripted = RunConfig(**{**config.model_dump(), "candidates": [RoleSpec(spec="scripted:reference")]})
    inner = scripted_clients(scripted, bundle)
    slug = next(k for k in inner if k.startswith("candidate:"))
    name = f"candidate:{candidate_slug(CANDIDATE, ModelSettings())}"
    return {
        name: FakeProvider(CANDIDATE, inner[slug]),
        "caller": FakeProvider(CALLER, inner["caller"]),
        "task_judge": FakeProvider(JUDGE, inner["task_judge"]),
        "conversation_judge": FakeProvider(JUDGE, inner["conversation_judge"]),
    }


def run_spend(out: Path) -> float:
    """Every priced call of the run folder: traces plus every grade set's judges."""
    store = RunStore(out)
    try:
        m = store.load_manifest()
        assert m is not None
        total = sum(u.cost_usd or 0.0 for eid in store.finished_ids()
                    for u in store.load_trace(eid).usage.values())
    finally:
        store.close()
    return total + sum(u.cost_usd or 0.0 for gs in m.grade_sets for g in load_episode_grades(out, gs)
                       for u in g.usage.values())


def test_text_tokens_counts_scripts_apart() -> None:
    assert text_tokens("a" * 400) == 100
    assert text_tokens("क" * 90) == pytest.approx(100)  # Devanagari: 0.9 characters per token


async def test_dry_run_estimate_brackets_the_real_spend(tmp_path: Path, dairy: Bundle) -> None:
    out = tmp_path / "run"
    config = priced_config(out, repeats=2)
    plan = plan_for_run(config, dairy)
    assert plan.todo == plan.planned == 2 * sum(len(a.scenarios) for a in dairy.agents.values())
    assert not out.exists()  # planning writes nothing
    estimate = plan.cost_usd
    assert estimate is not None and estimate.low < estimate.expected < estimate.high
    await run_and_grade(config, clients=fake_clients(config, dairy), bundle=dairy)
    real = run_spend(out)
    assert real > 0
    # The documented margin (docs/cost.md): the real spend lies in the low .. high span and the
    # expected figure is within a factor of 2 of it.
    assert estimate.low <= real <= estimate.high, (estimate, real)
    assert 0.5 <= estimate.expected / real <= 2.0, (estimate, real)
    # Resuming: the plan is refined from the run's own history; nothing is left to run.
    again = plan_for_run(config, dairy)
    assert again.todo == 0 and again.spent_usd == pytest.approx(real)
    more = plan_for_run(priced_config(out, repeats=3), dairy)
    assert more.todo == plan.todo // 2
    assert all("history" in r.source for r in more.roles)
    per_episode = real / plan.todo
    assert more.cost_usd is not None
    assert more.cost_usd.expected == pytest.approx(per_episode * more.todo, rel=1e-6)


async def test_max_cost_stops_starting_episodes_and_a_higher_budget_resumes(
        tmp_path: Path, dairy: Bundle) -> None:
    out = tmp_path / "run"
    full = plan_for_run(priced_config(out, repeats=2), dairy)
    assert full.cost_usd is not None
    one_episode = full.cost_usd.expected / full.todo
    budget = 1.5 * one_episode
    config = priced_config(out, repeats=2, max_cost=budget)
    with pytest.raises(BudgetReached) as stopped:
        await run_and_grade(config, clients=fake_clients(config, dairy), bundle=dairy)
    spent = run_spend(out)
    assert spent <= budget
    done = len(RunStore(out).finished_ids())
    assert 1 <= done < full.todo
    assert "run the same command with a higher --max-cost to resume" in str(stopped.value)
    assert f"{done} of {full.planned} episodes are finished" in str(stopped.value)
    # The same command with a budget big enough for the rest finishes the run.
    bigger = priced_config(out, repeats=2, max_cost=100.0)
    manifest, _ = await run_and_grade(bigger, clients=fake_clients(bigger, dairy), bundle=dairy)
    assert manifest.completed == full.planned
    assert run_spend(out) > spent


def test_budget_projects_in_flight_episodes() -> None:
    key = lambda i: EpisodeKey(episode_id=f"e{i}", candidate="c", agent_id="a", scenario_id="s", repeat=i)  # noqa: E731
    b = Budget(1.0, 0.2, {"c": 0.3})
    assert b.reserve(key(1)) and b.reserve(key(2))  # 0.2 + 0.3 + 0.3 = 0.8
    assert not b.reserve(key(3))  # 0.8 + 0.3 > 1.0
    assert b.stopped and not b.reserve(key(4)) and b.not_started == 2
    b.charge("e1", [Usage(cost_usd=0.1)])
    b.release(key(1), finished=True)
    assert b.projection("c") == pytest.approx(0.1)  # learnt from the finished episode
    with pytest.raises(ValueError, match="unknown"):
        Budget(1.0, 0.0, {"c": None})


def test_cli_dry_run_prints_the_plan_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(app, [
        "run", str(DAIRY), "--candidate", CANDIDATE, "--caller", CALLER, "--task-judge", JUDGE,
        "--conversation-judge", JUDGE, "--out", str(out), "--dry-run", "--max-cost", "0.01",
    ])
    assert result.exit_code == 0, result.output
    plan = plan_for_run(priced_config(out), load_bundle(DAIRY))
    assert result.output.splitlines()[: len(plan_lines(plan))] == plan_lines(plan)
    assert "--max-cost $0.0100: the expected total is over it" in result.output
    assert not out.exists()


def test_cli_unknown_price_with_max_cost_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [
        "run", str(DAIRY), "--candidate", "openai:no-such-model", "--caller", "scripted:plan",
        "--task-judge", "scripted:met", "--conversation-judge", "scripted:met", "--out",
        str(tmp_path / "run"), "--dry-run",
    ])
    assert result.exit_code == 0, result.output
    assert "estimated cost of the episodes to run: unknown (a model without a price)" in result.output


def test_cli_budget_reached_is_one_line_and_exit_5(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import callbench.runs.session as session

    async def stop(*_a: object, **_k: object) -> None:
        raise BudgetReached("budget reached: spent $1.0000 of --max-cost $1.0000; run the same command "
                            "with a higher --max-cost to resume")

    monkeypatch.setattr(session, "run_and_grade", stop)
    result = CliRunner().invoke(app, [
        "run", str(DAIRY), "--candidate", "scripted:reference", "--caller", "scripted:plan",
        "--task-judge", "scripted:met", "--conversation-judge", "scripted:met", "--out",
        str(tmp_path / "run"), "--max-cost", "1",
    ])
    assert result.exit_code == 5
    assert result.output.strip().splitlines()[-1].startswith("stopped: budget reached: spent $1.0000")
    assert "Traceback" not in result.output
