"""The two judges: what each is shown (asserted on the actual requests), the schema, one retry,
and judge errors that are excluded and counted, never scored as not met."""

from __future__ import annotations

import json

import pytest

from callbench.bundle.matchers import iter_matchers
from callbench.grade.grader import grade_trace
from callbench.grade.judges import run_conversation_judge, run_task_judge
from callbench.grade.models import Label
from callbench.models.base import InfrastructureError, ModelOutputError
from callbench.models.scripted.judge import create_scripted_judge
from callbench.runfolder import episode_files

TASK_OK = {
    "criteria": {
        "records_zero": {"reason": "logged", "cited_messages": [5, 6], "label": "met"},
        "no_pressure": {"reason": "none", "cited_messages": [7], "label": "met"},
        "grounded": {"reason": "matches", "cited_messages": [7], "label": "partial"},
    }
}
CONV_OK = {
    "criteria": {"polite": {"reason": "", "cited_messages": [7], "label": "met"}},
    "ratings": {
        k: {"reason": "", "cited_messages": [9], "rating": 5}
        for k in ("memory", "speech_around_tools", "speakability", "language_and_script", "closing")
    },
}


def _user_text(request) -> str:
    return "\n".join(m.content or "" for m in request.messages)


def _scalars(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _scalars(v)
    elif isinstance(value, list):
        for v in value:
            yield from _scalars(v)
    elif isinstance(value, str):
        yield value


async def test_conversation_judge_never_sees_expected_actions_goal_or_task_criteria(
    make_trace, bundle, recording
):
    judge = recording({"task_judge": [TASK_OK], "conversation_judge": [CONV_OK]})
    # the hangup trace itself contains none of the expected argument values
    g = await grade_trace(make_trace("hangup"), bundle, judge, judge)
    conv = [r for r in judge.requests if r.context.role == "conversation_judge"]
    task = [r for r in judge.requests if r.context.role == "task_judge"]
    # CONV_OK cites messages 7 and 9, which this 5-message trace lacks: the judge is asked twice,
    # and neither request (the retry carries the error list) may leak anything
    assert [r.context.attempt for r in conv] == [0, 1]
    assert g.judge_errors == 3 + 5  # task: 3 criteria (cite 5..7); conversation: polite + 4 ratings
    text = "\n".join(_user_text(r) + json.dumps(r.response_schema) for r in conv)
    _, scenario = bundle.scenario("zero_supply")
    forbidden = [scenario.goal, "TASKSTATEMENT", "TASKANCHOR", "Never pressure a farmer"]
    for check in scenario.action_checks:
        forbidden.append(check.id)
        if check.tool != "end_call":
            forbidden.append(check.tool)
        for m in check.args.values():
            for sub in iter_matchers(m):
                forbidden.extend(_scalars(sub.model_dump(mode="json")))
    forbidden += [c.id for c in scenario.criteria if c.pillar == "task"]
    forbidden = [f for f in forbidden if f not in ("eq", "one_of")]  # matcher kind names, not values
    assert "cattle_health" in forbidden and "evening" in forbidden and "log_reason" in forbidden
    for f in forbidden:
        assert f not in text, f"conversation judge saw {f!r}"
    # ...while it does see the conversation criterion, the rubric and the transcript
    assert "The agent accepts the farmer's answer politely" in text
    assert "speech_around_tools" in text and "Okay bye." in text
    # the task judge sees the goal and task criteria with anchors and excerpts
    ttext = _user_text(task[0])
    assert scenario.goal in ttext and "TASKANCHOR recorded, no reason" in ttext
    assert "Never pressure a farmer to supply milk when she has a reason not to." in ttext
    assert "polite" not in json.dumps(
        task[0].response_schema
    )  # conversation criteria are not the task judge's


async def test_schema_enumerates_items_and_indices(make_trace, bundle, recording):
    judge = recording({"task_judge": [TASK_OK], "conversation_judge": [CONV_OK]})
    trace = make_trace("good")
    await grade_trace(trace, bundle, judge, judge)
    by_role = {r.context.role: r for r in judge.requests}
    ts = by_role["task_judge"].response_schema
    assert ts["properties"]["criteria"]["required"] == ["records_zero", "no_pressure", "grounded"]
    # the trace's indices 0..10 are consecutive: bounds, not an 11-value enum
    assert ts["$defs"]["message_index"] == {"type": "integer", "minimum": 0, "maximum": 10}
    cs = by_role["conversation_judge"].response_schema
    assert cs["properties"]["criteria"]["required"] == ["polite"]
    assert cs["properties"]["ratings"]["required"] == [
        "memory",
        "speech_around_tools",
        "speakability",
        "language_and_script",
        "closing",
    ]
    assert cs["$defs"]["rating"]["properties"]["rating"] == {"type": "integer", "minimum": 1, "maximum": 5}
    assert by_role["task_judge"].context.episode_id == trace.episode_id
    assert by_role["conversation_judge"].context.scenario_id == "zero_supply"


async def test_trace_rendering_marks_intended_and_observed(make_trace, bundle, recording):
    judge = recording({"task_judge": [TASK_OK], "conversation_judge": [CONV_OK]})
    await grade_trace(make_trace("good"), bundle, judge, judge)
    text = _user_text(next(r for r in judge.requests if r.context.role == "conversation_judge"))
    assert '[2] CALLER (turn 1), as the agent heard it: "no milk today, the cow is sock"' in text
    assert 'what the caller actually said in turn 1: "no milk today, the cow is sick"' in text
    assert 'the recognizer heard "sock" instead of "sick"' in text
    assert "[8] CALLER (turn 2), as the agent heard it" in text
    assert "calls tool event #1: log_zero_supply_reason" in text
    assert PROMPT_LINE not in text  # the operating document is summarised, not shown


PROMPT_LINE = "You are the evening milk-collection agent"


async def test_bad_reply_retried_once_then_used(make_trace, bundle, recording):
    bad = json.dumps(
        {"criteria": dict(TASK_OK["criteria"], records_zero={"label": "great", "cited_messages": []})}
    )
    judge = recording({"task_judge": [bad, TASK_OK], "conversation_judge": [CONV_OK]})
    items, out = await run_task_judge(make_trace("good"), bundle.scenario("zero_supply")[1], judge)
    assert out.attempts == 2 and out.errors == {}
    assert [i.label for i in items] == [Label.MET, Label.MET, Label.PARTIAL]
    second = judge.requests[1]
    assert second.context.attempt == 1
    assert second.messages[-2].role == "assistant" and second.messages[-2].content == bad
    assert "unknown label 'great'" in second.messages[-1].content
    assert out.usage.calls == 2


async def test_first_reply_valid_items_are_kept(make_trace, bundle, recording):
    first = {"criteria": dict(TASK_OK["criteria"], grounded={"label": "met", "cited_messages": [999]})}
    second = {"criteria": {k: dict(v, label="not_met") for k, v in TASK_OK["criteria"].items()}}
    judge = recording({"task_judge": [first, second]})
    items, _ = await run_task_judge(make_trace("good"), bundle.scenario("zero_supply")[1], judge)
    # records_zero and no_pressure came usable in the first reply; only grounded is taken from the retry
    assert [i.label for i in items] == [Label.MET, Label.MET, Label.NOT_MET]


@pytest.mark.parametrize(
    "replies",
    [
        ["not json at all", "still not json"],
        [ModelOutputError("schema violated"), '```json\n{"criteria": \n```'],
        [{"criteria": {}}, {"criteria": {}}],
    ],
)
async def test_unusable_twice_is_judge_error_excluded_and_counted(make_trace, bundle, recording, replies):
    judge = recording({"task_judge": replies, "conversation_judge": [CONV_OK]})
    g = await grade_trace(make_trace("good"), bundle, judge, judge)
    task_items = [i for i in g.items if i.source == "task_criterion"]
    assert [i.label for i in task_items] == [Label.JUDGE_ERROR] * 3
    assert all(i.r is None and i.reason.startswith("judge error after 2 attempt(s)") for i in task_items)
    assert g.judge_errors == 3
    assert g.judge_attempts["task_judge"] == 2
    # why the task judge was asked again: the first reply's first problem; the other judge's first
    # reply was usable
    assert list(g.judge_reasks) == ["task_judge"]
    first = replies[0]
    expected = {str: "no JSON object", ModelOutputError: "violated the output format: schema violated",
                dict: "missing from the reply"}[type(first)]
    assert expected in g.judge_reasks["task_judge"], g.judge_reasks
    # every judged task item errored: the episode is not graded, never scored on
    # the action checks alone (that would have been 100) nor scored 0
    assert g.not_graded and g.not_graded_reason.startswith("judge_output: task: 3 of 3 judged items")
    assert g.task_score is None and g.overall is None and g.passed is None


async def test_infrastructure_error_is_judge_error_not_zero(make_trace, bundle, recording):
    judge = recording(
        {"task_judge": [TASK_OK], "conversation_judge": [InfrastructureError("HTTP 503 after 5 retries")]}
    )
    g = await grade_trace(make_trace("good"), bundle, judge, judge)
    conv_items = [i for i in g.items if i.pillar == "conversation"]
    assert {i.label for i in conv_items} == {Label.JUDGE_ERROR}
    assert all("judge infrastructure error: HTTP 503" in i.reason for i in conv_items)
    assert g.judge_errors == 6  # polite + five ratings
    assert g.judge_attempts["conversation_judge"] == 2  # a judge outage is asked again once
    assert g.judge_reasks == {"conversation_judge": "judge infrastructure error: HTTP 503 after 5 retries"}
    # a judge outage never scores an episode: it once was overall == task score (passed)
    assert g.not_graded and g.not_graded_reason.startswith("judge_outage: conversation: 6 of 6")
    assert g.conversation_score is None and g.task_score is None and g.overall is None
    assert g.passed is None and not g.skipped


async def test_scripted_infra_error_and_garbage_judges(make_trace, bundle):
    for spec, attempts, category in (("scripted:infra-error", 2, "judge_outage"),
                                     ("scripted:garbage", 2, "judge_output")):
        j = create_scripted_judge(spec)
        g = await grade_trace(make_trace("good"), bundle, j, j)
        assert g.judge_errors == 3 + 6
        # an outage is asked again once, like an unusable reply
        assert g.judge_attempts == {"task_judge": attempts, "conversation_judge": attempts}
        assert g.not_graded and g.not_graded_reason.startswith(f"{category}: task: 3 of 3")
        assert g.task_score is None and g.conversation_score is None


async def test_rating_not_applicable_by_trace_is_not_asked(make_trace, bundle, recording):
    judge = recording({"conversation_judge": [CONV_OK]})
    items, _ = await run_conversation_judge(make_trace("hangup"), bundle.scenario("zero_supply")[1], judge)
    asked = judge.requests[0].response_schema["properties"]["ratings"]["required"]
    assert "memory" not in asked and "speech_around_tools" in asked
    mem = next(i for i in items if i.id == "memory")
    assert mem.label == Label.NOT_APPLICABLE and "fewer than two turns" in mem.reason


async def test_conversation_prompts_of_one_scenario_share_their_start(make_trace, bundle, recording):
    """The whole rubric comes first, then the language and the scenario's criteria, and only
    then what differs between two calls (the transcript, the ratings asked): so a local judge
    re-reads only the rest (before, the ratings asked came first and a trace without tool calls
    broke the shared start at the second rating)."""
    judge = recording({"conversation_judge": [CONV_OK, CONV_OK]})
    scenario = bundle.scenario("zero_supply")[1]
    await run_conversation_judge(make_trace("good", "ep-1"), scenario, judge)
    await run_conversation_judge(make_trace("hangup", "ep-2"), scenario, judge)
    firsts = [next(r for r in judge.requests if r.context.episode_id == e) for e in ("ep-1", "ep-2")]
    first, second = (_user_text(r) for r in firsts)
    shared = first[: first.index("Transcript:")]
    assert second.startswith(shared)
    order = [shared.index(h) for h in ("Ratings:", "The caller speaks", "Conversation criteria:")]
    assert order == sorted(order)
    for rating in ("memory", "speech_around_tools", "closing"):
        assert f"- id: {rating}" in shared
    asked = firsts[1].response_schema["properties"]["ratings"]["required"]
    assert "memory" not in asked
    assert "These ratings do not apply to this call and are not asked for: memory" in second
    assert "do not apply" not in first


@pytest.mark.parametrize(
    ("spec", "label", "rating"),
    [
        ("scripted:met", Label.MET, 5),
        ("scripted:partial", Label.PARTIAL, 3),
        ("scripted:not_met", Label.NOT_MET, 1),
    ],
)
async def test_scripted_judges(make_trace, bundle, spec, label, rating):
    j = create_scripted_judge(spec)
    trace = make_trace("good")
    g = await grade_trace(trace, bundle, j, j)
    judged = [i for i in g.items if i.source != "action_check"]
    assert {i.label for i in judged if i.source != "rating"} == {label}
    assert {i.rating for i in judged if i.source == "rating"} == {rating}
    indices = {m.index for m in trace.messages}
    assert all(i.cited_messages and set(i.cited_messages) <= indices for i in judged)
    assert g.judge_errors == 0


def test_scripted_judge_unknown_spec():
    with pytest.raises(ValueError, match="unknown scripted judge"):
        create_scripted_judge("scripted:maybe")


async def test_scripted_file_judge(tmp_path, make_trace, bundle):
    script = tmp_path / "judge.yaml"
    script.write_text(
        "task_judge:\n"
        "  - 'not json'\n"
        "  - " + json.dumps(json.dumps(TASK_OK)) + "\n"
        "conversation_judge:\n"
        "  - " + json.dumps(CONV_OK) + "\n"
    )
    j = create_scripted_judge(f"scripted:file:{script}")
    for episode in ("a", "b"):  # each episode reads its replies from the start of the list
        g = await grade_trace(make_trace("good", episode), bundle, j, j)
        assert g.judge_attempts == {"task_judge": 2, "conversation_judge": 1}
        assert g.judge_errors == 0
        assert list(g.judge_reasks) == ["task_judge"]
        assert next(i for i in g.items if i.id == "grounded").label == Label.PARTIAL
    bad = tmp_path / "bad.yaml"
    bad.write_text("judge: ['x']\n")
    with pytest.raises(ValueError, match="unknown role"):
        create_scripted_judge(f"scripted:file:{bad}")


def test_message_index_schema_stays_under_enum_limits_on_long_transcripts() -> None:
    from callbench.grade.prompts import MAX_INDEX_ENUM, message_index_schema, response_schema

    # a 600-message transcript: no 600-value enum (targets cap enums; Gemini's are strings only)
    long = response_schema(["c"], [], list(range(600)))
    assert long["$defs"]["message_index"] == {"type": "integer", "minimum": 0, "maximum": 599}
    gappy = list(range(0, 2 * (MAX_INDEX_ENUM + 5), 2))
    assert message_index_schema(gappy) == {"type": "integer", "minimum": 0, "maximum": gappy[-1]}
    # a few indices with gaps are still listed exactly
    assert message_index_schema([7, 1, 4]) == {"type": "integer", "enum": [1, 4, 7]}
    assert message_index_schema([]) == {"type": "integer", "minimum": 0, "maximum": 0}


def _twice(ok: dict, kind: str, item: str, first: dict) -> str:
    """``ok`` as JSON text with ``item`` of ``kind`` given first as ``first``, then as in ``ok``."""
    body = json.dumps(ok[kind][item])
    text = json.dumps(ok)
    return text.replace(f'"{item}": {body}', f'"{item}": {json.dumps(first)}, "{item}": {body}', 1)


@pytest.mark.parametrize("role", ["task_judge", "conversation_judge"])
async def test_duplicate_keys_are_rejected_retried_then_a_judge_error(make_trace, bundle, recording, role):
    """Across both judges: a reply giving one item twice (``not_met`` then ``met``
    was stored as met) is rejected and retried; twice in a row it is a judge error, never a label."""
    if role == "task_judge":
        dup = _twice(TASK_OK, "criteria", "no_pressure", {"label": "not_met", "cited_messages": [7]})
        ok = {"task_judge": [dup, TASK_OK], "conversation_judge": [CONV_OK]}
        bad = {"task_judge": [dup, dup], "conversation_judge": [CONV_OK]}
        asked = 3
    else:
        dup = _twice(CONV_OK, "ratings", "memory", {"rating": 1, "cited_messages": [9]})
        ok = {"task_judge": [TASK_OK], "conversation_judge": [dup, CONV_OK]}
        bad = {"task_judge": [TASK_OK], "conversation_judge": [dup, dup]}
        asked = 6
    assert json.loads(dup)  # Python's json alone takes it
    judge = recording(ok)
    g = await grade_trace(make_trace("good"), bundle, judge, judge)
    assert g.judge_attempts[role] == 2 and g.judge_errors == 0
    retry = [r for r in judge.requests if r.context.role == role][1]
    assert "twice" in retry.messages[-1].content
    judge = recording(bad)
    g = await grade_trace(make_trace("good"), bundle, judge, judge)
    assert g.judge_attempts[role] == 2 and g.judge_errors == asked
    errored = [i for i in g.items if i.label == Label.JUDGE_ERROR]
    assert len(errored) == asked and all("twice" in i.reason for i in errored)


def test_the_run_command_counts_a_duplicate_label_as_a_judge_error(tmp_path):
    """The real command: a conversation judge that labels the criterion twice (``not_met`` then
    ``met``) in every reply; it is never stored as met, it is a judge error, and so are the ratings
    of those replies."""
    from pathlib import Path

    from typer.testing import CliRunner

    from callbench.cli import app

    dairy = Path(__file__).parents[1] / "sim" / "data" / "dairy_bundle"
    ratings = {k: {"reason": "", "cited_messages": [], "rating": 5}
               for k in ("memory", "speech_around_tools", "speakability", "language_and_script", "closing")}
    crit = {"crit_no_pressure": {"reason": "", "cited_messages": [], "label": "met"}}
    ok = {"criteria": crit, "ratings": ratings}
    dup = _twice(ok, "criteria", "crit_no_pressure", {"label": "not_met", "cited_messages": []})
    script = tmp_path / "judge.yaml"
    script.write_text("conversation_judge:\n  - " + json.dumps(dup) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    res = CliRunner().invoke(app, [
        "run", str(dairy), "--candidate", "scripted:reference", "--caller", "scripted:plan",
        "--task-judge", "scripted:met", "--conversation-judge", f"scripted:file:{script}",
        "--out", str(out)])
    assert res.exit_code == 0, res.output
    grades = [json.loads(episode_files.read_text(p)) for p in out.glob("grades/*/episodes/*.json.gz")]
    assert grades
    for g in grades:
        judged = [i for i in g["items"] if i["source"] in ("conversation_criterion", "rating")]
        assert len(judged) == 6
        assert all(i["label"] == "judge_error" and "twice" in i["reason"] for i in judged)
        assert g["judge_attempts"]["conversation_judge"] == 2 and g["judge_errors"] == 6


async def test_judge_request_timings_are_kept_in_the_grade(make_trace, bundle, recording):
    """Each judge request its client timed is kept by role: the re-ask after an unusable reply
    too (``ask`` 1), with its HTTP retries; a client that times nothing leaves its role out."""
    from callbench.grade.models import EpisodeGrade, JudgeRequestTiming
    from callbench.models.timing import AttemptTiming, ResponseTiming

    first = ResponseTiming(attempts=[AttemptTiming(sent_s=0.0, finished_s=1.5)])
    second = ResponseTiming(attempts=[AttemptTiming(sent_s=0.0, finished_s=0.5, fault="server_error"),
                                      AttemptTiming(sent_s=1.0, first_token_s=1.25, finished_s=2.0)],
                            streamed=True)
    unusable = ModelOutputError("schema violated")
    unusable.timing = first

    class Timed(recording):  # type: ignore[misc, valid-type]
        async def complete(self, request):
            response = await super().complete(request)
            return response.model_copy(update={"timing": second}) if request.context.role == "task_judge" \
                else response

    task = Timed({"task_judge": [unusable, TASK_OK]})
    conv = recording({"conversation_judge": [CONV_OK]})
    g = await grade_trace(make_trace("good"), bundle, task, conv)
    assert g.judge_attempts["task_judge"] == 2
    assert g.judge_timings == {"task_judge": [
        JudgeRequestTiming(ask=0, waited_s=1.5, first_token_s=1.5),
        JudgeRequestTiming(ask=1, waited_s=2.0, first_token_s=1.25, streamed=True, retries=1),
    ]}
    assert EpisodeGrade.model_validate_json(g.model_dump_json()).judge_timings == g.judge_timings
