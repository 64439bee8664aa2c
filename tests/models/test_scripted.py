"""Scripted candidate and caller models (callbench.models.scripted.models, scripted_script)."""

import json
from pathlib import Path

import pytest

from callbench.bundle.models import Bundle
from callbench.bundle.validate.audits import load_bundle
from callbench.models.base import (
    ChatMessage,
    InfrastructureError,
    ModelOutputError,
    ModelRequest,
    RequestContext,
    ToolSchema,
)
from callbench.models.scripted.hangup import minimal_arguments
from callbench.models.scripted.models import (
    HangupCandidate,
    PlanCaller,
    ReferenceCandidate,
    closing_line,
    create_scripted,
    spoken,
)
from callbench.models.scripted.script import ScriptedFileModel, load_script
from callbench.sim.episode import candidate_tools, run_episode
from callbench.trace import EndReason

DAIRY = Path(__file__).parents[1] / "sim" / "data" / "dairy_bundle"


@pytest.fixture(scope="module")
def bundle() -> Bundle:
    return load_bundle(DAIRY)


def _req(
    role: str = "candidate",
    turn: int = 0,
    messages: list[ChatMessage] | None = None,
    episode: str = "e1",
    tools: list[ToolSchema] | None = None,
) -> ModelRequest:
    return ModelRequest(
        messages=messages or [ChatMessage(role="system", content="x")],
        tools=tools or [],
        context=RequestContext(
            role=role, episode_id=episode, agent_id="dairy", scenario_id="dairy_zero_supply", turn=turn
        ),
    )


def test_create_scripted_dispatch(bundle: Bundle, tmp_path: Path) -> None:
    assert isinstance(create_scripted("scripted:reference", None, bundle), ReferenceCandidate)
    assert isinstance(create_scripted("scripted:plan", None, bundle), PlanCaller)
    assert isinstance(create_scripted("scripted:hangup", None, None), HangupCandidate)
    f = tmp_path / "s.yaml"
    f.write_text("candidate:\n  - hello\n", encoding="utf-8")
    m = create_scripted(f"scripted:file:{f}")
    assert isinstance(m, ScriptedFileModel) and m.spec == f"scripted:file:{f}"
    with pytest.raises(ValueError, match="needs the bundle"):
        create_scripted("scripted:reference")
    with pytest.raises(ValueError, match="unknown scripted model 'scripted:nope'"):
        create_scripted("scripted:nope", None, bundle)
    with pytest.raises(ValueError, match="cannot read"):
        create_scripted(f"scripted:file:{tmp_path / 'missing.yaml'}")


async def test_reference_replays_before_tools_then_speech(bundle: Bundle) -> None:
    m = create_scripted("scripted:reference", None, bundle)
    greet = await m.complete(_req(turn=0))
    assert greet.content.startswith("Hello, this is the Anand Dairy") and greet.tool_calls == []
    calls = await m.complete(_req(turn=1, messages=[ChatMessage(role="user", content="hi")]))
    assert calls.content == "Thank you, Meena ji, one moment while I open your record."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls.tool_calls] == [
        ("ref_1_0", "lookup_farmer", {"farmer_id": "F-2231"})
    ]
    after = await m.complete(
        _req(turn=1, messages=[ChatMessage(role="tool", content="{}", tool_call_id="ref_1_0")])
    )
    assert after.content == "How much milk will you send this evening?" and after.tool_calls == []
    with pytest.raises(ModelOutputError, match="has no turn 9"):
        await m.complete(_req(turn=9))


async def test_plan_caller_speaks_meanings_in_order_then_closes(bundle: Bundle) -> None:
    m = create_scripted("scripted:plan", None, bundle)
    outs = [json.loads((await m.complete(_req("caller", turn=t))).content or "") for t in (1, 2, 3, 4)]
    assert [o["expressed_step"] for o in outs] == ["s1_greet", "s2_no_milk", "s3_reason", None]
    assert outs[1]["speech"] == "No milk will come this evening, so the estimate is zero."
    assert [o["done"] for o in outs] == [False, False, False, True]
    assert outs[3]["speech"] == "Okay, thank you. Bye."
    assert closing_line("gu-IN") == "સારું, આભાર. આવજો." and closing_line("xx") == closing_line("en-GB")


