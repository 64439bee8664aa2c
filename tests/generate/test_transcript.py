"""Reading a real call's transcript (callbench JSON/JSONL, OpenAI message lists), replacing its PII
with consistent placeholders, and drafting fixtures and action checks from its tool calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from callbench.bundle.models import ActionCheck, ToolFixtures
from callbench.generate.transcript import (
    REVIEW_MARK,
    TranscriptError,
    draft_fixtures,
    read_transcript,
    redact,
)

OPENAI = [
    {"role": "system", "content": "You are the parcel agent."},
    {"role": "assistant", "content": "Parcel helpline, how can I help?"},
    {"role": "user", "content": "Hi, I'm Imran Shaikh, my number is 98450 12345, mail imran.s@mail.com"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "find_shipment", "arguments": json.dumps({"phone": "9845012345"})}}]},
    {"role": "tool", "tool_call_id": "c1",
     "content": json.dumps({"awb": "776540918823", "name": "Imran Shaikh"})},
    {"role": "assistant", "content": "Found it, Mr Shaikh."},
    {"role": "user", "content": "Pay with card 4111 1111 1111 1111 please. Imran again: 98450 12345."},
]


def test_an_openai_message_list_is_read_with_tool_results_attached(tmp_path: Path) -> None:
    p = tmp_path / "call.json"
    p.write_text(json.dumps(OPENAI), encoding="utf-8")
    t = read_transcript(p)
    assert [x.role for x in t.turns] == ["agent", "caller", "agent", "agent", "caller"]
    [call] = t.tool_calls()
    assert call.name == "find_shipment" and call.arguments == {"phone": "9845012345"}
    assert call.result == {"awb": "776540918823", "name": "Imran Shaikh"}


def test_the_callbench_jsonl_shape_is_read(tmp_path: Path) -> None:
    rows = [{"role": "agent", "text": "Hello"},
            {"role": "caller", "text": "Where is my parcel?"},
            {"role": "agent", "text": "",
             "tool_calls": [{"id": "a", "name": "track", "arguments": {"awb": "1"}}]},
            {"role": "tool", "tool_call_id": "a", "result": {"status": "in transit"}}]
    p = tmp_path / "call.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    t = read_transcript(p)
    assert t.caller_lines() == ["Where is my parcel?"]
    assert t.tool_calls()[0].result == {"status": "in transit"}


def test_bad_input_is_a_located_error(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"role": "caller", "text": "hi"}\n{oops\n', encoding="utf-8")
    with pytest.raises(TranscriptError, match=r"x.jsonl:2: neither JSON nor JSONL"):
        read_transcript(p)
    p.write_text(json.dumps([{"role": "robot", "text": "x"}]), encoding="utf-8")
    with pytest.raises(TranscriptError, match=r"x.jsonl:0: unknown role 'robot'"):
        read_transcript(p)


def test_pii_is_replaced_consistently_everywhere(tmp_path: Path) -> None:
    p = tmp_path / "call.json"
    p.write_text(json.dumps({"messages": OPENAI}), encoding="utf-8")
    t, found = redact(read_transcript(p), names=["Imran Shaikh", "Shaikh"])
    text = json.dumps(t.model_dump(), ensure_ascii=False)
    for secret in ("Imran Shaikh", "Shaikh", "98450", "9845012345", "imran.s@mail.com", "4111"):
        assert secret not in text
    # the 12-digit parcel id looks like a phone number: replaced too (over-replacing is the safe side)
    assert found == {"phone": 2, "email": 1, "card": 1, "name": 2}
    caller = t.caller_lines()
    assert caller[0] == "Hi, I'm Person A, my number is 9000000001, mail person1@example.com"
    assert caller[1].startswith("Pay with card 4") and "9000000001" in caller[1]
    [call] = t.tool_calls()
    assert call.arguments == {"phone": "9000000001"}  # the same placeholder as in speech
    assert call.result == {"awb": "900000000002", "name": "Person A"}


def test_fixtures_and_review_marked_checks_validate_as_scenario_parts(tmp_path: Path) -> None:
    p = tmp_path / "call.json"
    p.write_text(json.dumps(OPENAI), encoding="utf-8")
    t, _ = redact(read_transcript(p), names=["Imran Shaikh"])
    fixtures, checks, unknown = draft_fixtures(t, {"find_shipment"})
    assert unknown == []
    fx = ToolFixtures.model_validate(fixtures["find_shipment"])
    assert fx.queue[0].response == {"awb": "900000000002", "name": "Person A"}
    [check] = [ActionCheck.model_validate(c) for c in checks]
    assert check.tool == "find_shipment" and check.description.startswith(REVIEW_MARK)
    assert draft_fixtures(t, set())[2] == ["find_shipment"]
