"""Validator: replay of the reference path through the fixtures and the action checks."""

from __future__ import annotations

from typing import Any

from .conftest import CANCEL, MiniBundle


def _path(d: dict[str, Any]) -> list[dict[str, Any]]:
    return d["reference_path"]


def test_no_reference_path_is_fine(mb: MiniBundle) -> None:
    mb.edit_scenario(lambda d: d.__delitem__("reference_path"))
    assert mb.problems() == []


def test_unknown_tool_in_reference_path(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        _path(d)[1]["tool_calls"] = [{"name": "lookup_acount", "arguments": {}}]

    mb.edit_scenario(brk)
    [p] = mb.only("reference.unknown_tool")
    assert p.path == "reference_path.1.tool_calls.0.name"


def test_arguments_must_fit_the_tool_schema(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        args = _path(d)[3]["tool_calls"][0]["arguments"]
        args["quantity_kg"] = 30  # still fine
        args["slot"] = "night"  # not in the enum
        args["contact"]["fax"] = "x"  # additionalProperties: false
        del args["account_id"]  # required

    mb.edit_scenario(brk)
    probs = [p for p in mb.problems() if p.code == "reference.args_invalid"]
    assert [p.path for p in probs] == [
        "reference_path.3.tool_calls.0.arguments",
        "reference_path.3.tool_calls.0.arguments.contact",
        "reference_path.3.tool_calls.0.arguments.slot",
    ]
    assert "'account_id' is a required property" in probs[0].message
    assert "'night' is not one of ['morning', 'evening']" in probs[2].message


def test_unmet_check_is_reported_with_its_reason(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        _path(d)[3]["tool_calls"][0]["arguments"]["quantity_kg"] = 50

    mb.edit_scenario(brk)
    [mismatch] = [p for p in mb.problems() if p.code == "reference.fixture_mismatch"]
    assert mismatch.path == "reference_path.3.tool_calls.0"
    assert "quantity_kg: 50 outside [25.0, 35.0]" in mismatch.message
    book, ended = [p for p in mb.problems() if p.code == "reference.check_unmet"]
    assert book.path == "action_checks.1"
    assert book.message == ("the reference path does not meet check 'book': 0 matching call(s) of "
                            "schedule_pickup, need at least 1; 1 call(s) with other arguments")
    assert ended.path == "action_checks.3"
    # its own end_call was right: the one slip is at 'book', this check was not reached
    assert "not reached: depends on book" in ended.message


def test_negative_check_violated(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        _path(d)[3]["tool_calls"].append({"name": "cancel_pickup", "arguments": {"confirmation": "PK-1001"}})

    mb.edit_scenario(brk)
    [p] = mb.only("reference.check_unmet")
    assert p.path == "action_checks.2" and "at most 0 allowed" in p.message


def test_order_dependency_violated(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        book = _path(d)[3]["tool_calls"]
        look = _path(d)[2]["tool_calls"]
        _path(d)[2]["tool_calls"], _path(d)[3]["tool_calls"] = book, look

    mb.edit_scenario(brk)
    probs = mb.only("reference.check_unmet")
    # The booking now happens before the lookup: 'book' is unmet, and so is 'ended' (after book).
    assert [p.path for p in probs] == ["action_checks.1", "action_checks.3"]


def test_tool_call_after_successful_end(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        _path(d)[4]["tool_calls"].append({"name": "cancel_pickup", "arguments": {"confirmation": "PK-1001"}})

    mb.edit_scenario(brk)
    probs = mb.problems()
    after = [p for p in probs if p.code == "reference.after_end"]
    assert [p.path for p in after] == ["reference_path.4.tool_calls.1"]
    assert "ended at reference_path.4.tool_calls.0" in after[0].message


def test_turn_and_speech_after_successful_end(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        _path(d)[4]["speech"] = "Goodbye again."
        _path(d).append({"speech": "Are you still there?"})

    mb.edit_scenario(brk)
    paths = [(p.code, p.path) for p in mb.problems()]
    assert ("reference.after_end", "reference_path.4.speech") in paths
    assert ("reference.after_end", "reference_path.5") in paths
    assert ("reference.length", "reference_path") in paths


def test_failed_call_ending_tool_hands_control_back(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["fixtures"]["end_call"] = {"queue": [{"args": {}, "response": {"status": "error", "error": "busy"},
                                                "mismatch_response": {"status": "error"}}]}
        _path(d)[4]["tool_calls"].append({"name": "end_call", "arguments": {"reason": "resolved"}})

    mb.edit_scenario(brk)
    # The first end_call fails (status error): the second one may follow; it gets the default (ended).
    assert mb.problems() == []


def test_reference_length(mb: MiniBundle) -> None:
    mb.edit_scenario(lambda d: d["reference_path"].insert(1, {"speech": "Sorry, say again?"}))
    probs = [(p.code, p.message) for p in mb.problems() if p.code == "reference.length"]
    assert probs == [("reference.length", "6 turns for 4 plan steps: expected 5 (turn 0 greets, turn k "
                                          "answers plan step k, the agent ends the call) or 4 (the caller "
                                          "ends the call)")]


def test_caller_may_end_the_call(mb: MiniBundle) -> None:
    # Remove the agent's closing turn and the check that needs it: a caller hang-up path is valid.
    def brk(d: dict[str, Any]) -> None:
        d["reference_path"].pop()
        d["action_checks"] = [c for c in d["action_checks"] if c["id"] != "ended"]

    mb.edit_scenario(brk)
    assert mb.problems() == []


def test_refusal_scenario_replays_clean_and_detects_cancellation(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["reference_path"][2]["tool_calls"].insert(0, {"name": "cancel_pickup",
                                                        "arguments": {"confirmation": "PK-2002"}})

    mb.edit_scenario(brk, sid=CANCEL)
    [p] = mb.only("reference.check_unmet")
    assert "'no_cancel'" in p.message


# ---------------------------------------------------------------- the path must succeed


def test_call_answered_by_the_mismatch_response_is_refused(mb: MiniBundle) -> None:
    # the vet case: the booking's arguments fail the entry's matchers, the fixture answers
    # "slot not held", yet every check is met (the check does not test the slot)
    def brk(d: dict[str, Any]) -> None:
        d["fixtures"]["schedule_pickup"]["queue"][0]["args"]["slot"] = {"one_of": ["morning"]}

    mb.edit_scenario(brk)
    [p] = mb.only("reference.fixture_mismatch")
    assert p.path == "reference_path.3.tool_calls.0"
    assert "mismatch response" in p.message and "slot:" in p.message


def test_call_beyond_the_queue_getting_no_record_is_refused(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        again = dict(_path(d)[2]["tool_calls"][0])
        _path(d)[2]["tool_calls"].append(again)

    mb.edit_scenario(brk)
    [p] = mb.only("reference.fixture_default")
    assert p.path == "reference_path.2.tool_calls.1"
    assert "after the 1 entry of fixtures.lookup_account.queue" in p.message
    assert '"error": "no_data"' in p.message


def test_call_ending_tool_that_never_succeeds_is_refused(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["fixtures"]["end_call"] = {"queue": [{"args": {}, "response": {"status": "queued"},
                                                "mismatch_response": {"status": "queued"}}]}

    mb.edit_scenario(brk)
    [p] = mb.only("reference.end_unmet")
    assert p.path == "reference_path.4.tool_calls.0"
    assert "'end_call'" in p.message and '{"status": "queued"}' in p.message


def test_success_claimed_after_an_authored_failure_is_refused(mb: MiniBundle) -> None:
    # the authored answer to the booking is a failure, the reference still says "booked"
    def brk(d: dict[str, Any]) -> None:
        failed = {"success": False, "error": "slot not held"}
        d["fixtures"]["schedule_pickup"]["queue"][0]["response"] = failed

    mb.edit_scenario(brk)
    [p] = mb.only("reference.success_after_failure")
    assert p.path == "reference_path.3.speech"
    assert "after 'schedule_pickup' failed at reference_path.3.tool_calls.0 (success: false)" in p.message


def test_failure_reported_truthfully_is_fine(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["fixtures"]["schedule_pickup"]["queue"][0]["response"] = {"status": "rejected"}
        _path(d)[3]["speech"] = "Sorry, the evening slot could not be booked; it is full."

    mb.edit_scenario(brk)
    assert [p.code for p in mb.problems()] == []


def test_rejected_wrong_digit_then_corrected_is_a_recovery(mb: MiniBundle) -> None:
    # the failure mode "one digit wrong, the tool rejects it, the caller corrects it": the first
    # lookup gets the mismatch response, the second (queue entry 1) its authored response
    def brk(d: dict[str, Any]) -> None:
        q = d["fixtures"]["lookup_account"]["queue"]
        q.append(dict(q[0]))
        wrong = {"name": "lookup_account",
                 "arguments": {**_path(d)[2]["tool_calls"][0]["arguments"], "account_number": "40127789"}}
        _path(d)[2]["tool_calls"].insert(0, wrong)
        d["action_checks"][0]["count"] = {"min": 1, "max": 2}

    mb.edit_scenario(brk)
    assert [str(p) for p in mb.problems()] == []