def test_plan_caller_drops_asides_from_meanings() -> None:
    assert spoken("હા, બોલું છું (અવાજમાં નારાજગી).") == "હા, બોલું છું."
    assert spoken("Yes [quietly] it is me") == "Yes it is me"
    assert spoken("(sighs)") == "(sighs)"


def test_plan_caller_says_at_most_one_accepted_turn_of_a_long_meaning() -> None:
    # the harness rejects a caller turn over 600 characters (too_long): the plan caller's speech
    # stops at the last word that fits, so a long meaning never fails the call
    meaning = "Tell the agent " + "that the cow is unwell " * 40  # 935 characters
    said = spoken(meaning)
    # 15 + 25 x 23 = 590 characters, then "that the" of the 26th repetition
    assert len(said) == 598 and said.endswith("is unwell that the") and meaning.startswith(said)
    assert spoken("x" * 700) == "x" * 600  # no word boundary: cut at the limit
    assert spoken("Okay. " * 101) == ("Okay. " * 100).strip()  # 599 characters: the next word does not fit
    assert spoken("Okay. " * 100) == ("Okay. " * 100).strip()  # 599 characters: whole
    # a boundary that would keep one letter of 600: cut at the limit instead
    assert spoken("a " + "x" * 700) == "a " + "x" * 598
    assert len(spoken("\u095b" * 400)) == 600  # counted in NFC, as the harness counts a turn


def test_minimal_arguments() -> None:
    schema = {
        "type": "object",
        "required": ["reason", "n", "ok", "tags", "note"],
        "properties": {
            "reason": {"enum": ["completed", "other"]},
            "n": {"type": "integer"},
            "ok": {"type": "boolean"},
            "tags": {"type": "array"},
            "note": {"type": ["string", "null"]},
            "optional": {"type": "string"},
        },
    }
    assert minimal_arguments(schema) == {"reason": "completed", "n": 0, "ok": False, "tags": [], "note": ""}


async def test_hangup_candidate_ends_the_call_without_doing_the_task(bundle: Bundle) -> None:
    agent, scen = bundle.scenario("dairy_zero_supply")
    t = await run_episode(
        agent,
        scen,
        candidate=create_scripted("scripted:hangup", None, bundle),
        caller=create_scripted("scripted:plan", None, bundle),
        bundle_name="b",
        bundle_version="1",
        bundle_hash="h",
        episode_id="e",
        run_seed=1,
        repeat=0,
    )
    assert t.end_reason == EndReason.CALL_ENDED and len(t.caller_turns) == 1
    assert t.messages[1].content == "Hello, this is Anand Dairy Cooperative. How can I help you?"
    assert [(e.name, e.arguments) for e in t.tool_events] == [("end_call", {"reason": "completed"})]


async def test_hangup_prefers_a_plain_end_call_tool_over_a_transfer(bundle: Bundle) -> None:
    agent, _scen = bundle.scenario("dairy_zero_supply")
    transfer = agent.config.tools[0].model_copy(update={"name": "transfer_to_desk"})
    cfg = agent.config.model_copy(
        update={
            "tools": [*agent.config.tools, transfer],
            "call_ending_tools": [
                agent.config.call_ending_tools[0].model_copy(update={"tool": "transfer_to_desk"}),
                *agent.config.call_ending_tools,
            ],
        }
    )
    b = bundle.model_copy(deep=True)
    b.agents["dairy"] = agent.model_copy(update={"config": cfg})
    r = await create_scripted("scripted:hangup", None, b).complete(
        _req(turn=1, tools=candidate_tools(cfg), messages=[ChatMessage(role="user", content="hello")])
    )
    assert [c.name for c in r.tool_calls] == ["end_call"]


