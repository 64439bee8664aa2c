"""Calls written as text through the ``openai:`` adapter: every call of a reply
in order, and a call cut off by the token limit recorded as an output error, never speech."""

from __future__ import annotations

import json
import random

import pytest

from callbench.models.base import (
    ChatMessage,
    ModelOutputError,
    ModelRequest,
    ModelSettings,
    RequestContext,
    ToolSchema,
)
from callbench.models.faults import collect_faults
from callbench.models.remote.openai_client import OpenAIClient
from callbench.models.remote.retry import RetryPolicy

TOOLS = [ToolSchema(name=n, description=n, parameters={"type": "object", "properties": {}})
         for n in ("lookup_order", "end_call")]
REQUEST = ModelRequest(messages=[ChatMessage(role="user", content="Orders 1 and 2?")], tools=TOOLS,
                       context=RequestContext(role="candidate"))


def make(mk, rec, parse: bool = True) -> OpenAIClient:
    settings = ModelSettings(base_url="http://x.test/v1", parse_content_tool_calls=parse)
    return OpenAIClient("openai:m", settings, http_client=rec.client(),
                        retry_policy=RetryPolicy(max_attempts=2), rng=random.Random(0))


async def test_every_call_of_a_reply_in_order(keys, mk) -> None:
    text = ('Let me check both.\n{"name": "lookup_order", "arguments": {"order_id": "1"}}\n'
            '{"name": "lookup_order", "arguments": {"order_id": "2"}}')
    rec = mk.Recorder(mk.json_response(mk.openai_completion(text)))
    reply = await make(mk, rec).complete(REQUEST)
    assert reply.content == "Let me check both."
    assert [json.loads(c.arguments) for c in reply.tool_calls] == [{"order_id": "1"}, {"order_id": "2"}]


@pytest.mark.parametrize("parse", [True, False])
async def test_a_call_cut_off_by_the_token_limit_is_an_output_error(keys, mk, parse: bool) -> None:
    text = 'One moment.\n{"name": "lookup_order", "arguments": {"order_id": "1"}}\n{"name": "end_call", "argu'
    rec = mk.Recorder(mk.json_response(mk.openai_completion(text, finish="length")))
    with collect_faults() as ledger, pytest.raises(ModelOutputError) as info:
        await make(mk, rec, parse=parse).complete(REQUEST)
    err = info.value
    assert err.kind == "truncated_call" and err.raw == text
    assert str(err).startswith("truncated_call: openai:m wrote a tool call as text (end_call...)")
    assert "finish_reason length" in str(err)
    assert ledger.roles["candidate"].faults == {"truncated_call": 1}
    assert len(rec.requests) == 1  # an output error: not retried as a provider fault
