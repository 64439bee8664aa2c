"""The episode loop: the dairy call and every end reason."""

import json

import pytest

from callbench.bundle.models import ReferenceTurn
from callbench.models.scripted.models import create_scripted
from callbench.sim.episode import LoopLimits, candidate_tools
from callbench.trace import EndReason

RIGHT = {"center_id": "CC-ANAND-07", "shift": "evening", "category": "cattle_health"}


def _say(text: str) -> dict:
    return {"content": text}


def _tools(*calls: tuple[str, dict], content: str | None = None) -> dict:
    return {"content": content, "tool_calls": [{"name": n, "arguments": a} for n, a in calls]}


def _caller(speech: str, step: str | None = None, done: bool = False) -> dict:
    return {"speech": speech, "expressed_step": step, "done": done}


async def test_dairy_reference_call_confirms_and_ends(run) -> None:
    t = await run()
    assert t.end_reason == EndReason.CALL_ENDED and t.skip_reason is None and t.reruns == 0
    assert [(e.name, e.outcome) for e in t.tool_events] == [
        ("lookup_farmer", "authored"),
        ("log_zero_supply_reason", "authored"),
        ("end_call", "authored"),
    ]
    assert t.tool_events[1].result == {"status": "confirmed", "reference": "ZS-9001"}
    assert t.tool_events[-1].ended_call and t.tool_events[-1].success_condition_met
    assert [ct.expressed_steps for ct in t.caller_turns] == [["s1_greet"], ["s2_no_milk"], ["s3_reason"]]
    assert t.messages[0].role == "system" and "Anand Dairy Cooperative" in t.messages[0].content
    assert t.messages[1].role == "assistant" and t.messages[1].candidate_turn == 0
    assert [m.index for m in t.messages] == list(range(len(t.messages)))
    # tool results follow their calls, in order, as JSON text
    call_msg = t.messages[t.tool_events[1].message_index]
    assert [c.name for c in call_msg.tool_calls] == ["log_zero_supply_reason", "end_call"]
    results = t.messages[call_msg.index + 1 : call_msg.index + 3]
    assert [(m.role, m.tool_call_id) for m in results] == [("tool", c.id) for c in call_msg.tool_calls]
    assert json.loads(results[0].content) == {"status": "confirmed", "reference": "ZS-9001"}
    assert t.usage["candidate"].calls == 5 and t.usage["caller"].calls == 3


async def test_dairy_wrong_category_gets_not_recorded_and_the_candidate_retries(run) -> None:
    candidate = [
        _say("Hello, Anand Dairy Cooperative calling."),
        _tools(("lookup_farmer", {"farmer_id": "F-2231"}), content="One moment."),
        _say("How much milk will you send this evening?"),
        _say("I am sorry. May I ask why?"),
        _tools(("log_zero_supply_reason", {**RIGHT, "category": "other"})),
        _tools(("log_zero_supply_reason", RIGHT), content="Let me correct that."),
        _tools(("end_call", {"reason": "completed"}), content="It is recorded. Goodbye."),
    ]
    t = await run(candidate=candidate)
    assert t.end_reason == EndReason.CALL_ENDED
    logs = [e for e in t.tool_events if e.name == "log_zero_supply_reason"]
    assert [(e.outcome, e.queue_position, e.result["status"]) for e in logs] == [
        ("mismatch", 0, "not_recorded"),
        ("authored", 1, "confirmed"),
    ]
    assert [m.field for m in logs[0].matcher_results if not m.ok] == ["category"]
    assert logs[0].candidate_turn == logs[1].candidate_turn == 3  # the retry chained in the same turn


async def test_caller_done_after_every_step(run, dairy) -> None:
    _agent, scen = dairy
    path = [
        *list(scen.reference_path or [])[:3],
        ReferenceTurn(
            before_tools="I have noted it.",
            tool_calls=[{"name": "log_zero_supply_reason", "arguments": RIGHT}],
            speech="Take care of your cow.",
        ),
    ]
    t = await run(scenario=scen.model_copy(update={"reference_path": path}))
    assert t.end_reason == EndReason.CALLER_DONE
    last = t.caller_turns[-1]
    assert last.done and last.expressed_steps == [] and last.intended == "Okay, thank you. Bye."
    assert t.messages[-1].role == "user" and t.messages[-1].caller_turn == 4  # nobody answers a hang-up


async def test_caller_done_early_is_scored_not_skipped(run) -> None:
    t = await run(caller=[_caller("Sorry, wrong number. Bye.", None, True)])
    assert t.end_reason == EndReason.CALLER_DONE_EARLY and len(t.caller_turns) == 1
    assert not t.skipped


async def test_max_turns(run) -> None:
    t = await run(
        candidate=[_say("Hello?")],
        caller=[_caller("Hello? Can you hear me?")],
        limits=LoopLimits(max_caller_turns=3),
    )
    assert t.end_reason == EndReason.MAX_TURNS and len(t.caller_turns) == 3
    assert t.messages[-1].role == "assistant" and t.messages[-1].candidate_turn == 3
    assert t.settings["max_caller_turns"] == 3


async def test_failed_call_ending_tool_hands_control_back(run) -> None:
    candidate = [
        _say("Hello, Anand Dairy Cooperative calling."),
        _tools(("end_call", {"reason": "bored", "concluding_message": "Bye now."})),
        _say("Sorry, I am still here."),
        _tools(("end_call", {"reason": "completed"}), content="Goodbye."),
    ]
    t = await run(candidate=candidate)
    first, second = t.tool_events
    assert first.call_ending and first.success_condition_met is False and not first.ended_call
    assert first.result["status"] == "failed"
    after = t.messages[first.result_message_index + 1]
    assert (
        after.role == "assistant" and after.content == "Sorry, I am still here." and after.candidate_turn == 1
    )
    assert second.ended_call and second.candidate_turn == 2
    assert t.end_reason == EndReason.CALL_ENDED


