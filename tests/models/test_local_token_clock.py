"""The embedded model's answer timed token by token (``models/local/token_clock.py``), with a fake
llama instance that samples scripted tokens on a fake clock and calls its stopping criteria as
llama-cpp-python does (right after each sample, with the ids before that token). No model needed:
the same check against the real model is in tests/models/test_local_model.py."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from callbench.models.base import (
    ChatMessage,
    ModelOutputError,
    ModelRequest,
    ModelSettings,
    RequestContext,
    ToolSchema,
)
from callbench.models.local import client as local_client
from callbench.models.local.token_clock import TokenClock, speech_started

EOG = 0
STEP = 0.25  # seconds between two sampled tokens on the fake clock


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeLlama:
    """Samples ``pieces`` (one token each, then end of generation), advancing ``clock`` by
    :data:`STEP` before each sample. ``create_completion`` returns the non-streamed answer."""

    def __init__(self, pieces: list[str], clock: FakeClock) -> None:
        self.pieces = [p.encode() for p in pieces]
        self.clock = clock
        self._ctx = SimpleNamespace(ctx=None)
        self.calls: list[dict[str, Any]] = []

    def detokenize(self, ids: list[int], prev_tokens: Any = None, special: bool = False) -> bytes:
        return b"".join(self.pieces[i - 1] for i in ids if i != EOG)

    def create_completion(self, prompt: list[int], **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        stop = kwargs.get("stopping_criteria")
        ids = list(prompt)
        out: list[int] = []
        for token in [*range(1, len(self.pieces) + 1), EOG]:
            self.clock.now += STEP
            if stop is not None and stop(ids, None):
                break
            if token == EOG:
                break
            out.append(token)
            ids.append(token)
        text = self.detokenize(out).decode()
        return {"choices": [{"text": text, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(out)}}


PROMPT = [7] * 5


def test_speech_started() -> None:
    assert not speech_started('{"speech": "')
    assert not speech_started('{"speech": "  \\n')
    assert not speech_started('{"speech": null, "tool_calls": [{"name": "x"')
    assert speech_started('{"speech": "  H')
    assert speech_started('{ "speech" : "\\u0915')
    assert speech_started('{"speech":"नम')


@pytest.mark.parametrize(
    ("pieces", "first_speech_token"),
    [
        (['{"', 'speech', '":', ' "', ' ', 'Hello', ' there', '",', ' "tool_calls": []}'], 5),  # speech only
        (['{"speech": null,', ' "tool_calls": [{"name": "look", "arguments": {}}]}'], None),  # tools only
        (['{"speech": "', 'नम', 'स्ते', '", "tool_calls": [{"name": "look", "arguments": {}}]}'], 1),  # both
    ],
)
def test_token_times_of_each_answer_shape(pieces: list[str], first_speech_token: int | None) -> None:
    clock = FakeClock()
    llm = FakeLlama(pieces, clock)
    tc = TokenClock(len(PROMPT), llm.detokenize, speech=True, clock=clock)
    origin = clock.now
    out = llm.create_completion(PROMPT, stopping_criteria=tc)
    timing = tc.timing(origin, clock.now)
    assert out["choices"][0]["text"] == "".join(pieces)
    assert len(tc.sampled) == len(pieces) + 1  # every token and the end of generation
    (attempt,) = timing.attempts
    assert timing.streamed and attempt.first_token_s == pytest.approx(STEP)
    if first_speech_token is None:
        assert attempt.first_speech_s is None
    else:
        assert attempt.first_speech_s == pytest.approx(STEP * (first_speech_token + 1))
    assert attempt.finished_s == pytest.approx(STEP * (len(pieces) + 1))


TOOLS = [ToolSchema(name="look", description="Look.", parameters={"type": "object", "properties": {}})]
ANSWERS = [
    '{"speech": "Hello there", "tool_calls": []}',
    '{"speech": null, "tool_calls": [{"name": "look", "arguments": {}}]}',
    '{"speech": "One moment.", "tool_calls": [{"name": "look", "arguments": {}}, '
    '{"name": "look", "arguments": {"a": 1}}]}',
    '{"speech": "I will call look with {\\"a\\": 1}", "tool_calls": []}',  # calls in text stay text
    '{"speech": "I cannot help with that.", "tool_calls": []}',  # a refusal
]


def _pieces(text: str) -> list[str]:
    return [text[i:i + 4] for i in range(0, len(text), 4)]


def _client(monkeypatch: pytest.MonkeyPatch, llm: FakeLlama, stream: str) -> local_client.LocalClient:
    perf = SimpleNamespace(t_eval_ms=1000.0, t_p_eval_ms=100.0, n_p_eval=len(PROMPT), n_eval=3)
    lib = SimpleNamespace(llama_perf_context_reset=lambda ctx: None, llama_perf_context=lambda ctx: perf)
    tok = SimpleNamespace(tokenize=lambda b, add_bos, special: list(PROMPT), metadata={})
    monkeypatch.setattr(local_client, "_llama", lambda: lib)
    monkeypatch.setattr(local_client, "_tokenizer", lambda path: tok)
    monkeypatch.setattr(local_client, "render_prompt", lambda tok, messages: "prompt")
    monkeypatch.setattr(local_client, "grammar_schema", lambda request: {"type": "object"})
    monkeypatch.setattr(local_client, "_converts", lambda schema: True)
    monkeypatch.setattr(local_client, "_parsable_grammar", lambda llm, schemas: None)
    engine = local_client._Engine(llm=llm, n_ctx=10**6)
    monkeypatch.setattr(local_client, "_engine", lambda path, role: engine)
    monkeypatch.setattr(local_client, "prefill", lambda *a, **k: 0)
    monkeypatch.setattr(local_client, "note_native", lambda text: None)
    settings = ModelSettings.model_validate({"temperature": 0.0, "seed": 1, "stream": stream})
    return local_client.LocalClient("local:fake", settings, model_path=Path("fake.gguf"), model_name="fake",
                                    embedded=False)


def _request(role: str = "candidate", schema: dict[str, Any] | None = None) -> ModelRequest:
    return ModelRequest(messages=[ChatMessage(role="system", content="Be brief."),
                                  ChatMessage(role="user", content="Hello?")],
                        tools=[] if schema else TOOLS, response_schema=schema,
                        context=RequestContext(role=role, episode_id="e", turn=1))  # fmt: skip


@pytest.mark.parametrize("answer", ANSWERS)
def test_timed_answer_equals_the_untimed_one(monkeypatch: pytest.MonkeyPatch, answer: str) -> None:
    clock = FakeClock()
    monkeypatch.setattr(local_client.time, "perf_counter", clock)
    responses = {}
    for stream in ("on", "off"):
        llm = FakeLlama(_pieces(answer), clock)
        responses[stream] = _client(monkeypatch, llm, stream)._complete_sync(_request())
        assert ("stopping_criteria" in llm.calls[0]) is (stream == "on")
    timed, plain = responses["on"], responses["off"]
    assert timed.model_dump(exclude={"timing", "usage"}) == plain.model_dump(exclude={"timing", "usage"})
    assert timed.usage.output_tokens == plain.usage.output_tokens == len(_pieces(answer))
    assert timed.timing is not None and plain.timing is not None
    assert timed.timing.streamed and not plain.timing.streamed
    steps = len(_pieces(answer)) + 1
    assert timed.timing.waited_s == pytest.approx(STEP * steps) == plain.timing.waited_s
    assert timed.timing.first_token_s == pytest.approx(STEP)
    assert plain.timing.first_token_s == plain.timing.waited_s and plain.timing.first_speech_s is None
    speech = json.loads(answer)["speech"]
    first_speech = timed.timing.first_speech_s
    if speech is None:
        assert first_speech is None
    else:  # the 4-character piece holding the speech's first character ('{"sp', 'eech', '": "', 'H...')
        k = next(i for i, p in enumerate(_pieces(answer)) if speech_started("".join(_pieces(answer)[:i + 1])))
        assert first_speech is not None and first_speech < timed.timing.waited_s
        assert first_speech == pytest.approx(STEP * (k + 1))


def test_json_roles_are_not_timed_by_default_and_errors_keep_timing(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(local_client.time, "perf_counter", clock)
    schema = {"type": "object", "properties": {"done": {"type": "boolean"}}, "required": ["done"]}
    llm = FakeLlama(_pieces('{"done": true}'), clock)
    caller = _client(monkeypatch, llm, "auto")._complete_sync(_request("caller", schema))
    assert caller.content == '{"done": true}' and caller.timing is not None and not caller.timing.streamed
    assert "stopping_criteria" not in llm.calls[0]
    bad = FakeLlama(_pieces('{"speech": "cut off'), clock)
    with pytest.raises(ModelOutputError) as info:
        _client(monkeypatch, bad, "auto")._complete_sync(_request())
    assert info.value.timing is not None and info.value.timing.streamed
    assert info.value.timing.first_speech_s == pytest.approx(STEP * 4)  # '{"sp', 'eech', '": "', 'cut '
