"""A persona sweep end to end on two starter scenarios with scripted models: persona x scenario x
repeat episodes with their own seeds and ids, the persona in the trace and the caller prompt, and
the report's scores by persona and persona comparisons. Plans without personas keep their ids."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from typer.testing import CliRunner

from callbench.bundle.personas import PersonaLibrary, load_personas
from callbench.bundle.validate.audits import load_bundle
from callbench.cli import app
from callbench.models.base import ModelClient, ModelRequest, ModelResponse, ModelSettings
from callbench.models.scripted.judge import create_scripted_judge
from callbench.models.scripted.models import create_scripted
from callbench.runfolder.store import RunStore
from callbench.runs.executor import RoleSpec, RunConfig
from callbench.runs.plan import ScenarioFilters, candidate_slug, plan_episodes
from callbench.runs.session import run_and_grade
from callbench.sim.caller import PERSONA_HEADING
from callbench.sim.seeds import derive_seed

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
SCENARIOS = ["parcel_address_landmark_fix", "clinic_child_fever_no_advice"]  # en-IN, hi-IN
PERSONAS = ["hurried-terse", "formal-precise"]


class ByPersona:
    """The reference candidate, except that it hangs up on callers of persona ``bad``."""

    def __init__(self, good: ModelClient, bad_client: ModelClient, bad: str) -> None:
        self.spec, self.settings = "scripted:reference", ModelSettings()
        self.good, self.bad_client, self.bad = good, bad_client, bad

    async def complete(self, request: ModelRequest) -> ModelResponse:
        pick = self.bad_client if f"--{self.bad}--" in request.context.episode_id else self.good
        return await pick.complete(request)

    async def aclose(self) -> None:
        return None


def library() -> PersonaLibrary:
    full = load_personas(STARTER / "personas.yaml")
    return PersonaLibrary(personas=[full.get(p) for p in PERSONAS])


def test_plans_without_personas_keep_their_ids_and_seeds() -> None:
    bundle = load_bundle(STARTER)
    filters = ScenarioFilters(scenarios=SCENARIOS)
    slug = candidate_slug("scripted:reference", ModelSettings())
    plain = plan_episodes(bundle, [("scripted:reference", ModelSettings())], 2, filters)
    assert [k.episode_id for k in plain] == [f"{slug}--{s}--r{r}" for s in sorted(SCENARIOS, key=lambda s: (
        "clinic" not in s, s)) for r in range(2)]
    assert all(k.persona is None for k in plain)
    # the seed formula without a persona is unchanged
    old = int.from_bytes(hashlib.sha256(
        b"callbench-seed-v1|7|parcel_address_landmark_fix|1|channel").digest()[:8], "big") >> 1
    assert derive_seed(7, "parcel_address_landmark_fix", 1, "channel") == old
    swept = plan_episodes(bundle, [("scripted:reference", ModelSettings())], 2, filters, PERSONAS)
    assert len(swept) == 2 * 2 * 2
    assert swept[0].episode_id == f"{slug}--clinic_child_fever_no_advice--hurried-terse--r0"
    assert {k.persona for k in swept} == set(PERSONAS)
    assert derive_seed(7, "parcel_address_landmark_fix", 1, "channel", "hurried-terse") != old


async def test_a_sweep_reports_scores_by_persona(tmp_path: Path) -> None:
    bundle = load_bundle(STARTER)
    out = tmp_path / "run"
    config = RunConfig(
        bundle_path=STARTER, out=out, candidates=[RoleSpec(spec="scripted:reference")],
        caller=RoleSpec(spec="scripted:plan"), task_judge=RoleSpec(spec="scripted:met"),
        conversation_judge=RoleSpec(spec="scripted:met"), repeats=1, seed=7, concurrency=2,
        filters=ScenarioFilters(scenarios=SCENARIOS), personas=library(), personas_file="personas.yaml",
    )
    s = ModelSettings()
    slug = candidate_slug("scripted:reference", s)
    clients: dict[str, ModelClient] = {
        f"candidate:{slug}": ByPersona(create_scripted("scripted:reference", s, bundle),
                                       create_scripted("scripted:hangup", s, bundle), "hurried-terse"),
        "caller": create_scripted("scripted:plan", s, bundle),
        "task_judge": create_scripted_judge("scripted:met", s),
        "conversation_judge": create_scripted_judge("scripted:met", s),
    }
    manifest, gid = await run_and_grade(config, clients=clients, bundle=bundle)
    assert gid is not None and manifest.completed == 4 and manifest.skipped == 0
    assert manifest.personas is not None and manifest.personas["ids"] == PERSONAS

    store = RunStore(out)
    lib = library()
    for key in manifest.planned:
        trace = store.load_trace(key.episode_id)
        assert trace.persona == key.persona
        wording = lib.get(key.persona or "").wording_for(trace.language)
        assert wording is not None
        assert trace.caller_view.system_prompt.endswith(f"{PERSONA_HEADING}\n{wording}")
    seeds = {k.persona: store.load_trace(k.episode_id).seeds.channel
             for k in manifest.planned if k.scenario_id == SCENARIOS[0]}
    assert seeds["hurried-terse"] != seeds["formal-precise"]

    report_json = tmp_path / "report.json"
    html = tmp_path / "report.html"
    res = CliRunner().invoke(app, ["report", str(out), "--json", str(report_json), "--samples", "50",
                                   "--html", str(html)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "Overall by persona" in res.output and "Personas compared" in res.output
    data = json.loads(report_json.read_text(encoding="utf-8"))
    by_persona = data["candidates"][0]["by_persona"]
    assert sorted(by_persona) == sorted(PERSONAS)
    good, bad = by_persona["formal-precise"], by_persona["hurried-terse"]
    assert good["estimate"] == 100.0 and good["n_episodes"] == 2
    assert bad["estimate"] < good["estimate"]
    assert good["warning"] and "2 scenarios" in good["warning"]  # a thin slice says so
    [pc] = data["persona_paired"]
    cmp = pc["comparison"]
    assert (cmp["candidate_a"], cmp["candidate_b"]) == ("formal-precise", "hurried-terse")
    assert cmp["n_scenarios"] == 2 and cmp["wins"] == 2
    assert cmp["mean_difference"] == 100.0 - bad["estimate"]
    page = html.read_text(encoding="utf-8")  # the HTML report has the same slices
    assert '<h2 id="personas">Overall by persona</h2>' in page
    assert "<td>formal-precise</td><td class=\"num\">100.0" in page
    assert "formal-precise vs hurried-terse" in page


def test_run_refuses_a_bad_library_with_located_errors(tmp_path: Path) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text("personas:\n  - id: quick\n    traits: {pace: sprint}\n    wording: {en: x}\n",
                   encoding="utf-8")
    res = CliRunner().invoke(app, [
        "run", str(STARTER), "--candidate", "scripted:reference", "--caller", "scripted:plan",
        "--task-judge", "scripted:met", "--conversation-judge", "scripted:met", "--personas", str(bad),
        "--dry-run"])
    assert res.exit_code == 2
    assert "p.yaml:personas.0.traits.pace: [schema]" in res.output
    assert "p.yaml:personas.0.traits.mood: [schema] Field required" in res.output


def test_run_refuses_a_library_without_the_scenarios_language(tmp_path: Path) -> None:
    lib = tmp_path / "p.yaml"
    lib.write_text(
        "personas:\n  - id: quick\n    traits: {patience: low, verbosity: terse, numbers: grouped,"
        " hesitation: none,"
        " self_correction: never, mood: calm, pace: fast, interruption: often, register: casual}\n"
        "    wording: {en: You talk fast.}\n", encoding="utf-8")
    res = CliRunner().invoke(app, [
        "run", str(STARTER), "--candidate", "scripted:reference", "--caller", "scripted:plan",
        "--task-judge", "scripted:met", "--conversation-judge", "scripted:met", "--personas", str(lib),
        "--scenarios", "clinic_child_fever_no_advice", "--dry-run"], env={"COLUMNS": "200"})
    assert res.exit_code == 2
    assert "personas.0.wording: [persona.language]" in res.output and "hi-IN" in res.output
