import json

import pytest

from callbench.bundle.models import Brief, LoadedAgent, Scenario
from callbench.sim.caller import build_caller_prompt, caller_schema, validate_turn
from callbench.sim.caller_rules import is_internal_id


@pytest.fixture()
def brief(dairy: tuple[LoadedAgent, Scenario]) -> Brief:
    return dairy[1].brief


def _turn(speech: str, step: str | None = None, done: bool = False) -> str:
    return json.dumps({"speech": speech, "expressed_step": step, "done": done})


def test_prompt_holds_every_part_of_the_brief(brief: Brief) -> None:
    p = build_caller_prompt(brief)
    for part in [
        brief.context,
        brief.reason,
        brief.persona,
        "Meena Patel",
        "F-2231",
        "when the next payment will be made",
        "s1_greet",
        "s2_no_milk",
        "s3_reason",
        brief.plan[1].trigger,
        brief.plan[1].meaning,
        "en-IN",
        "Latin",
        "Saturday, 2026-03-14, 17:20",
        "2 to 15 words",
        "one question at a time",
        "you will check",
        "no markdown",
        "say you do not know",
        "never invent a business fact",
        "a few digits per breath",
    ]:
        assert part in p, part
    assert "farmer id: F-2231" in p and "farmer_id" not in p  # internal fact names are not modelled
    assert p.index("s1_greet") < p.index("s2_no_milk") < p.index("s3_reason")
    # fixed rules first, the brief after them, the language line last
    assert p.index("2 to 15 words") < p.index(brief.context) and p.rstrip().endswith("Latin script.")


def test_prompts_of_two_briefs_share_the_rules_as_prefix(brief: Brief) -> None:
    other = brief.model_copy(update={"context": "Someone else entirely."})
    a, b = build_caller_prompt(brief), build_caller_prompt(other)
    shared = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    assert "a few digits per breath" in a[:shared] and "expressed_step" in a[:shared]


def test_prompt_is_built_from_the_brief_only(dairy: tuple[LoadedAgent, Scenario]) -> None:
    _agent, scen = dairy
    p = build_caller_prompt(scen.brief)
    for secret in [
        "CC-ANAND-07",
        "SECRET-LIMIT-4417",
        "chk_log_reason",
        "crit_no_pressure",
        scen.criteria[0].statement,
        scen.goal,
        "log_zero_supply_reason",
        "lookup_farmer",
    ]:
        assert secret not in p


def test_schema_enumerates_step_ids(brief: Brief) -> None:
    s = caller_schema(brief)
    assert s["required"] == ["expressed_step", "speech", "done"]  # the step is decided before the words
    assert list(s["properties"]) == s["required"]
    assert s["properties"]["expressed_step"]["anyOf"][0]["enum"] == ["s1_greet", "s2_no_milk", "s3_reason"]
    assert s["additionalProperties"] is False


def test_valid_turns(brief: Brief) -> None:
    v = validate_turn(_turn("Yes, this is Meena.", "s1_greet"), brief, [])
    assert v.rejection is None and v.output is not None and v.output.expressed_step == "s1_greet"
    v = validate_turn(_turn("Sorry, what was that?"), brief, ["s1_greet"])
    assert v.output is not None and v.output.expressed_step is None
    v = validate_turn(_turn("Bye.", None, True), brief, ["s1_greet"])
    assert v.output is not None and v.output.done


@pytest.mark.parametrize(
    ("raw", "expressed", "code"),
    [
        ("Yes this is Meena", [], "invalid_json"),
        ('["Yes"]', [], "invalid_json"),
        ('{"speech": "Yes", "expressed_step": null, "done": "no"}', [], "invalid_json"),
        ('```json\n{"speech": "Yes", "expressed_step": null, "done": false}\n```', [], "invalid_json"),
        ("", [], "invalid_json"),
        (_turn("   "), [], "empty_speech"),
        (_turn("Hello", "s9_other"), [], "unknown_step"),
        (_turn("Zero today.", "s2_no_milk"), [], "step_out_of_order"),
        (_turn("Yes it's me.", "s1_greet"), ["s1_greet"], "step_repeated"),
    ],
)
def test_structural_rejections(brief: Brief, raw: str, expressed: list[str], code: str) -> None:
    v = validate_turn(raw, brief, expressed)
    assert v.output is None and v.rejection is not None and v.rejection.startswith(code + ":")