async def test_candidate_may_end_the_call_in_its_greeting(run) -> None:
    t = await run(candidate=[_tools(("end_call", {"reason": "completed"}), content="Wrong number, sorry.")])
    assert t.end_reason == EndReason.CALL_ENDED and t.caller_turns == []


def test_concluding_message_is_offered_on_call_ending_tools_only(dairy) -> None:
    agent, _ = dairy
    tools = {t.name: t for t in candidate_tools(agent.config)}
    end = tools["end_call"].parameters
    assert end["properties"]["concluding_message"]["type"] == "string"
    assert "concluding_message" not in end["required"]
    assert "concluding_message" not in tools["lookup_farmer"].parameters["properties"]
    assert "concluding_message" not in agent.config.tools[2].parameters["properties"]  # no mutation
    off = agent.config.model_copy(
        update={
            "call_ending_tools": [
                agent.config.call_ending_tools[0].model_copy(update={"concluding_message": False})
            ]
        }
    )
    assert (
        "concluding_message"
        not in {t.name: t for t in candidate_tools(off)}["end_call"].parameters["properties"]
    )


async def test_empty_first_user_message(run, recorder, bundle) -> None:
    cand = recorder(create_scripted("scripted:reference", None, bundle))
    t = await run(candidate=cand, limits=LoopLimits(empty_first_user_message=True))
    assert (t.messages[1].role, t.messages[1].content, t.messages[1].caller_turn) == ("user", "", None)
    assert [(m.role, m.content) for m in cand.requests[0].messages][1:] == [("user", "")]
    assert t.end_reason == EndReason.CALL_ENDED
    assert t.settings["empty_first_user_message"] is True


async def test_candidate_requests_carry_the_static_part_of_the_document(run, recorder, bundle, dairy) -> None:
    agent, _ = dairy
    cand = recorder(create_scripted("scripted:reference", None, bundle))
    await run(candidate=cand)
    assert {r.static_system_chars for r in cand.requests} == {len("You are ")}
    assert cand.requests[0].messages[0].content.startswith("You are ")
    moved = agent.model_copy(
        update={"instructions_template": "Rules first.\n\n## Call context\nToday is {{date}}."}
    )
    cand = recorder(create_scripted("scripted:reference", None, bundle))
    await run(candidate=cand, agent=moved)
    static = len("Rules first.\n\n## Call context\nToday is ")
    assert {r.static_system_chars for r in cand.requests} == {static}


@pytest.mark.parametrize(
    ("setting", "expected"),
    [({"first_user_message": "text", "first_user_message_text": "Hello?"}, "Hello?"),
     ({"first_user_message": "empty"}, ""),
     ({"first_user_message": "none"}, None),
     ({}, None)],  # auto: a scripted model needs none
)
async def test_first_user_message_setting_is_sent_and_recorded(
    run, recorder, bundle, setting, expected
) -> None:
    from callbench.models.base import ModelSettings

    cand = recorder(create_scripted("scripted:reference", ModelSettings(**setting), bundle))
    t = await run(candidate=cand)
    first = t.messages[1]
    if expected is None:
        assert first.role == "assistant"
        assert [m.role for m in cand.requests[0].messages] == ["system"]
    else:
        assert (first.role, first.content, first.caller_turn) == ("user", expected, None)
        assert [(m.role, m.content) for m in cand.requests[0].messages][1:] == [("user", expected)]
    assert t.candidate.settings.first_user_message == setting.get("first_user_message", "auto")
    assert t.end_reason == EndReason.CALL_ENDED


@pytest.mark.parametrize(
    ("agent_turn", "setting", "limits", "expected"),
    [
        ({"first_user_message": "empty"}, {}, {}, ""),  # auto: the agent's convention
        ({"first_user_message": "text", "first_user_message_text": "Hello?"}, {}, {}, "Hello?"),
        ({"first_user_message": "none"}, {}, {}, None),
        ({"first_user_message": "empty"}, {"first_user_message": "none"}, {}, None),  # run settings win
        ({"first_user_message": "none"}, {"first_user_message": "text", "first_user_message_text": "Hi"}, {},
         "Hi"),
        ({"first_user_message": "text", "first_user_message_text": "Hello?"}, {"first_user_message": "empty"},
         {}, ""),
        ({"first_user_message": "text", "first_user_message_text": "Hello?"}, {},
         {"empty_first_user_message": True}, ""),  # the library flag over both
    ],
)
async def test_the_agents_first_turn_is_the_default_that_run_settings_override(
    run, recorder, bundle, dairy, agent_turn, setting, limits, expected
) -> None:
    from callbench.models.base import ModelSettings

    agent, _ = dairy
    agent = agent.model_copy(update={"config": agent.config.model_validate(
        {**agent.config.model_dump(mode="json", exclude_none=True), **agent_turn})})
    cand = recorder(create_scripted("scripted:reference", ModelSettings(**setting), bundle))
    t = await run(candidate=cand, agent=agent, limits=LoopLimits(**limits))
    first = t.messages[1]
    if expected is None:
        assert first.role == "assistant"
        assert [m.role for m in cand.requests[0].messages] == ["system"]
    else:
        assert (first.role, first.content, first.caller_turn) == ("user", expected, None)
        assert [(m.role, m.content) for m in cand.requests[0].messages][1:] == [("user", expected)]
    assert t.end_reason == EndReason.CALL_ENDED
