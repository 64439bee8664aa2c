"""Small batches (``generate --n 1`` and ``--n 3``) on every starter agent: the plan asks each item
for at most ``--sections-per-item`` sections, lists the rest as not planned, never plans a section
that only sets context, and the control: the scripted generator answering with the agent's own
starter scenario that fits a plan item gets it written.

For each agent the test copies the agent without its scenarios into a new bundle, computes the plan
the generator will make (same inputs), and writes a scripted answer per item: the starter scenario
of the agent that tests the most of the item's sections (``callbench.generate.contract``), with the
item's language and difficulty set and its channel program rebuilt from the scenario's own channel
events (an ASR span serves as a drop, a double, a substitution or a VAD split point), so that the
only open question is whether the plan asked for something a real scenario can satisfy.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from callbench.bundle.render import render_instructions
from callbench.bundle.sections import document_sections
from callbench.bundle.sections import testable_sections as plannable_sections
from callbench.bundle.validate.audits import load_bundle
from callbench.generate.contract import tested_sections as sections_tested
from callbench.generate.manifest import load_manifest
from callbench.generate.plan import DEFAULT_SECTIONS_PER_ITEM, PlanError, PlanItem, make_plan

from .conftest import invoke

STARTER = Path(__file__).resolve().parents[2] / "src" / "callbench" / "examples" / "starter"
AGENTS = sorted(p.name for p in (STARTER / "agents").iterdir() if p.is_dir())


def _spans(channel: dict[str, Any]) -> list[tuple[str | None, int | None, str]]:
    """(step, turn, text) anchors of a scenario's own channel events: each is text that occurs in
    that caller turn, so it can carry any ASR event or a VAD split."""
    out = [(e.get("step"), e.get("turn"), e["span"]) for e in channel.get("asr_events") or []]
    out += [(v.get("step"), v.get("turn"), v["after"][0]) for v in channel.get("vad_splits") or []]
    return out


def _channel(kinds: list[str], own: dict[str, Any]) -> dict[str, Any] | None:
    """A channel program with exactly ``kinds``, built on the scenario's own anchors; None when it
    has no anchor for an ASR or VAD kind."""
    anchors = _spans(own)
    out: dict[str, Any] = {"asr_events": [], "vad_splits": [], "seeded_noise": "seeded_noise" in kinds}
    for kind in kinds:
        if kind == "seeded_noise":
            continue
        if not anchors:
            return None
        step, turn, text = anchors[0]
        where = {"step": step} if step else {"turn": turn}
        if kind == "vad_split":
            own_split = (own.get("vad_splits") or [None])[0]
            out["vad_splits"].append(copy.deepcopy(own_split) if own_split else {**where, "after": [text]})
        else:
            event: dict[str, Any] = {**where, "kind": kind.removeprefix("asr_"), "span": text}
            if kind == "asr_substitute":
                event["replacement"] = "um"
            out["asr_events"].append(event)
    return out


def _answer(item: PlanItem, pool: dict[str, dict[str, Any]], tested: dict[str, set[str]]) -> tuple[str, int]:
    """The starter scenario answering ``item``: the one testing most of its sections whose channel
    can carry the item's kinds (ties: file order); returns its id and how many sections it tests."""
    best, score = "", -1
    for sid, data in pool.items():
        if _channel(item.channel_kinds, data.get("channel") or {}) is None:
            continue
        if data.get("language") != item.language:  # its caller speaks its own language (checked)
            continue
        hit = len(set(item.sections) & tested[sid])
        if hit > score:
            best, score = sid, hit
    return best, score


def _bundle_without_scenarios(root: Path, agent: str) -> Path:
    (root / "agents").mkdir(parents=True)
    shutil.copy(STARTER / "bundle.yaml", root / "bundle.yaml")
    shutil.copytree(STARTER / "agents" / agent, root / "agents" / agent,
                    ignore=shutil.ignore_patterns("scenarios"))
    (root / "agents" / agent / "scenarios").mkdir()
    return root


@pytest.mark.parametrize("agent", AGENTS)
def test_context_sections_are_never_planned(agent: str) -> None:
    loaded = load_bundle(STARTER).agents[agent]
    text = render_instructions(loaded)
    every = [s.title for s in document_sections(text)]
    planned = {s.title for s in plannable_sections(text)}
    # every starter agent ends with its call context, and most show worked examples of good turns;
    # "Speech around tool calls, closing and worked examples" states rules and stays planned
    context = [t for t in every if "call context" in t.lower() or "not to be recited" in t.lower()
               or t.lower().split(". ", 1)[-1].startswith("worked examples")]
    assert context and not planned & set(context)
    plan = make_plan(loaded, text, n=40, seed=0, languages={}, difficulty={})
    assert not {t for i in plan.items for t in i.sections} & set(context)


