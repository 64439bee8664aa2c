"""The lean request path: schemas cleaned and validators compiled once, the
openai body sent without the SDK's per-request transform, answers read without building models."""

from __future__ import annotations

import importlib
import random

import httpx2
import openai
import openai.resources.chat.completions.completions as sdk_completions
import pytest

from callbench.models.base import ChatMessage, ModelRequest, ModelSettings, RequestContext, ToolSchema
from callbench.models.output import check_json_output
from callbench.models.remote import prepared
from callbench.models.remote.anthropic_client import AnthropicClient
from callbench.models.remote.openai_client import OpenAIClient
from callbench.models.remote.retry import RetryPolicy
from callbench.models.remote.schemas import clean_schema, clean_tool_parameters

CTX = RequestContext(role="candidate", episode_id="ep1")
PARAMS = {"type": "object", "properties": {"account": {"type": "string", "default": "0"}},
          "required": ["account"]}


def test_tool_parameters_are_cleaned_once_per_tool_object() -> None:
    tool = ToolSchema(name="lookup", description="d", parameters=PARAMS)
    first = prepared.tool_parameters(tool, "openai")
    assert first == clean_tool_parameters(PARAMS, "openai", tool="lookup")
    assert prepared.tool_parameters(tool, "openai") is first
    assert prepared.tool_parameters(tool, "anthropic") == clean_tool_parameters(PARAMS, "anthropic",
                                                                                tool="lookup")
    other = ToolSchema(name="lookup", description="d", parameters=PARAMS)  # next episode's list
    assert prepared.tool_parameters(other, "openai") is not first
    key = (id(other), "openai")
    del other
    assert key not in prepared._tools  # dropped with its tool


def test_schemas_and_validators_are_kept_by_content() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "examples": [1]}}, "required": ["n"]}
    same = {"required": ["n"], "properties": {"n": {"examples": [1], "type": "integer"}}, "type": "object"}
    assert prepared.cleaned_schema(schema, "openai") == clean_schema(schema, "openai")
    assert prepared.cleaned_schema(same, "openai") is prepared.cleaned_schema(schema, "openai")
    assert prepared.schema_validator(same) is prepared.schema_validator(schema)
    assert check_json_output('{"n": 3}', schema) == {"n": 3}
    with pytest.raises(Exception, match="at n"):
        check_json_output('{"n": "x"}', same)


def test_json_view_reads_like_a_model() -> None:
    view = prepared.JsonView({"choices": [{"message": {"content": None, "tool_calls": [{"id": "a"}]}}]})
    assert view.usage is None and view.choices[0].message.content is None
    assert [c.id for c in view.choices[0].message.tool_calls] == ["a"]
    assert len(view.choices) == 1 and bool(view.choices) and not prepared.JsonView([])