@pytest.mark.parametrize(
    ("speech", "code", "fragment"),
    [
        ("Okay, s2_no_milk then.", "leak", "plan step id 's2_no_milk'"),
        ("My farmer_id is F-2231.", "leak", "fact name 'farmer_id'"),
        ("That is in my known_facts.", "leak", "known_facts"),
        ("I will do the next plan step.", "leak", "plan step"),
        ("The trigger has not happened.", "leak", "trigger"),
        ("It says so in my brief.", "leak", "brief"),
        ("Sure, expressed step is none.", "leak", "expressed_step"),
        ('Yes. "speech": no', "leak", "a JSON key"),
        ("Caller: Yes this is Meena.", "meta_talk", "a speaker prefix"),
        ("Agent: how are you", "meta_talk", "a speaker prefix"),
        ("As an AI I cannot have cows.", "meta_talk", "self-reference as an AI"),
        ("This is a role-play, right?", "meta_talk", "talk about the simulation"),
        ("My instructions say to decline.", "meta_talk", "narrating instructions"),
        ("Hello, how may I help you today?", "meta_talk", "speaking as the agent"),
        ("(sighs) No milk today.", "meta_talk", "a stage direction"),
        ("No milk [pause] today.", "meta_talk", "a stage direction"),
        ("No **milk** today.", "markup", "markdown bold"),
        ("No *milk* today.", "markup", "markdown italics"),
        ("# No milk", "markup", "a markdown header"),
        ("Reasons:\n- the cow is sick", "markup", "a bullet"),
        ("Two things\n1. cow\n2. vet", "markup", "a numbered list"),
        ("No `milk` today.", "markup", "inline code"),
        ("See [here](http://x.y) please.", "markup", "a markdown link"),
        ("No <b>milk</b> today.", "markup", "an HTML tag"),
        ("No milk today. " * 41, "too_long", "614 characters; a caller's turn is at most 600"),
        ("दूध नहीं। " * 61, "too_long", "609 characters"),  # code points, not bytes or words
        ("\u095b" * 600, "too_long", "1200 characters"),  # excluded from composition: NFC splits it in two
    ],
)
def test_speech_rejections(brief: Brief, speech: str, code: str, fragment: str) -> None:
    v = validate_turn(_turn(speech), brief, [])
    assert v.output is None and v.rejection is not None
    assert v.rejection.startswith(code + ":"), v.rejection
    assert fragment in v.rejection


@pytest.mark.parametrize(
    "speech",
    [
        "I'll be brief, no milk today.",
        "Are there hidden charges for that?",
        "My farmer number is F 22 31.",
        "Four four seven, one nine two.",
        "नमस्ते, मैं मीना बोल रही हूँ।",
        "I followed the instructions on the vet's letter.",
        "One cow is unwell - the vet came.",
        "No milk today. " * 40,  # 599 characters once its end is trimmed: accepted
        "No milk today. " * 39 + "No milk today" + " " * 40,  # trailing spaces are not said
        "\u0928\u093c" * 600,  # 1,200 code points decomposed, 600 in NFC (U+0929)
    ],
)
def test_ordinary_speech_is_accepted(brief: Brief, speech: str) -> None:
    if not speech.isascii():  # a Hindi turn fits a Hindi call (in this en-IN one it is a language rejection)
        brief = brief.model_copy(update={"language": "hi-IN", "script": "Devanagari"})
    v = validate_turn(_turn(speech), brief, [])
    assert v.rejection is None, v.rejection


def test_plain_word_step_ids_are_not_treated_as_leaks(brief: Brief) -> None:
    plain = brief.model_copy(update={"plan": [brief.plan[0].model_copy(update={"id": "confirm"})]})
    assert not is_internal_id("confirm") and is_internal_id("give_estimate") and is_internal_id("step2")
    assert validate_turn(_turn("Yes, I confirm.", "confirm"), plain, []).rejection is None


def test_caller_schema_allows_only_the_next_open_step() -> None:
    from callbench.bundle.models import Brief

    brief = Brief.model_validate(
        {
            "context": "c",
            "reason": "r",
            "plan": [
                {"id": "a", "trigger": "t", "meaning": "m"},
                {"id": "b", "trigger": "t", "meaning": "m"},
            ],
            "language": "en-IN",
            "script": "Latin",
            "datetime": "2026-03-14T17:20:00+05:30",
        }
    )
    step = caller_schema(brief, [])["properties"]["expressed_step"]
    assert step["anyOf"][0]["enum"] == ["a"]
    assert caller_schema(brief, ["a"])["properties"]["expressed_step"]["anyOf"][0]["enum"] == ["b"]
    assert caller_schema(brief, ["a", "b"])["properties"]["expressed_step"]["type"] == "null"
    assert caller_schema(brief)["properties"]["expressed_step"]["anyOf"][0]["enum"] == ["a", "b"]
