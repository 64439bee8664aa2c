import json

import pytest

from callbench.bundle.models import LoadedAgent, Scenario
from callbench.sim.backend import Backend, CallSite, parse_arguments


def _call(backend: Backend, name: str, raw: str | dict, index: int = 0):  # type: ignore[no-untyped-def]
    raw_s = raw if isinstance(raw, str) else json.dumps(raw)
    return backend.dispatch(
        CallSite(
            index=index,
            candidate_turn=1,
            message_index=3,
            result_message_index=4,
            tool_call_id=f"c{index}",
            original_tool_call_id=None,
            name=name,
            raw_arguments=raw_s,
        )
    )


@pytest.fixture()
def backend(dairy: tuple[LoadedAgent, Scenario]) -> Backend:
    agent, scen = dairy
    return Backend(agent.config, scen, seed=5)


RIGHT = {"center_id": "CC-ANAND-07", "shift": "evening", "category": "cattle_health"}


def test_parse_arguments_object() -> None:
    p = parse_arguments('{"a": 1}')
    assert (p.arguments, p.error, p.double_encoded) == ({"a": 1}, None, False)


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ('{"a": 1', "not valid JSON"),
        ("", "empty"),
        ("[1, 2]", "JSON array, not an object"),
        ("3", "JSON number"),
        ('{"a": 1, "a": 2}', "duplicate key 'a'"),
        ('{"a": NaN}', "NaN is not valid JSON"),
        ('"[1]"', "JSON string holding a JSON array"),
        ('"hello"', "its content is not JSON"),
    ],
)
def test_parse_arguments_errors(raw: str, fragment: str) -> None:
    p = parse_arguments(raw)
    assert p.arguments is None
    assert p.error is not None and fragment in p.error


def test_double_encoded_arguments_are_decoded_once_and_flagged() -> None:
    raw = json.dumps(json.dumps({"a": 1}))
    p = parse_arguments(raw)
    assert (p.arguments, p.error, p.double_encoded) == ({"a": 1}, None, True)
    triple = json.dumps(raw)
    assert parse_arguments(triple).error is not None  # decoded once only: never coerced further


def test_authored_response_with_resolved_references(backend: Backend) -> None:
    ev = _call(backend, "lookup_farmer", {"farmer_id": "F-2231"})
    assert ev.outcome == "authored" and ev.queue_position == 0
    assert ev.result == {"name": "Meena Patel", "center_id": "CC-ANAND-07", "credit": "SECRET-LIMIT-4417"}
    assert [m.field for m in ev.matcher_results] == ["farmer_id"] and ev.matcher_results[0].ok


def test_wrong_category_gets_not_recorded_then_retry_gets_second_entry(backend: Backend) -> None:
    wrong = _call(backend, "log_zero_supply_reason", {**RIGHT, "category": "other"}, 0)
    assert wrong.outcome == "mismatch" and wrong.result["status"] == "not_recorded"
    bad = [m for m in wrong.matcher_results if not m.ok]
    assert [m.field for m in bad] == ["category"]
    retry = _call(backend, "log_zero_supply_reason", RIGHT, 1)
    assert retry.outcome == "authored" and retry.queue_position == 1
    assert retry.result == {"status": "confirmed", "reference": "ZS-9002"}
    beyond = _call(backend, "log_zero_supply_reason", RIGHT, 2)
    assert beyond.outcome == "default" and beyond.queue_position == 2
    assert beyond.result["message"] == "No more entries can be recorded on this call."


def test_unknown_tool_lists_valid_tools_and_consumes_nothing(backend: Backend) -> None:
    ev = _call(backend, "lookup_customer", {"farmer_id": "F-2231"})
    assert ev.outcome == "unknown_tool" and not ev.known_tool and ev.queue_position is None
    assert ev.result["valid_tools"] == ["lookup_farmer", "log_zero_supply_reason", "end_call"]
    assert "lookup_farmer, log_zero_supply_reason, end_call" in ev.result["message"]
    after = _call(backend, "lookup_farmer", {"farmer_id": "F-2231"})
    assert after.queue_position == 0 and after.outcome == "authored"


def test_malformed_arguments_get_mismatch_and_consume_the_entry(backend: Backend) -> None:
    ev = _call(backend, "log_zero_supply_reason", '{"center_id": "CC-ANAND-07", "shift": ')
    assert ev.outcome == "parse_error" and ev.arguments is None
    assert ev.raw_arguments == '{"center_id": "CC-ANAND-07", "shift": '
    assert ev.parse_error is not None and ev.result["status"] == "not_recorded"
    nxt = _call(backend, "log_zero_supply_reason", RIGHT, 1)
    assert nxt.queue_position == 1 and nxt.result["reference"] == "ZS-9002"


def test_double_encoded_call_is_matched_and_flagged(backend: Backend) -> None:
    ev = _call(backend, "log_zero_supply_reason", json.dumps(json.dumps(RIGHT)))
    assert ev.double_encoded and ev.parse_error is None and ev.outcome == "authored"
    assert ev.arguments == RIGHT


def test_call_ending_success_and_failure(backend: Backend) -> None:
    failed = _call(backend, "end_call", {"reason": "bored"})
    assert failed.call_ending and failed.success_condition_met is False and not failed.ended_call
    assert failed.result == {"status": "failed", "message": "Give a valid reason."}
    ok = _call(backend, "end_call", {"reason": "completed"}, 1)  # beyond the queue: default {status: ended}
    assert ok.outcome == "default" and ok.success_condition_met and ok.ended_call


def test_refused_calls_are_not_executed(backend: Backend) -> None:
    site = CallSite(
        index=0,
        candidate_turn=1,
        message_index=2,
        result_message_index=3,
        tool_call_id="x",
        original_tool_call_id=None,
        name="lookup_farmer",
        raw_arguments='{"farmer_id": "F-2231"}',
    )
    ev = backend.refuse(site, "limit_reached", limit=10)
    assert not ev.executed and ev.outcome == "limit_reached" and ev.queue_position is None
    assert "limit of 10 tool calls" in ev.result["message"]
    assert _call(backend, "lookup_farmer", {"farmer_id": "F-2231"}).queue_position == 0
