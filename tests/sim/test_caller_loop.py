"""Caller validation inside the loop: a second attempt, conversation reruns, skipping; and model
failures (infrastructure skips, candidate output errors are recorded and graded)."""

from typing import ClassVar

from callbench.sim.episode import LoopLimits
from callbench.sim.views import candidate_messages
from callbench.trace import EndReason


def _c(speech: str, step: str | None = None, done: bool = False) -> dict:
    return {"speech": speech, "expressed_step": step, "done": done}


GOOD = [
    _c("Yes, this is Meena.", "s1_greet"),
    _c("No milk this evening.", "s2_no_milk"),
    _c("My cow has mastitis.", "s3_reason"),
    _c("Okay, bye.", None, True),
]


async def test_rejected_turn_gets_one_more_attempt_with_the_reason(run, recorder) -> None:
    from callbench.models.scripted.script import ScriptedFileModel

    caller = recorder(ScriptedFileModel.from_data({"caller": [_c("Caller: yes it's me", "s1_greet"), *GOOD]}))
    t = await run(caller=caller)
    first = t.caller_turns[0]
    assert first.attempts == 2 and len(first.rejections) == 1
    assert first.rejections[0].startswith("meta_talk: a speaker prefix")
    assert "Caller: yes it's me" in first.rejections[0]  # the rejected reply is kept for diagnosis
    assert first.intended == "Yes, this is Meena." and t.reruns == 0
    retry = caller.requests[1]
    assert retry.context.attempt == 1 and retry.context.turn == 1
    assert "your previous reply was rejected - meta_talk: a speaker prefix" in retry.messages[-1].content
    assert "harness" not in (caller.requests[2].messages[-1].content or "")  # later turns carry no note
    assert t.end_reason == EndReason.CALL_ENDED


async def test_a_runaway_turn_is_rejected_and_never_reaches_the_candidate(run, recorder) -> None:
    from callbench.models.scripted.script import ScriptedFileModel

    runaway = "Yes this is Meena and " + "my cow is unwell " * 2000  # 34,022 characters, 34,021 said
    caller = recorder(ScriptedFileModel.from_data({"caller": [_c(runaway, "s1_greet"), *GOOD]}))
    t = await run(caller=caller)
    first = t.caller_turns[0]
    assert first.attempts == 2 and first.rejections[0].startswith(
        "too_long: the turn is 34021 characters; a caller's turn is at most 600")
    assert first.intended == "Yes, this is Meena." and t.end_reason == EndReason.CALL_ENDED
    assert all("my cow is unwell my cow" not in (m.content or "") for m in candidate_messages(t.messages))


async def test_conversation_is_rerun_after_two_rejections(run) -> None:
    caller = {"caller": [_c(""), "not json", *GOOD]}
    t = await run(caller=caller)
    assert t.reruns == 1 and t.end_reason == EndReason.CALL_ENDED
    assert t.caller_turns[0].attempts == 1 and t.caller_turns[0].rejections == []
    assert t.usage["caller"].calls == 2 + 3 and t.usage["candidate"].calls == 1 + 5


async def test_skip_after_every_rerun_fails(run) -> None:
    t = await run(caller={"caller": [_c("Hello s3_reason", None)]})
    assert t.end_reason == EndReason.SKIPPED and t.skipped and t.reruns == 3
    assert t.skip_reason is not None
    assert t.skip_reason.startswith("caller_validation: caller turn 1 rejected 2 times; last: leak:")
    failed = t.caller_turns[-1]
    assert failed.intended == "" and failed.attempts == 2 and failed.message_indices == []
    assert t.usage["caller"].calls == 8 and t.usage["candidate"].calls == 4


async def test_each_step_rule_is_enforced_in_the_loop(run) -> None:
    caller = {"caller": [_c("Yes.", "s1_greet"), _c("Yes again.", "s1_greet"), _c("Zero.", "s3_reason")]}
    t = await run(caller=caller, limits=LoopLimits(conversation_reruns=0))
    assert t.skipped and t.reruns == 0
    turn2 = t.caller_turns[-1]
    assert turn2.index == 2
    assert turn2.rejections[0].startswith("step_repeated") and turn2.rejections[1].startswith(
        "step_out_of_order"
    )


async def test_infrastructure_error_skips_the_episode(run) -> None:
    t = await run(candidate=[{"raise": "infrastructure", "message": "HTTP 503 after 5 retries"}])
    assert t.end_reason == EndReason.SKIPPED and t.skip_reason == "infrastructure: HTTP 503 after 5 retries"
    assert t.reruns == 0


async def test_caller_infrastructure_error_skips_too(run) -> None:
    t = await run(caller=[{"raise": "infrastructure", "message": "rate limited"}])
    assert t.skipped and t.skip_reason == "infrastructure: rate limited"


async def test_caller_output_error_counts_as_a_rejected_attempt(run) -> None:
    caller = {"caller": [{"raise": "output", "message": "schema violated", "raw": "{speech"}, *GOOD]}
    t = await run(caller=caller)
    assert t.caller_turns[0].rejections[0].startswith("invalid_json: schema violated")
    assert "{speech" in t.caller_turns[0].rejections[0] and t.end_reason == EndReason.CALL_ENDED


async def test_candidate_output_error_is_recorded_and_the_call_goes_on(run, recorder) -> None:
    from callbench.models.scripted.script import ScriptedFileModel

    cand = recorder(
        ScriptedFileModel.from_data(
            {
                "candidate": [
                    {"content": "Hello, Anand Dairy here."},
                    {"raise": "output", "message": "unparseable tool call", "raw": "<tool_call>{oops"},
                    {"content": "Sorry, could you say that again?"},
                ]
            }
        )
    )
    caller = recorder(
        ScriptedFileModel.from_data(
            {
                "caller": [
                    _c("Yes, this is Meena.", "s1_greet"),
                    _c("Hello? Are you there?"),
                    _c("Okay, bye.", None, True),
                ]
            }
        )
    )
    t = await run(candidate=cand, caller=caller)
    err = next(m for m in t.messages if m.error)
    assert err.role == "assistant" and err.content is None and err.candidate_turn == 1
    assert "unparseable tool call" in err.error and "<tool_call>{oops" in err.error
    assert t.end_reason == EndReason.CALLER_DONE_EARLY and not t.skipped
    # the unusable output is never sent back to the candidate; the caller heard silence
    last = cand.requests[-1].messages
    answer = max(m.index for m in t.messages if m.role == "assistant")
    assert last == candidate_messages(t.messages[:answer])
    assert all(m.content is not None or m.tool_calls for m in last if m.role == "assistant")
    assert caller.requests[1].messages[-1].content == "(silence)"


async def test_caller_empty_replies_skip_as_infrastructure_not_caller_validation(run) -> None:
    """A provider that keeps answering the caller with empty completions (the adapter retried once
    and raised ``empty_reply``) is the provider's fault: an infrastructure skip that resume reruns,
    not a caller_validation skip that it keeps."""
    from callbench.models.base import ModelOutputError, ModelRequest, ModelResponse

    class EmptyCaller:
        spec = "fake:empty"
        settings: ClassVar[dict] = {}
        calls = 0

        async def complete(self, request: ModelRequest) -> ModelResponse:
            EmptyCaller.calls += 1
            raise ModelOutputError("empty_reply: fake:empty returned no content", kind="empty_reply")

    t = await run(caller=EmptyCaller())
    assert t.skipped and t.skip_reason is not None
    assert t.skip_reason.startswith("infrastructure: caller: empty_reply"), t.skip_reason
    assert t.reruns == 0 and EmptyCaller.calls == 1
