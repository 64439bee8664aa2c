"""``callbench import transcript``: a real call (in each supported shape) drafted into an unreviewed
scenario through the generator's repair loop, its PII replaced before any model request or write;
the draft validates and ``callbench review`` lists it as awaiting review."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from callbench.bundle.provenance import load_provenance
from callbench.bundle.validate.audits import validate_path
from callbench.generate.manifest import load_manifest
from callbench.generate.transcript import REVIEW_MARK, read_transcript, redact
from callbench.generate.transcript_import import ImportOptions, import_transcript
from callbench.models.base import ModelRequest, ModelResponse
from callbench.models.scripted.generator import ScriptedGenerator

from .conftest import AGENT, DATA, invoke

NAME, PHONE, EMAIL, CARD = "Kavita Rane", "4417093562", "kavita.rane@mail.com", "4111 1111 1111 1111"
CALLS = [  # (id, tool, arguments, result) in call order
    ("c1", "verify_consumer", {"consumer_number": PHONE, "mobile_last4": "8321"},
     {"verified": True, "attempts_remaining": 1}),
    ("c2", "log_complaint", {"consumer_number": PHONE, "category": "no_water",
                             "description": "No water since Monday morning."},
     {"status": "logged", "complaint_number": "502118734"}),
    ("c3", "end_call", {"reason": "resolved"}, {"status": "ended"}),
]
SPOKEN = [  # (who, text, ids of the calls the agent makes after saying it)
    ("agent", "Jal Seva water helpline, this is Asha. How can I help?", []),
    ("caller", f"Hi, I'm {NAME}. No water in my flat since Monday morning.", []),
    ("agent", "May I have your consumer number and the last four digits of your mobile?", []),
    ("caller", f"It is {PHONE[:5]} {PHONE[5:]}, mobile ends 8321, mail me at {EMAIL}. Card {CARD} if needed.",
     []),
    ("agent", "Thank you, let me check.", ["c1", "c2"]),
    ("agent", "Logged; your complaint number is five zero two, one one eight, seven three four. "
     "Anything else?", []),
    ("caller", "No, that is all. Thanks.", []),
    ("agent", "Goodbye.", ["c3"]),
]
BY_ID = {c[0]: c for c in CALLS}


def callbench_jsonl() -> str:
    rows: list[dict[str, Any]] = []
    for who, text, ids in SPOKEN:
        rows.append({"role": who, "text": text,
                     "tool_calls": [{"id": i, "name": BY_ID[i][1], "arguments": BY_ID[i][2]} for i in ids]})
        rows += [{"role": "tool", "tool_call_id": i, "result": BY_ID[i][3]} for i in ids]
    return "\n".join(json.dumps(r) for r in rows)


def openai_list() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{"role": "system", "content": "You are Asha."}]
    for who, text, ids in SPOKEN:
        rows.append({"role": "assistant" if who == "agent" else "user", "content": text})
        if ids:
            rows.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": i, "type": "function",
                 "function": {"name": BY_ID[i][1], "arguments": json.dumps(BY_ID[i][2])}} for i in ids]})
            rows += [{"role": "tool", "tool_call_id": i, "content": json.dumps(BY_ID[i][3])} for i in ids]
    return rows


def vapi_call() -> dict[str, Any]:
    """A Vapi call object as GET /call/{id} returns it (docs.vapi.ai/api-reference/calls/get-call):
    artifact.messages with roles system, bot, user, tool_calls and tool_call_result."""
    msgs: list[dict[str, Any]] = [{"role": "system", "message": "You are Asha.", "time": 0,
                                   "secondsFromStart": 0}]
    for k, (who, text, ids) in enumerate(SPOKEN):
        msgs.append({"role": "bot" if who == "agent" else "user", "message": text, "time": 1000 + k,
                     "endTime": 1001 + k, "secondsFromStart": k, "duration": 1})
        if ids:
            msgs.append({"role": "tool_calls", "message": "", "time": 1000 + k, "secondsFromStart": k,
                         "toolCalls": [{"id": i, "type": "function", "function": {
                             "name": BY_ID[i][1], "arguments": json.dumps(BY_ID[i][2])}} for i in ids]})
            msgs += [{"role": "tool_call_result", "toolCallId": i, "name": BY_ID[i][1],
                      "result": json.dumps(BY_ID[i][3]), "time": 1000 + k, "secondsFromStart": k}
                     for i in ids]
    return {"id": "call-1", "type": "inboundPhoneCall", "status": "ended", "transcript": "(flat text)",
            "customer": {"number": "+91" + PHONE}, "artifact": {"messages": msgs}}


def retell_call() -> dict[str, Any]:
    """A Retell call object as GET /v2/get-call/{call_id} returns it
    (docs.retellai.com/api-references/get-call): transcript_with_tool_calls."""
    items: list[dict[str, Any]] = []
    for who, text, ids in SPOKEN:
        items.append({"role": who if who == "agent" else "user", "content": text, "words": []})
        for i in ids:
            items.append({"role": "tool_call_invocation", "tool_call_id": i, "name": BY_ID[i][1],
                          "arguments": json.dumps(BY_ID[i][2])})
            items.append({"role": "tool_call_result", "tool_call_id": i, "content": json.dumps(BY_ID[i][3])})
    items.insert(1, {"role": "node_transition", "former_node_id": "a", "new_node_id": "b"})
    return {"call_id": "c-1", "call_type": "phone_call", "agent_id": "ag", "call_status": "ended",
            "transcript": "(flat text)", "transcript_with_tool_calls": items}


SHAPES = {"callbench": ("call.jsonl", callbench_jsonl),
          "openai": ("call.json", lambda: json.dumps(openai_list())),
          "vapi": ("vapi.json", lambda: json.dumps(vapi_call())),
          "retell": ("retell.json", lambda: json.dumps(retell_call()))}


def write_call(tmp: Path, shape: str) -> Path:
    name, make = SHAPES[shape]
    path = tmp / name
    path.write_text(make(), encoding="utf-8")
    return path


def answer_script(tmp: Path, call_file: Path) -> Path:
    """A scripted generator answering with the water scenario rewritten for this call: the brief
    and reference path on the placeholders (what a model that saw only the replaced call writes)."""
    t, _ = redact(read_transcript(call_file), [NAME])
    [verify, log, end] = t.tool_calls()
    phone = verify.arguments["consumer_number"]
    data = yaml.safe_load((DATA / "water_no_supply_tanker.yaml").read_text(encoding="utf-8"))
    data.update(id="water_recorded_no_water", title="Recorded call: no water since Monday",
                goal="The agent verifies the caller, logs a no_water complaint, reads the complaint number "
                "in groups of three digits and ends the call with end_call.",
                fixtures={}, caller_known={"consumer_number": "printed on the water bill"})
    data.pop("hidden_state")
    # the model judges the drafted checks: the logged complaint is what the caller called for
    data["action_checks"] = [{"id": "call_2_log_complaint", "tool": "log_complaint", "critical": True,
                              "diagnostic": "outcome_reached", "importance": 3,
                              "after": ["call_1_verify_consumer"],
                              "description": "the model's own words, replaced by the draft's"}]
    data["criteria"] = [c for c in data["criteria"] if c["id"] != "no_invented_time"]
    b = data["brief"]
    b["context"] = "You are Person A. The taps in your flat have been dry since Monday morning."
    b["reason"] = "You want the supply fixed."
    b["known_facts"] = {"name": "Person A", "consumer_number": phone, "mobile_last4": "8321",
                        "since": "Monday morning"}
    b["unknown_facts"] = ["when the supply will be restored"]
    b["plan"] = [
        {"id": "state_problem", "trigger": "The agent greets you and asks how it can help.",
         "meaning": "There has been no water in my flat since Monday morning."},
        {"id": "give_ids", "trigger": "The agent asks for your consumer number or mobile number.",
         "meaning": f"My consumer number is {phone} and the mobile ends in 8321."},
        {"id": "nothing_else",
         "trigger": "The agent gives a complaint number or asks if there is anything else.",
         "meaning": "No, that is all, thank you."}]
    number = " ".join(str(log.result["complaint_number"])[k:k + 3] for k in range(0, 9, 3))
    data["reference_path"] = [
        {"speech": "Hello, this is Asha from the Jal Seva water helpline. How can I help you?"},
        {"speech": "I am sorry. May I have your consumer number and the last four digits of your mobile?"},
        {"before_tools": "Thank you, let me check.",
         "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in (verify, log)],
         "speech": f"Your no-water complaint is logged; the number is {number}. Is there anything else?"},
        {"before_tools": "Thank you for calling, goodbye.",
         "tool_calls": [{"name": end.name, "arguments": end.arguments}]}]
    (tmp / "answer.json").write_text(json.dumps(data), encoding="utf-8")
    script = tmp / "script.yaml"
    script.write_text("items:\n  - [answer.json]\n", encoding="utf-8")
    return script


class Recording(ScriptedGenerator):
    """The scripted generator, keeping every request it is sent."""

    def __init__(self, script: Path) -> None:
        super().__init__(f"scripted:generator:{script}", None, script)
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return await super().complete(request)


@pytest.mark.parametrize("shape", ["callbench", "openai", "vapi", "retell"])
def test_a_call_in_each_shape_becomes_a_draft_that_validates_with_its_pii_replaced(
    shape: str, agent_bundle: Path, tmp_path: Path
) -> None:
    call = write_call(tmp_path, shape)
    model = Recording(answer_script(tmp_path, call))
    out = asyncio.run(import_transcript(agent_bundle, model, ImportOptions(path=call, agent=AGENT,
                                                                         pii_names=[NAME])))
    assert out.failed is None and out.scenario_id == "water_recorded_no_water"
    assert out.replaced == {"phone": 2, "email": 1, "card": 1, "name": 1}  # 2: consumer and complaint no.
    sent = "\n".join(m.content or "" for r in model.requests for m in r.messages)
    assert "Person A" in sent and "person1@example.com" in sent
    for original in (NAME, "Kavita", PHONE, "44170 93562", EMAIL, CARD, CARD.replace(" ", ""), "502118734"):
        assert original not in sent
    written = "\n".join(p.read_text(encoding="utf-8") for p in agent_bundle.rglob("*.yaml"))
    for original in (NAME, PHONE, EMAIL, CARD.replace(" ", ""), "502118734"):
        assert original not in written
    bundle, problems = validate_path(agent_bundle)
    assert problems == [] and bundle is not None
    [scen] = [s for _, s in bundle.scenarios()]
    # end_call is call-ending: its fixture is drafted, a check on it would be met by hanging up
    assert [c.tool for c in scen.action_checks] == ["verify_consumer", "log_complaint"]
    assert scen.fixtures["end_call"].queue[0].response == {"status": "ended"}
    assert all(c.description.startswith(REVIEW_MARK) for c in scen.action_checks)
    assert [(c.is_critical, c.importance, c.after) for c in scen.action_checks] == [
        (False, 2, []), (True, 3, ["call_1_verify_consumer"])]
    matcher = scen.fixtures["verify_consumer"].queue[0].args["consumer_number"]
    assert matcher.model_dump()["eq"] == "9000000001"


def test_the_command_writes_an_unreviewed_draft_that_review_lists(agent_bundle: Path, tmp_path: Path) -> None:
    call = write_call(tmp_path, "openai")
    script = answer_script(tmp_path, call)
    code, out, err = invoke("import", "transcript", str(call), "--agent", AGENT, "--bundle",
                            str(agent_bundle), "--model", f"scripted:generator:{script}", "--pii-name", NAME,
                            "--id", "water_from_real_call")
    assert code == 0, out + err
    assert "1 email(s)" in out and "wrote agents/water_helpline/scenarios/water_from_real_call.yaml" in out
    code, out, err = invoke("validate", str(agent_bundle))
    assert code == 0, out + err
    prov = load_provenance(agent_bundle, [])
    assert prov is not None
    entry = prov.scenarios["water_from_real_call"]
    assert (entry.made, entry.review.status) == ("generated", "unreviewed")
    assert entry.authors[0].startswith("callbench import transcript")
    rec = load_manifest(agent_bundle).scenarios["water_from_real_call"]
    assert rec.batch.startswith("t-") and rec.review.status == "unreviewed"
    code, out, err = invoke("review", str(agent_bundle), "--agent", AGENT)
    assert code == 0, out + err
    assert "[unreviewed]" in out and "water_from_real_call" in out and REVIEW_MARK in out
    # the same call again is refused, not drafted twice
    code, out, err = invoke("import", "transcript", str(call), "--agent", AGENT, "--bundle",
                            str(agent_bundle), "--model", f"scripted:generator:{script}", "--pii-name", NAME)
    assert code == 2 and "already imported as water_from_real_call" in err


def test_an_unreadable_transcript_is_a_located_error(agent_bundle: Path, tmp_path: Path) -> None:
    bad = tmp_path / "vapi.json"
    rows = [{"role": "bot", "message": "hi"}, {"role": "robot", "message": "?"}]
    bad.write_text(json.dumps({"artifact": {"messages": rows}}), encoding="utf-8")
    script = answer_script(tmp_path, write_call(tmp_path, "openai"))
    code, _, err = invoke("import", "transcript", str(bad), "--agent", AGENT, "--bundle", str(agent_bundle),
                          "--model", f"scripted:generator:{script}")
    assert code == 2 and "vapi.json:artifact.messages:1: unknown role 'robot'" in err