async def test_openai_request_skips_the_sdk_transform(keys, mk, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    async def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("async_maybe_transform called")

    monkeypatch.setattr(sdk_completions, "async_maybe_transform", refuse)
    rec = mk.Recorder(mk.json_response(mk.openai_completion(None, [("c1", "lookup", '{"account": "1"}')])))
    client = OpenAIClient("openai:gpt-4o", ModelSettings(top_k=5, extra_headers={"X-Title": "cb"}),
                          http_client=rec.client(), retry_policy=RetryPolicy(max_attempts=1),
                          rng=random.Random(0))
    tool = ToolSchema(name="lookup", description="Look up.", parameters=PARAMS)
    request = ModelRequest(messages=[ChatMessage(role="system", content="S"),
                                     ChatMessage(role="user", content="hi")], tools=[tool], context=CTX)
    response = await client.complete(request)
    calls = [(c.id, c.name, c.arguments) for c in response.tool_calls]
    assert calls == [("c1", "lookup", '{"account": "1"}')]
    assert response.usage.input_tokens == 100 and response.usage.output_tokens == 20
    body = rec.bodies[0]
    assert body["top_k"] == 5 and "extra_body" not in body  # merged as the SDK merges extra_body
    sent = body["tools"][0]["function"]["parameters"]
    assert sent == clean_tool_parameters(PARAMS, "openai", tool="lookup")
    assert rec.requests[0].headers["x-title"] == "cb"
    assert rec.requests[0].headers["authorization"].startswith("Bearer ")
    await client.aclose()


ADAPTERS = {"openai": (OpenAIClient, "openai:gpt-4o", "/chat/completions"),
            "anthropic": (AnthropicClient, "anthropic:claude-sonnet-4-5", "/v1/messages")}


async def _send_both_ways(mk, monkeypatch: pytest.MonkeyPatch, *items, stream: bool = False,  # type: ignore[no-untyped-def]
                          dialect: str = "openai"):
    """The same two requests sent by the lean path and by the SDK's ``post`` (``stream``: through
    ``send_unread``, the body read afterwards) with the SDK client of ``dialect``; returns both
    recorders and the outcomes (response or raised exception)."""
    adapter, spec, path = ADAPTERS[dialect]
    out = []
    for lean in (True, False):
        if not lean:
            monkeypatch.setattr(prepared, "_lean_capable", lambda client: False)
            prepared._lean_flags.clear()
        rec = mk.Recorder(*items)
        sdk = adapter(spec, ModelSettings(extra_headers={"X-Title": "cb"}, timeout_s=7),
                      http_client=rec.client())._client
        assert prepared._lean_capable_cached(sdk) is lean
        results = []
        for n in range(2):
            try:
                if stream:
                    response = await prepared.send_unread(sdk, path, {"model": "m", "n": n},
                                                          headers={"X-Title": "cb"},
                                                          timeout=httpx2.Timeout(7.0, read=None))
                    assert not response.is_closed  # handed over unread
                    await response.aread()
                    results.append(response)
                else:
                    results.append(await prepared.post_json(sdk, path, {"model": "m", "n": n},
                                                            headers={"X-Title": "cb"}, timeout=7.0,
                                                            response_type=httpx2.Response))
            except Exception as exc:
                results.append(exc)
        out.append((rec, results))
        await sdk.close()
    prepared._lean_flags.clear()
    return out


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True])
async def test_lean_post_sends_what_the_sdk_sends(keys, mk, monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
                                                  stream: bool, dialect: str) -> None:
    async def body():  # type: ignore[no-untyped-def]
        yield b'{"ok": 1}'

    def answer(request: httpx2.Request) -> httpx2.Response:  # a body that arrives as it is read
        return httpx2.Response(200, headers={"content-type": "application/json"}, content=body())

    (lean, lean_out), (sdk, sdk_out) = await _send_both_ways(mk, monkeypatch, answer, stream=stream,
                                                             dialect=dialect)
    limits = httpx2.Timeout(7.0, read=None) if stream else httpx2.Timeout(7.0)
    raw = "x-stainless-raw-response"  # the SDK's own instruction to itself: return the body unread
    for a, b in zip(lean.requests, sdk.requests, strict=True):
        assert (a.method, str(a.url), a.content) == (b.method, str(b.url), b.content)
        assert a.headers.multi_items() == [h for h in b.headers.multi_items() if h[0] != raw]
        assert (raw in b.headers) is stream and raw not in a.headers
        assert a.extensions["timeout"] == b.extensions["timeout"] == limits.as_dict()
    assert lean.requests[1].content == b'{"model":"m","n":1}'
    assert [r.json() for r in lean_out] == [r.json() for r in sdk_out] == [{"ok": 1}, {"ok": 1}]


async def _arriving(data: bytes):  # type: ignore[no-untyped-def]
    yield data


