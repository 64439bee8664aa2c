"""Structured-output negotiation by behaviour, not wording, and the portable schema subset,
against the loopback Gemini-like fake (tests/fakes/gemini_like_server.py)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from callbench.models.base import (
    ChatMessage,
    InfrastructureError,
    ModelRequest,
    ModelSettings,
    RequestContext,
)
from callbench.models.faults import collect_faults
from callbench.models.remote.openai_client import OpenAIClient
from callbench.models.remote.retry import RetryPolicy
from callbench.models.remote.schemas import portable_schema
from fakes.gemini_like_server import GeminiLikeServer, gemini_problem

SCHEMA = {
    "type": "object",
    "properties": {
        "expressed_step": {"anyOf": [{"type": "string", "enum": ["ask"]}, {"type": "null"}]},
        "speech": {"type": "string"},
        "done": {"type": "boolean"},
    },
    "required": ["expressed_step", "speech", "done"],
    "additionalProperties": False,
}
ASK = [ChatMessage(role="system", content="You are a caller."), ChatMessage(role="user", content="Hello?")]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-0123456789")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def client(url: str, **settings: Any) -> OpenAIClient:
    async def no_sleep(_s: float) -> None:
        return None

    return OpenAIClient("openai:gemini-2.5-flash", ModelSettings(base_url=url, **settings),
                        retry_policy=RetryPolicy(max_attempts=3), rng=random.Random(0), sleep=no_sleep)


def caller_request(schema: dict[str, Any] = SCHEMA) -> ModelRequest:
    return ModelRequest(messages=ASK, response_schema=schema, response_schema_name="caller_turn",
                        context=RequestContext(role="caller"))


async def test_a_gemini_worded_400_steps_down_to_the_portable_schema_once() -> None:
    with GeminiLikeServer() as server:
        c = client(server.url)
        with collect_faults() as ledger:
            reply = await c.complete(caller_request())
            again = await c.complete(caller_request())
        await c.aclose()
        log = list(server.log)
    assert [status for _, status, _ in log] == [400, 200, 200]  # learnt once, remembered
    assert "response_format" not in log[0][2] and "additionalProperties" in log[0][2]
    assert json.loads(reply.content or "")["done"] is False and again.content
    assert c.capabilities.structured == "json_schema" and c.capabilities.portable
    assert "json_schema rejected" in c.capabilities.learnt[0] and "Unknown name" in c.capabilities.learnt[0]
    assert ledger.roles["caller"].faults == {"invalid_request": 1}


async def test_every_form_refused_fails_with_one_clear_line() -> None:
    class Refuses(GeminiLikeServer):
        def answer(self, body: dict[str, Any]) -> tuple[int, Any]:
            self.log.append(("caller", 400, "x"))
            return 400, [{"error": {"code": 400, "message": "Request contains an invalid argument.",
                                    "status": "INVALID_ARGUMENT"}}]

    with Refuses() as server:
        c = client(server.url)
        with pytest.raises(InfrastructureError) as info:
            await c.complete(caller_request())
        await c.aclose()
        sent = len(server.log)
    err = info.value
    # json_schema, its portable schema, json_object, the prompt only: four forms, each refused once
    assert sent == 4 and (err.kind, err.retryable, err.status) == ("invalid_request", False, 400)
    text = str(err)
    assert "\n" not in text and "Request contains an invalid argument." in text
    assert text.count("rejected (") == 3 and "using prompt" in text


def test_portable_schema_is_accepted_by_the_gemini_rules() -> None:
    from callbench.grade.prompts import response_schema

    judge = response_schema(["c1", "c2"], ["r1"], [1, 3, 8])
    for schema in (SCHEMA, judge, {"type": "object", "properties": {"n": {"type": ["integer", "null"]}}}):
        assert gemini_problem(schema, "s") is not None
        assert gemini_problem(portable_schema(schema), "s") is None
    out = portable_schema(SCHEMA)
    assert out["properties"]["expressed_step"] == {"type": "string", "enum": ["ask"], "nullable": True}
    assert "additionalProperties" not in out and out["required"] == SCHEMA["required"]
    inlined = portable_schema(judge)
    assert "$defs" not in inlined
    crit = inlined["properties"]["criteria"]["properties"]["c1"]
    assert crit["properties"]["label"]["enum"][0] == "met"
    # Gemini takes enums of strings only: the judge's few gappy indices become bounds (the reply
    # is still checked against the original schema and the trace)
    assert crit["properties"]["cited_messages"]["items"] == {"type": "integer", "minimum": 1, "maximum": 8}
    assert portable_schema({"enum": [1.5, True]}) == {"description": "One of: 1.5, true."}
    assert SCHEMA["additionalProperties"] is False  # the input is not modified
    with pytest.raises(ValueError, match="does not resolve"):
        portable_schema({"$ref": "#/$defs/missing"})
    with pytest.raises(ValueError, match="recursive"):
        portable_schema({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})


def test_portable_schemas_meet_the_documented_gemini_rules() -> None:
    from callbench.grade.prompts import response_schema
    from callbench.models.remote.rules import GEMINI, schema_problems

    judge = response_schema(["c1"], ["r1"], [1, 3, 8])
    for schema in (SCHEMA, judge):
        assert schema_problems(schema, GEMINI)  # the full schemas break Gemini's rules...
        assert schema_problems(portable_schema(schema), GEMINI) == []  # ...the portable ones do not
