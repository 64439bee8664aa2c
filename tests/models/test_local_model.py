"""The embedded model for real (skipped unless llama-cpp-python and the 0.5B weights are installed;
with ``CALLBENCH_REQUIRE_LOCAL=1``, as in CI's ``[local]`` job, their absence fails instead)."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from callbench.models.base import (
    ChatMessage,
    InfrastructureError,
    ModelRequest,
    ModelSettings,
    RequestContext,
    ToolSchema,
)
from callbench.models.local.client import release_engines
from callbench.models.local.weights import VARIANTS, find_parts
from callbench.models.registry import create_client

_MISSING = (
    "llama-cpp-python is not installed"
    if importlib.util.find_spec("llama_cpp") is None
    else "the 0.5B weights (callbench[local]) are not installed"
    if find_parts(VARIANTS["0.5b"]) is None
    else ""
)
if _MISSING and os.environ.get("CALLBENCH_REQUIRE_LOCAL") == "1":
    pytest.fail(f"CALLBENCH_REQUIRE_LOCAL=1 but {_MISSING}", pytrace=False)
if _MISSING:
    pytest.skip(_MISSING, allow_module_level=True)

TOOLS = [
    ToolSchema(
        name="lookup_account",
        description="Look up a bank account by its 8-digit number.",
        parameters={
            "type": "object",
            "properties": {"account_number": {"type": "string"}},
            "required": ["account_number"],
        },
    ),
    ToolSchema(
        name="end_call",
        description="Hang up.",
        parameters={"type": "object", "properties": {"status": {"enum": ["ended"]}}, "required": ["status"]},
    ),
]
SYSTEM = "You are the phone agent of Acme Bank. Look up the caller's account before answering. Be brief."


@pytest.fixture(scope="module")
def client():
    c = create_client("local:0.5b", ModelSettings(temperature=0.0, seed=3, max_tokens=120))
    yield c
    release_engines()


async def test_candidate_turns_parse_and_reuse_prefix(client):
    assert client.embedded_smoke_test_model is True
    msgs = [
        ChatMessage(role="system", content=SYSTEM),
        ChatMessage(role="assistant", content="Acme Bank, hello."),
        ChatMessage(role="user", content="My account number is 12345678. What is my balance?"),
    ]
    first = await client.complete(
        ModelRequest(
            messages=msgs, tools=TOOLS, context=RequestContext(role="candidate", episode_id="t", turn=1)
        )
    )
    assert first.content is not None or first.tool_calls
    assert {c.name for c in first.tool_calls} <= {"lookup_account", "end_call"}
    for call in first.tool_calls:
        assert isinstance(json.loads(call.arguments), dict)
    assert first.usage.input_tokens > 100 and first.usage.output_tokens > 0
    assert first.usage.tokens_per_second and first.usage.tokens_per_second > 0
    assert first.usage.cost_usd == 0.0
    msgs.append(ChatMessage(role="assistant", content=first.content, tool_calls=first.tool_calls))
    msgs += [
        ChatMessage(role="tool", tool_call_id=c.id, content='{"balance": "120 dollars"}')
        for c in first.tool_calls
    ]
    msgs.append(ChatMessage(role="user", content="Thanks."))
    second = await client.complete(
        ModelRequest(
            messages=msgs, tools=TOOLS, context=RequestContext(role="candidate", episode_id="t", turn=2)
        )
    )
    # the system prompt and earlier turns were evaluated once and reused from the KV cache
    assert second.usage.cached_input_tokens >= first.usage.input_tokens - 8


async def test_json_role_output_matches_schema(client):
    schema = {
        "type": "object",
        "properties": {"speech": {"type": "string"}, "done": {"type": "boolean"}},
        "required": ["speech", "done"],
        "additionalProperties": False,
    }
    msgs = [
        ChatMessage(
            role="system", content="You are a caller who wants to know a bank balance. Reply briefly."
        ),
        ChatMessage(role="user", content="Acme Bank, how can I help?"),
    ]
    response = await client.complete(
        ModelRequest(
            messages=msgs, response_schema=schema, context=RequestContext(role="caller", episode_id="t")
        )
    )
    value = json.loads(response.content or "")
    assert set(value) == {"speech", "done"} and isinstance(value["done"], bool)


async def test_timed_candidate_answer_equals_the_untimed_one() -> None:
    """The candidate's answer timed token by token (``stream`` on) is the answer of the same
    request untimed (``stream`` off), for speech, tool calls and JSON roles; the timed one has its
    first token and first word of speech inside the request."""
    from callbench.models.local.token_clock import speech_started

    msgs = [ChatMessage(role="system", content=SYSTEM),
            ChatMessage(role="user", content="My account number is 12345678. What is my balance?")]
    speak = [ChatMessage(role="system", content="You are a friendly receptionist. Answer in one sentence."),
             ChatMessage(role="user", content="Hello, are you open on Sunday?")]
    schema = {"type": "object", "properties": {"speech": {"type": "string"}, "done": {"type": "boolean"}},
              "required": ["speech", "done"], "additionalProperties": False}
    def ctx(role: str, turn: int = 0) -> RequestContext:
        return RequestContext(role=role, episode_id="s", turn=turn)

    requests = [
        ModelRequest(messages=msgs, tools=TOOLS, context=ctx("candidate", 1)),
        ModelRequest(messages=speak, tools=TOOLS, context=ctx("candidate", 2)),
        ModelRequest(messages=speak, response_schema=schema, context=ctx("caller")),
    ]
    answers = {}
    for stream in ("on", "off"):
        c = create_client("local:0.5b", ModelSettings.model_validate(
            {"temperature": 0.0, "seed": 3, "max_tokens": 120, "stream": stream}))
        answers[stream] = [await c.complete(r) for r in requests]
        release_engines()
    for timed, plain in zip(answers["on"], answers["off"], strict=True):
        assert (timed.content, timed.tool_calls, timed.finish_reason) == (
            plain.content, plain.tool_calls, plain.finish_reason)
        assert timed.usage.output_tokens == plain.usage.output_tokens
        assert timed.timing is not None and plain.timing is not None
        assert timed.timing.streamed and not plain.timing.streamed
        assert 0 < timed.timing.first_token_s < timed.timing.waited_s
        assert plain.timing.first_token_s == plain.timing.waited_s
    spoken = answers["on"][1]
    assert spoken.content and spoken.timing is not None and spoken.timing.first_speech_s is not None
    assert spoken.timing.first_token_s <= spoken.timing.first_speech_s < spoken.timing.waited_s
    assert speech_started('{"speech": "' + spoken.content)
    for r in answers["on"]:
        if not (r.content and r.content.strip()) and r.timing is not None:
            assert r.timing.first_speech_s is None


async def test_prompt_over_context_is_infrastructure():
    small = create_client("local:0.5b", ModelSettings(n_ctx=256, max_tokens=64))
    msgs = [ChatMessage(role="system", content="word " * 400), ChatMessage(role="user", content="hi")]
    with pytest.raises(InfrastructureError, match="exceeds the context of 256 tokens") as info:
        await small.complete(ModelRequest(messages=msgs, context=RequestContext(role="task_judge")))
    assert info.value.retryable is False


async def test_concurrent_roles_leave_stdout_working() -> None:
    """Regression: two roles constructing llama instances at once (the two judges grade
    concurrently) left the process's stdout on /dev/null, so the demo printed no report."""
    import asyncio
    import os
    import sys

    release_engines()
    before_obj, before_fd = sys.stdout, os.fstat(1)
    client = create_client("local:0.5b", ModelSettings(max_tokens=8, temperature=0.0))
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}

    def request(role: str) -> ModelRequest:
        return ModelRequest(
            messages=[ChatMessage(role="user", content="Say ok.")],
            response_schema=schema,
            context=RequestContext(role=role),  # type: ignore[arg-type]
        )

    replies = await asyncio.gather(
        client.complete(request("task_judge")), client.complete(request("conversation_judge"))
    )
    assert all(json.loads(r.content or "{}").get("ok") in (True, False) for r in replies)
    assert sys.stdout is before_obj
    after_fd = os.fstat(1)
    assert (after_fd.st_dev, after_fd.st_ino) == (before_fd.st_dev, before_fd.st_ino)
    release_engines()