@pytest.mark.parametrize("item, error", [
    (httpx2.Response(429, json={"error": {"message": "slow down"}}, headers={"retry-after": "2"}),
     openai.RateLimitError),
    (httpx2.Response(500, text="boom"), openai.InternalServerError),
    (lambda request: httpx2.Response(503, content=_arriving(b'{"error": {"message": "overloaded"}}')),
     openai.InternalServerError),  # an error body not yet read when the status arrives
    (httpx2.Response(302, headers={"location": "/elsewhere"}), openai.APIStatusError),
    (httpx2.ReadTimeout("slow"), openai.APITimeoutError),
    (httpx2.ConnectError("refused"), openai.APIConnectionError),
    (httpx2.RemoteProtocolError("peer closed connection"), openai.APIConnectionError),
])
@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True])
async def test_lean_post_raises_the_sdk_errors(keys, mk, monkeypatch: pytest.MonkeyPatch, item: object,  # type: ignore[no-untyped-def]
                                               error: type[Exception], stream: bool, dialect: str) -> None:
    sdk_module = importlib.import_module(dialect)
    error = getattr(sdk_module, error.__name__)  # the same error class of that SDK
    (_, lean_out), (_, sdk_out) = await _send_both_ways(mk, monkeypatch, item, stream=stream, dialect=dialect)
    for a, b in zip(lean_out, sdk_out, strict=True):
        assert type(a) is type(b) and isinstance(a, error)
        assert str(a) == str(b)
        assert type(a.__cause__) is type(b.__cause__)
        if isinstance(a, openai.APIStatusError):
            assert (a.status_code, a.body, a.response.headers.get("retry-after")) == (
                b.status_code, b.body, b.response.headers.get("retry-after"))
            if a.status_code == 503:  # the body read before the error was made from it
                assert a.body == {"message": "overloaded"} and "overloaded" in str(a)


def test_lean_path_only_for_plain_key_clients(keys) -> None:  # type: ignore[no-untyped-def]
    plain = OpenAIClient("openai:gpt-4o", ModelSettings())._client
    assert prepared._lean_capable(plain)
    signed = plain.copy()
    signed._provider_runtime = object()  # e.g. a cloud provider's request signing
    assert not prepared._lean_capable(signed)
    assert not prepared._lean_capable(object())
    claude = AnthropicClient("anthropic:claude-sonnet-4-5", ModelSettings())._client
    assert prepared._lean_capable(claude)
    for name, value in (("credentials", object()), ("_middleware", (object(),)), ("_custom_auth", object())):
        changed = claude.copy()
        setattr(changed, name, value)  # a token provider, a middleware chain, a signing auth
        assert not prepared._lean_capable(changed), name


def test_encode_body_is_the_sdk_encoding_with_pieces_reused() -> None:
    from openai._utils._json import openapi_dumps

    owners = (ToolSchema(name="a", description="d", parameters=PARAMS),)
    tools = prepared.shared_list("test", owners, lambda: [{"type": "function", "name": "a", "é": "ü" * 3000}])
    assert prepared.shared_list("test", owners, lambda: []) is tools  # same owners: same list
    assert prepared.shared_list("test", (ToolSchema(name="a", description="d", parameters=PARAMS),),
                                lambda: []) == []  # other owner objects: another list
    doc = "Operating document \u0985\u0986 \"quoted\" \\ \n" * 200
    rng = random.Random(3)

    def value(depth: int) -> object:
        r = rng.random()
        if depth > 3 or r < 0.4:
            return rng.choice([1, -0.0, 2.5, 10**30, None, True, "x", "", doc, "\u00e9" * 2500])
        if r < 0.7:
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        return {rng.choice(["a", "content", "\u00fc"]): value(depth + 1) for _ in range(rng.randrange(4))}

    for _ in range(500):
        body = {"model": "m", "messages": [{"role": "system", "content": doc}, value(1)], "tools": tools,
                "x": value(0)}
        assert prepared.encode_body(body) == openapi_dumps(body)
    with pytest.raises(ValueError, match="JSON compliant"):
        prepared.encode_body({"messages": [{"content": doc, "t": float("nan")}]})
