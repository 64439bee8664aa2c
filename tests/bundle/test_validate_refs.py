"""Validator: references, ids, ordering, plan steps and the channel program, each with a broken copy
of the minimal bundle (one thing broken per test)."""

from __future__ import annotations

import shutil
from typing import Any

from callbench.bundle.validate.audits import validate_loaded, validate_path

from .conftest import AGENT, BOOKING, CANCEL, MINIMAL, MiniBundle

SFILE = f"agents/{AGENT}/scenarios/{BOOKING}.yaml"


def test_minimal_bundle_is_clean() -> None:
    bundle, probs = validate_path(MINIMAL)
    assert probs == []
    assert bundle is not None and len(bundle.scenarios()) == 2


def test_bundle_yaml_path_is_accepted() -> None:
    _, probs = validate_path(MINIMAL / "bundle.yaml")
    assert probs == []


def test_scenario_agent_must_own_the_folder(mb: MiniBundle) -> None:
    mb.edit_scenario(lambda d: d.update(agent="other_agent"))
    [p] = mb.only("ref.agent")
    assert (p.file, p.path) == (SFILE, "agent")
    assert "'other_agent' is not 'pickup_desk'" in p.message


def test_check_tool_unknown(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["action_checks"][2]["tool"] = "cancel_pikcup"

    mb.edit_scenario(brk)
    [p] = mb.only("ref.check_tool")
    assert p.path == "action_checks.2.tool" and "'cancel_pikcup'" in p.message


def test_fixture_tool_unknown(mb: MiniBundle) -> None:
    mb.edit_scenario(lambda d: d["fixtures"].update(refund={"default": {"ok": True}}))
    [p] = mb.only("ref.fixture_tool")
    assert p.path == "fixtures.refund"


def test_after_unknown_id(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["action_checks"][1]["after"] = ["verfiy"]

    mb.edit_scenario(brk)
    probs = mb.problems()
    assert [p.path for p in probs if p.code == "ref.after"] == ["action_checks.1.after.0"]
    # The reference path can no longer meet 'book' (its dependency never holds), so the replay says so too.
    assert {p.code for p in probs} == {"ref.after", "reference.check_unmet"}


def test_after_cycle(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["action_checks"][0]["after"] = ["ended"]  # verify -> ended -> book -> verify

    mb.edit_scenario(brk)
    [p] = mb.only("ref.after_cycle")
    assert "verify" in p.message and "book" in p.message and "ended" in p.message
    assert p.message.count("->") == 3


def test_after_self_cycle(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["action_checks"][2]["after"] = ["no_cancel"]

    mb.edit_scenario(brk)
    [p] = mb.only("ref.after_cycle")
    assert p.message == "checks ordered in a cycle: no_cancel -> no_cancel"


def test_count_bounds(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["action_checks"][1]["count"] = {"min": 2, "max": 1}

    mb.edit_scenario(brk)
    probs = mb.problems()
    assert ("check.count_bounds", "action_checks.1.count") in {(p.code, p.path) for p in probs}


def test_duplicate_check_and_criterion_ids(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["criteria"][1]["id"] = "verify"  # same as an action check id

    mb.edit_scenario(brk)
    [p] = mb.only("id.duplicate")
    assert p.path == "criteria.1.id" and "action_checks.0" in p.message


def test_duplicate_plan_step(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["brief"]["plan"][2]["id"] = "give_dob"

    mb.edit_scenario(brk)
    assert [p.path for p in mb.only("plan.duplicate_step")] == ["brief.plan.2.id"]


def test_channel_step_must_name_a_plan_step(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["channel"]["asr_events"][0]["step"] = "give_acount"
        d["channel"]["vad_splits"][0]["step"] = "nope"

    mb.edit_scenario(brk)
    paths = [p.path for p in mb.only("channel.step")]
    assert paths == ["channel.asr_events.0.step", "channel.vad_splits.0.step"]


def test_channel_turn_xor_step(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["channel"]["asr_events"][0]["turn"] = 1  # both turn and step
        del d["channel"]["vad_splits"][0]["step"]  # neither

    mb.edit_scenario(brk)
    paths = [p.path for p in mb.only("channel.turn_or_step")]
    assert paths == ["channel.asr_events.0", "channel.vad_splits.0"]


def test_channel_replacement_rules(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        del d["channel"]["asr_events"][0]["replacement"]
        d["channel"]["asr_events"][1]["replacement"] = "x"

    mb.edit_scenario(brk)
    msgs = [p.message for p in mb.only("channel.replacement")]
    assert msgs == ["a substitute event needs a replacement",
                    "a double event takes no replacement (only substitute does)"]


def test_empty_vad_anchor(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["channel"]["vad_splits"][0]["after"] = ["  "]

    mb.edit_scenario(brk)
    assert [p.path for p in mb.only("channel.anchor")] == ["channel.vad_splits.0.after.0"]


def test_unresolved_references(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["fixtures"]["lookup_account"]["queue"][0]["args"]["account_number"] = "${caller.acount_number}"
        d["fixtures"]["schedule_pickup"]["queue"][0]["response"]["confirmation"] = "${state.next.code}"
        d["action_checks"][0]["args"]["account_number"] = "${caller.nope}"

    mb.edit_scenario(brk)
    probs = [p for p in mb.problems() if p.code == "ref.unresolved"]
    assert [p.path for p in probs] == [
        "fixtures.lookup_account.queue.0.args.account_number.eq",
        "fixtures.schedule_pickup.queue.0.response.confirmation",
        "action_checks.0.args.account_number.eq",
    ]
    assert "${caller.acount_number} does not resolve" in probs[0].message
    assert "account_number" in probs[0].message  # lists the keys that exist


def test_unresolved_reference_in_tool_default_response(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["tools"][3]["default_response"] = {"status": "ended", "who": "${caller.name}"}

    mb.edit_agent(brk)
    probs = [p for p in mb.problems() if p.code == "ref.unresolved"]
    # 'name' is a known fact of the booking scenario but not of the cancel scenario.
    assert [p.file.split("/")[-1] for p in probs] == [f"{CANCEL}.yaml"]
    assert "default_response of tool end_call" in probs[0].message


def test_reference_outside_fixtures_is_misplaced(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["brief"]["reason"] = "You want a pickup for ${caller.name}."
        d["reference_path"][1]["speech"] = "Hello ${caller.name}"

    mb.edit_scenario(brk)
    assert [p.path for p in mb.only("ref.misplaced")] == ["brief.reason", "reference_path.1.speech"]


def test_duplicate_scenario_id_across_agents(mb: MiniBundle) -> None:
    other = mb.root / "agents" / "pickup_desk_2"
    shutil.copytree(mb.agent_dir, other)
    mb.edit(other / "agent.yaml", lambda d: d.update(id="pickup_desk_2"))
    for f in (other / "scenarios").iterdir():
        mb.edit(f, lambda d: d.update(agent="pickup_desk_2"))
    probs = mb.only("scenario.duplicate_id")
    assert sorted(p.file for p in probs) == [
        f"agents/pickup_desk_2/scenarios/{CANCEL}.yaml", f"agents/pickup_desk_2/scenarios/{BOOKING}.yaml"]
    assert f"agents/{AGENT}/scenarios/{BOOKING}.yaml" in probs[1].message + probs[0].message


def test_scenario_and_agent_ids_must_match_file_names(mb: MiniBundle) -> None:
    mb.edit_scenario(lambda d: d.update(id="pickup_other"))
    mb.edit_agent(lambda d: d.update(id="pickup_x"))
    codes = {(p.code, p.file.split("/")[-1]) for p in mb.problems()}
    assert ("ref.agent_folder", "agent.yaml") in codes
    assert ("ref.scenario_file", f"{BOOKING}.yaml") in codes
    # Problems about the renamed agent still point at its real files.
    assert all(p.file.startswith(f"agents/{AGENT}/") for p in mb.problems())


def test_every_problem_reported_at_once(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["agent"] = "x"
        d["action_checks"][2]["tool"] = "nope"
        d["brief"]["plan"][1]["id"] = "give_account"

    mb.edit_scenario(brk)
    mb.edit_scenario(lambda d: d.update(language="xx-YY-ZZZZZZZZZZ-"), sid=CANCEL)
    codes = mb.codes()
    assert {"ref.agent", "ref.check_tool", "plan.duplicate_step", "language.tag"} <= codes


def test_internal_failure_becomes_a_problem(mb: MiniBundle, monkeypatch: Any) -> None:
    from callbench.bundle.validate import audits as validate

    def boom(*a: Any, **kw: Any) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(validate, "audit_isolation", boom)
    bundle, _ = validate_path(mb.root)
    assert bundle is not None
    probs = validate_loaded(bundle)
    assert [p.code for p in probs] == ["internal", "internal"]
    assert "RuntimeError: bug" in probs[0].message


def test_reference_in_check_description_is_misplaced(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["action_checks"][0]["description"] = "Looks up ${caller.account_number}."

    mb.edit_scenario(brk)
    assert [p.path for p in mb.only("ref.misplaced")] == ["action_checks.0.description"]


def test_unresolved_reference_reported_at_every_place(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["fixtures"]["lookup_account"]["queue"][0]["response"]["note"] = "${state.gone}"
        d["fixtures"]["schedule_pickup"]["default"] = {"who": "${state.gone}", "ok": "${state.account.id}"}

    mb.edit_scenario(brk)
    paths = [p.path for p in mb.only("ref.unresolved")]
    assert paths == ["fixtures.lookup_account.queue.0.response.note", "fixtures.schedule_pickup.default.who"]


def test_applies_after_unknown_guard(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["action_checks"][2]["applies_after"] = ["verify", "bok"]

    mb.edit_scenario(brk)
    probs = mb.problems()
    [p] = [p for p in probs if p.code == "ref.applies_after"]
    assert (p.file, p.path) == (SFILE, "action_checks.2.applies_after.1")
    assert p.message == "guard 'bok' is not an action check of this scenario"
    # the unknown guard is never met, so the reference path leaves no_cancel not applicable
    [r] = [p for p in probs if p.code == "reference.check_unmet"]
    assert r.path == "action_checks.2" and "not applicable: guard check(s) not met: bok" in r.message


def test_applies_after_cycle_through_after(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["action_checks"][0]["applies_after"] = ["book"]  # book after verify, verify guarded by book

    mb.edit_scenario(brk)
    [p] = mb.only("ref.after_cycle")
    assert p.path in ("action_checks.0.applies_after", "action_checks.1.after")
    assert p.message.count("->") == 2 and "verify" in p.message and "book" in p.message


def test_applies_after_self_guard(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["action_checks"][2]["applies_after"] = ["no_cancel"]

    mb.edit_scenario(brk)
    [p] = mb.only("ref.after_cycle")
    assert p.path == "action_checks.2.applies_after"
    assert p.message == "checks ordered in a cycle: no_cancel -> no_cancel"


def test_applies_after_guard_met_on_reference_is_clean(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["action_checks"][2]["applies_after"] = ["verify"]  # never cancel, once the account is found

    mb.edit_scenario(brk)
    assert mb.problems() == []