def test_sections_per_item_caps_the_item_and_reports_the_rest() -> None:
    loaded = load_bundle(STARTER).agents["parcel_delivery"]
    text = render_instructions(loaded)
    titles = [s.title for s in plannable_sections(text)]
    one = make_plan(loaded, text, n=1, seed=0, languages={}, difficulty={})
    assert len(one.items[0].sections) == DEFAULT_SECTIONS_PER_ITEM == 2
    assert sorted(one.uncovered) == sorted(set(titles) - set(one.items[0].sections))
    assert len(one.uncovered) == len(titles) - 2
    three = make_plan(loaded, text, n=3, seed=0, languages={}, difficulty={}, sections_per_item=3)
    asked = [t for i in three.items for t in i.sections]
    assert [len(i.sections) for i in three.items] == [3, 3, 3] and len(set(asked)) == 9
    assert len(three.uncovered) == len(titles) - 9
    many = make_plan(loaded, text, n=40, seed=0, languages={}, difficulty={})
    assert many.uncovered == [] and all(len(i.sections) == 1 for i in many.items)
    # untested sections are planned first
    gaps = titles[-2:]
    first = make_plan(loaded, text, n=1, seed=0, languages={}, difficulty={}, untested=gaps)
    assert sorted(first.items[0].sections) == sorted(gaps)
    with pytest.raises(PlanError, match="--sections-per-item 0: use 1 to 6"):
        make_plan(loaded, text, n=1, seed=0, languages={}, difficulty={}, sections_per_item=0)


def _fitting_seed(loaded: Any, text: str, n: int, pool: dict[str, dict[str, Any]],
                  tested: dict[str, set[str]]) -> int:
    """The first seed whose first item a starter scenario fits (the control needs one)."""
    for seed in range(300):
        item = make_plan(loaded, text, n=n, seed=seed, languages={}, difficulty={}).items[0]
        if _answer(item, pool, tested)[1] == len(item.sections):
            return seed
    raise AssertionError("no seed in 300 gives a first plan item that a starter scenario fits")


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("agent", AGENTS)
def test_small_batch_writes_the_starter_scenario_that_fits(tmp_path: Path, agent: str, n: int) -> None:
    bundle = _bundle_without_scenarios(tmp_path / "bundle", agent)
    loaded = load_bundle(bundle).agents[agent]
    text = render_instructions(loaded)
    pool = {p.stem: yaml.safe_load(p.read_text(encoding="utf-8"))
            for p in sorted((STARTER / "agents" / agent / "scenarios").glob("*.yaml"))}
    tested = {sid: set(sections_tested(loaded, d)) for sid, d in pool.items()}
    seed = _fitting_seed(loaded, text, n, pool, tested)
    plan = make_plan(loaded, text, n=n, seed=seed, languages={}, difficulty={})
    script_dir = tmp_path / "script"
    script_dir.mkdir()
    items: list[list[dict[str, Any]]] = []
    fits: list[bool] = []
    for item in plan.items:
        sid, hit = _answer(item, pool, tested)
        shutil.copy(STARTER / "agents" / agent / "scenarios" / f"{sid}.yaml", script_dir / f"{sid}.yaml")
        data = pool[sid]
        items.append([{"file": f"{sid}.yaml", "set": {
            "id": f"{sid}_g{item.index}", "language": item.language, "brief.language": item.language,
            "difficulty": item.difficulty, "channel": _channel(item.channel_kinds, data.get("channel") or {}),
            # a generated scenario declares which known facts the backend also holds (hand-authored
            # ones are trusted); the starter's callers know these facts as their own
            "caller_known": {k: "the caller's own detail" for k in data["brief"]["known_facts"]}
            | (data.get("caller_known") or {}),
        }}])
        fits.append(hit == len(item.sections))
    script = script_dir / "script.yaml"
    script.write_text(yaml.safe_dump({"items": items}, allow_unicode=True), encoding="utf-8")
    code, out, err = invoke("generate", str(bundle), "--agent", agent, "--model",
                            f"scripted:generator:{script}", "--n", str(n), "--seed", str(seed),
                            "--max-attempts", "1")
    assert fits[0], "the seed was chosen so that the first item has a fitting scenario"
    written = load_manifest(bundle).scenarios
    for item, fit in zip(plan.items, fits, strict=True):
        sid = str(items[item.index][0]["set"]["id"])
        if fit and item.index == 0:  # the control: a real scenario that fits its plan item is written
            assert sid in written, out + err
            rec = written[sid]
            assert rec.planned is not None and rec.written is not None
            assert set(rec.planned.sections) <= set(rec.written.sections)
            assert rec.written.channel == sorted(item.channel_kinds)
        elif fit:  # written, or refused by an audit outside the plan (the null floor of one scenario)
            block = out.split(f"item {item.index + 1}/{n}: ")[1].split("\nitem ")[0]
            assert sid in written or "generate.plan_" not in block, block
        else:  # no starter scenario tests both sections: the contract sends it back
            assert sid not in written
            block = out.split(f"item {item.index + 1}/{n}: ")[1].split("\nitem ")[0]
            assert block.startswith("not written") and "generate.plan_section" in block, block
    assert len(plan.items[0].sections) == min(DEFAULT_SECTIONS_PER_ITEM, len(plannable_sections(text)))
    uncovered = len(plannable_sections(text)) - len({t for i in plan.items for t in i.sections})
    assert f"not planned: {uncovered} section(s)" in out
    assert code == (0 if len(written) == n else 1), out + err