async def test_computations_of_different_roles_take_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: a judge grading one episode ran at the same time as the next episode's candidate;
    both used every core and each ran at well under half speed. Computations now take turns."""
    import asyncio
    import threading

    import llama_cpp

    active, peak = 0, 0
    guard = threading.Lock()
    original = llama_cpp.Llama.create_completion

    def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal active, peak
        with guard:
            active += 1
            peak = max(peak, active)
        try:
            return original(self, *args, **kwargs)
        finally:
            with guard:
                active -= 1

    monkeypatch.setattr(llama_cpp.Llama, "create_completion", counted)
    client = create_client("local:0.5b", ModelSettings(max_tokens=8, temperature=0.0))
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    requests = [
        ModelRequest(
            messages=[ChatMessage(role="user", content="Say ok.")],
            response_schema=schema,
            context=RequestContext(role=role),  # type: ignore[arg-type]
        )
        for role in ("task_judge", "conversation_judge", "caller")
    ]
    replies = await asyncio.gather(*(client.complete(r) for r in requests))
    assert len(replies) == 3 and peak == 1
    release_engines()


async def test_requantized_copy_loads_and_answers(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from callbench.models.local.requantize import ensure_requantized

    monkeypatch.setenv("CALLBENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr("callbench.models.local.weights.cache_root", lambda: tmp_path)
    path = ensure_requantized("0.5b", "q4_0")
    source_size = 491_400_064
    assert path.name.endswith("-q4_0.gguf") and 0 < path.stat().st_size < source_size
    client = create_client("local:0.5b-q4_0", ModelSettings(max_tokens=8, temperature=0.0))
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    reply = await client.complete(
        ModelRequest(
            messages=[ChatMessage(role="user", content="Say ok.")],
            response_schema=schema,
            context=RequestContext(role="task_judge"),
        )
    )
    assert json.loads(reply.content or "{}")["ok"] in (True, False)
    release_engines()


async def test_plain_and_json_generation_with_extra_buffer_types_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """The configuration used on AMX CPUs (extra buffer types off), run here on any CPU: the model
    loads with the flag cleared and answers both unconstrained and JSON-constrained requests."""
    from callbench.models.local import client as local_client
    from callbench.models.local.safeguards import extra_bufts_enabled

    release_engines()
    monkeypatch.setattr(local_client, "_EXTRA_BUFTS", [False])
    c = create_client("local:0.5b", ModelSettings(max_tokens=24, temperature=0.0, seed=1))
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    reply = await c.complete(
        ModelRequest(
            messages=[ChatMessage(role="user", content="Name the capital of France as JSON.")],
            response_schema=schema,
            context=RequestContext(role="task_judge"),
        )
    )
    assert isinstance(json.loads(reply.content or "")["city"], str)
    engine = local_client._ENGINES[(str(c.model_path), "task_judge")]
    assert engine.llm.model_params.use_extra_bufts is False
    plain = engine.llm.create_completion("The capital of France is", max_tokens=8, temperature=0.0)
    assert plain["choices"][0]["text"].strip() != ""
    assert plain["usage"]["completion_tokens"] > 0
    release_engines()
    # the automatic choice is what a default construction gets
    monkeypatch.setattr(local_client, "_EXTRA_BUFTS", [])
    c = create_client("local:0.5b", ModelSettings(max_tokens=8, temperature=0.0))
    await c.complete(
        ModelRequest(
            messages=[ChatMessage(role="user", content="Say ok.")],
            response_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}},
            context=RequestContext(role="caller"),
        )
    )
    engine = local_client._ENGINES[(str(c.model_path), "caller")]
    assert engine.llm.model_params.use_extra_bufts is extra_bufts_enabled()
    release_engines()


async def test_a_long_prompt_is_read_with_progress_and_the_same_answer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a long prompt reports tokens read of how many, and the prompt read
    in chunks gives the same answer and the same cache accounting as one read by generation."""
    import callbench.models.local.client as local_client
    from callbench.models import activity

    rules = " ".join(f"Rule {i}: check the account number twice before any answer." for i in range(60))
    msgs = [ChatMessage(role="system", content=rules), ChatMessage(role="user", content="Say hello.")]

    async def ask(role: str) -> tuple[str | None, int, list[activity.Activity | None]]:
        c = create_client("local:0.5b", ModelSettings(temperature=0.7, seed=5, max_tokens=30))
        seen: list[activity.Activity | None] = []
        with activity.listening(seen.append):
            ctx = RequestContext(role=role, episode_id="p")
            r = await c.complete(ModelRequest(messages=msgs, context=ctx))
        return r.content, r.usage.cached_input_tokens, seen

    chunked, cached, seen = await ask("task_judge")
    reads = [a for a in seen if a is not None and a.total]
    assert len(reads) >= 3 and reads[-1].done == reads[-1].total - 1 > 600
    assert "reading the task_judge prompt" in reads[-1].what and seen[-1] is None
    monkeypatch.setattr(local_client, "PREFILL_MIN", 10**9)
    whole, cached_whole, seen_whole = await ask("conversation_judge")
    assert not [a for a in seen_whole if a is not None and a.total]
    assert chunked == whole and cached == cached_whole == 0
    release_engines()
