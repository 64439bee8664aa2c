"""Tool-call rules inside the loop: the per-turn limit, ids, unknown tools, malformed arguments."""

import json

from callbench.trace import EndReason

LOOKUP = {"name": "lookup_farmer", "arguments": {"farmer_id": "F-2231"}}


def _caller_quiet() -> list[dict]:
    return [
        {"speech": "Yes, this is Meena.", "expressed_step": "s1_greet", "done": False},
        {"speech": "Okay, bye.", "expressed_step": None, "done": True},
    ]


async def test_eleventh_tool_call_in_one_message_is_not_executed(run) -> None:
    candidate = [
        {"content": "Hello."},
        {"content": "Checking.", "tool_calls": [LOOKUP] * 11},
        {"content": "Sorry, that took a while."},
    ]
    t = await run(candidate=candidate, caller=_caller_quiet())
    evs = t.tool_events
    assert len(evs) == 11
    assert [e.executed for e in evs] == [True] * 10 + [False]
    assert [e.queue_position for e in evs[:3]] == [0, 1, 2] and evs[10].queue_position is None
    assert evs[10].outcome == "limit_reached" and evs[10].result["error"] == "tool_call_limit_reached"
    result_msg = t.messages[evs[10].result_message_index]
    assert result_msg.role == "tool" and "limit of 10 tool calls" in json.loads(result_msg.content)["message"]
    assert t.messages[result_msg.index + 1].content == "Sorry, that took a while."
    assert t.end_reason == EndReason.CALLER_DONE_EARLY


async def test_tool_calls_chain_across_messages_up_to_the_limit(run) -> None:
    candidate = [
        {"content": "Hello."},
        {"tool_calls": [LOOKUP] * 6},
        {"tool_calls": [LOOKUP] * 5},
        {"tool_calls": [LOOKUP]},
        {"content": "never asked in turn 1"},
    ]
    t = await run(candidate=candidate, caller=_caller_quiet())
    turn1 = [e for e in t.tool_events if e.candidate_turn == 1]
    assert [e.executed for e in turn1] == [True] * 10 + [False, False]
    # after the first refusal the candidate got one more request; its call was refused and the turn ended
    assert t.caller_turns[1].message_indices[0] == turn1[-1].result_message_index + 1


async def test_limit_is_configurable(run) -> None:
    from callbench.sim.episode import LoopLimits

    candidate = [{"content": "Hello."}, {"tool_calls": [LOOKUP] * 3}, {"content": "Done."}]
    t = await run(candidate=candidate, caller=_caller_quiet(), limits=LoopLimits(max_tool_calls_per_turn=2))
    assert [e.outcome for e in t.tool_events] == ["authored", "default", "limit_reached"]


async def test_duplicate_tool_call_ids_are_both_dispatched_with_distinct_ids(run) -> None:
    dup = [{"id": "call_1", **LOOKUP}, {"id": "call_1", **LOOKUP}]
    candidate = [{"content": "Hello."}, {"tool_calls": dup}, {"content": "Found you."}]
    t = await run(candidate=candidate, caller=_caller_quiet())
    a, b = t.tool_events
    assert (a.tool_call_id, a.original_tool_call_id) == ("call_1", None)
    assert (b.tool_call_id, b.original_tool_call_id) == ("call_1~1", "call_1")
    assert a.queue_position == 0 and b.queue_position == 1
    msg = t.messages[a.message_index]
    assert [c.id for c in msg.tool_calls] == ["call_1", "call_1~1"]
    assert [t.messages[e.result_message_index].tool_call_id for e in (a, b)] == ["call_1", "call_1~1"]


async def test_an_id_reused_in_a_later_turn_is_renamed(run) -> None:
    call = {"id": "x", **LOOKUP}
    candidate = [
        {"tool_calls": [call], "content": "Hello."},
        {"content": "Hi."},
        {"tool_calls": [call]},
        {"content": "Again."},
    ]
    t = await run(candidate=candidate, caller=_caller_quiet())
    assert [e.tool_call_id for e in t.tool_events] == ["x", "x~1"]


async def test_unknown_tool_in_the_loop(run) -> None:
    candidate = [
        {"content": "Hello."},
        {"tool_calls": [{"name": "record_estimate", "arguments": {"litres": 0}}, LOOKUP]},
        {"content": "Okay."},
    ]
    t = await run(candidate=candidate, caller=_caller_quiet())
    bad, good = t.tool_events
    assert bad.outcome == "unknown_tool" and not bad.known_tool and bad.queue_position is None
    body = json.loads(t.messages[bad.result_message_index].content)
    assert body["valid_tools"] == ["lookup_farmer", "log_zero_supply_reason", "end_call"]
    assert good.outcome == "authored" and good.queue_position == 0


async def test_malformed_and_double_encoded_arguments_in_the_loop(run) -> None:
    raw_bad = '{"farmer_id": "F-2231"'
    double = json.dumps(json.dumps({"farmer_id": "F-2231"}))
    candidate = [
        {"content": "Hello."},
        {
            "tool_calls": [
                {"name": "lookup_farmer", "arguments": raw_bad},
                {"name": "lookup_farmer", "arguments": double},
            ]
        },
        {"content": "Okay."},
    ]
    t = await run(candidate=candidate, caller=_caller_quiet())
    bad, dbl = t.tool_events
    assert bad.raw_arguments == raw_bad and bad.arguments is None and bad.parse_error
    assert bad.outcome == "parse_error" and bad.result == {"error": "not_found"} and bad.queue_position == 0
    assert dbl.double_encoded and dbl.parse_error is None and dbl.arguments == {"farmer_id": "F-2231"}
    assert dbl.outcome == "default" and dbl.queue_position == 1  # the malformed call consumed entry 0
    assert t.messages[bad.message_index].tool_calls[0].arguments == raw_bad  # recorded raw, never repaired


async def test_calls_after_a_successful_call_ending_tool_are_not_executed(run) -> None:
    candidate = [
        {"content": "Hello."},
        {
            "content": "Goodbye.",
            "tool_calls": [{"name": "end_call", "arguments": {"reason": "completed"}}, LOOKUP],
        },
    ]
    t = await run(candidate=candidate, caller=_caller_quiet())
    end, after = t.tool_events
    assert end.ended_call and t.end_reason == EndReason.CALL_ENDED
    assert after.outcome == "after_call_ended" and not after.executed
    assert t.messages[-1].role == "tool" and t.messages[-1].tool_call_id == after.tool_call_id