async def test_hangup_without_bundle_finds_the_call_ending_tool_by_its_concluding_message(
    bundle: Bundle,
) -> None:
    agent, _ = bundle.scenario("dairy_zero_supply")
    m = create_scripted("scripted:hangup")
    r = await m.complete(
        _req(
            turn=1, tools=candidate_tools(agent.config), messages=[ChatMessage(role="user", content="hello")]
        )
    )
    assert r.content == "Thank you for calling. Goodbye." and [c.name for c in r.tool_calls] == ["end_call"]


async def test_script_model_per_role_and_per_episode_positions() -> None:
    m = ScriptedFileModel.from_data(
        {
            "candidate": [
                "one",
                {
                    "content": "two",
                    "tool_calls": [
                        {"name": "t", "arguments": {"a": 1}},
                        {"id": "k", "name": "u", "arguments": "{bad"},
                    ],
                },
            ],
            "caller": [{"speech": "hi", "expressed_step": None, "done": False}],
        }
    )
    assert (await m.complete(_req())).content == "one"
    r = await m.complete(_req())
    assert r.content == "two" and [(c.id, c.arguments) for c in r.tool_calls] == [
        ("script_1_0", '{"a": 1}'),
        ("k", "{bad"),
    ]
    assert (await m.complete(_req())).content == "two"  # past the end the last reply repeats
    assert (await m.complete(_req(episode="e2"))).content == "one"  # each episode starts at the top
    c = await m.complete(_req("caller"))
    assert json.loads(c.content or "") == {"speech": "hi", "expressed_step": None, "done": False}


async def test_script_model_raises_scripted_errors() -> None:
    m = ScriptedFileModel.from_data(
        [
            {"raise": "output", "message": "bad output", "raw": "<x"},
            {"raise": "infrastructure", "message": "503"},
        ]
    )
    with pytest.raises(ModelOutputError, match="bad output") as e:
        await m.complete(_req())
    assert e.value.raw == "<x"
    with pytest.raises(InfrastructureError, match="503"):
        await m.complete(_req())


def test_script_validation_errors_name_the_place() -> None:
    with pytest.raises(ValueError, match="unknown role"):
        load_script({"judge": ["x"]})
    with pytest.raises(ValueError, match=r"s\.yaml:candidate\.1\.raise"):
        load_script({"candidate": ["ok", {"raise": "sometimes"}]}, "s.yaml")
    with pytest.raises(ValueError, match="expected a list"):
        load_script("just text")
    assert load_script({"candidate": [{"json": [1, 2]}]})["candidate"][0].content == "[1, 2]"


async def test_talk_candidate_never_calls_a_tool(bundle: Bundle) -> None:
    from callbench.models.scripted.models import TalkCandidate

    agent, scen = bundle.scenario("dairy_zero_supply")
    talk = create_scripted("scripted:talk", None, bundle)
    assert isinstance(talk, TalkCandidate)
    t = await run_episode(
        agent,
        scen,
        candidate=talk,
        caller=create_scripted("scripted:plan", None, bundle),
        bundle_name="b",
        bundle_version="1",
        bundle_hash="h",
        episode_id="e",
        run_seed=1,
        repeat=0,
    )
    # the scripted caller speaks every plan step, then hangs up: the talker never ends the call
    assert t.end_reason == EndReason.CALLER_DONE
    assert len(t.caller_turns) == len(scen.brief.plan) + 1
    assert t.tool_events == []
    said = [m.content for m in t.messages if m.role == "assistant"]
    assert said[0] == "Hello, this is Anand Dairy Cooperative. How can I help you?"
    assert set(said[1:]) == {TalkCandidate.LINE} and len(said) == len(scen.brief.plan) + 1
