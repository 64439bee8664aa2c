"""Spec parsing, client creation, the settings file, secret-looking headers."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from callbench.models.base import ModelClient, ModelSettings
from callbench.models.cache import CachedClient, ResponseCache
from callbench.models.local import client as local_module
from callbench.models.registry import create_client, load_settings_file
from callbench.models.remote.openai_client import OpenAIClient
from callbench.models.specs import parse_spec


def test_parse_spec():
    assert parse_spec("openai:gpt-4o") == ("openai", "gpt-4o")
    assert parse_spec(" Anthropic:claude-x ") == ("anthropic", "claude-x")
    assert parse_spec("local") == ("local", "")
    assert parse_spec("local:/m/a:b.gguf") == ("local", "/m/a:b.gguf")
    assert parse_spec("openai:ft:gpt-4o:org::id") == ("openai", "ft:gpt-4o:org::id")
    with pytest.raises(ValueError, match="model spec 'gemini:pro': unknown provider 'gemini'"):
        parse_spec("gemini:pro")
    with pytest.raises(ValueError, match="model spec 'openai': provider 'openai' needs a model name"):
        parse_spec("openai")
    with pytest.raises(ValueError, match="is empty"):
        parse_spec("  ")


def test_unknown_provider_from_create_client():
    with pytest.raises(ValueError, match="model spec 'mistral:large'"):
        create_client("mistral:large", ModelSettings())


def test_scripted_delegation(tmp_path: Path):
    judge = create_client("scripted:met", ModelSettings())
    assert type(judge).__name__ == "ScriptedJudge"
    candidate = create_client("scripted:hangup", ModelSettings(), cache=ResponseCache(tmp_path / "c.sqlite"))
    assert type(candidate).__name__ == "HangupCandidate"  # scripted models are never cached
    script = tmp_path / "judge.yaml"
    script.write_text("- {criteria: {}, ratings: {}}\n")
    assert type(create_client(f"scripted:file:{script}", role="task_judge")).__name__ == "ScriptedJudge"
    assert type(create_client(f"scripted:file:{script}", role="caller")).__name__ != "ScriptedJudge"


def test_openai_client_with_cache(keys, tmp_path: Path):
    client = create_client("openai:gpt-4o", ModelSettings(), cache=ResponseCache(tmp_path / "c.sqlite"))
    assert isinstance(client, CachedClient) and isinstance(client.inner, OpenAIClient)
    assert isinstance(client, ModelClient)
    assert client.embedded_smoke_test_model is False
    plain = create_client("openai:gpt-4o", ModelSettings(), cache=ResponseCache(tmp_path / "d.sqlite", "off"))
    assert isinstance(plain, OpenAIClient)


def test_local_spec_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setattr(local_module, "llama_available", lambda: True)
    with pytest.raises(ValueError, match=r"model spec 'local:7b': expected local, local:0.5b"):
        create_client("local:7b")
    with pytest.raises(ValueError, match="does not exist"):
        create_client(f"local:{tmp_path}/none.gguf")
    own = tmp_path / "own.gguf"
    own.write_bytes(b"GGUF" + b"\0" * 8)
    client = create_client(f"local:{own}")
    assert client.embedded_smoke_test_model is False  # type: ignore[attr-defined]
    monkeypatch.setattr(local_module, "llama_available", lambda: False)
    with pytest.raises(ValueError, match="local: the local provider needs llama-cpp-python"):
        create_client("local")


def test_load_settings_file(tmp_path: Path):
    path = tmp_path / "models.yaml"
    path.write_text(
        "candidate: {spec: 'openai:gpt-4o', temperature: 0.7, top_p: 0.9, top_k: 20, seed: 1,\n"
        "            base_url: 'http://localhost:8000/v1', extra_headers: {X-Title: bench}}\n"
        "caller: 'anthropic:claude-sonnet-4-6'\n"
        "task_judge: {spec: local, n_ctx: 8192, max_tokens: 512}\n"
    )
    roles = load_settings_file(path)
    assert roles["candidate"] == (
        "openai:gpt-4o",
        ModelSettings(
            temperature=0.7,
            top_p=0.9,
            top_k=20,
            seed=1,
            base_url="http://localhost:8000/v1",
            extra_headers={"X-Title": "bench"},
        ),
    )
    assert roles["caller"] == ("anthropic:claude-sonnet-4-6", ModelSettings())
    assert roles["task_judge"][1].n_ctx == 8192
    path.write_text("candidate: {spec: 'openai:gpt-4o', temprature: 0.7}\n")
    with pytest.raises(ValueError, match=r"models.yaml: candidate.temprature: Extra inputs"):
        load_settings_file(path)
    path.write_text("judge: local\n")
    with pytest.raises(ValueError, match="unknown role 'judge'"):
        load_settings_file(path)
    path.write_text("caller: {spec: 'foo:bar'}\n")
    with pytest.raises(ValueError, match=r"caller.spec: model spec 'foo:bar'"):
        load_settings_file(path)
    path.write_text("caller: {spec: 'openai:x', extra_headers: {Authorization: Bearer sk-live}}\n")
    with pytest.raises(ValueError, match="looks like a credential"):
        load_settings_file(path)


def test_secret_headers_must_come_from_env():
    with pytest.raises(ValidationError, match=r"api-key.*env:VAR_NAME"):
        ModelSettings(extra_headers={"api-key": "abc123"})
    assert ModelSettings(extra_headers={"api-key": "env:AZURE_KEY"}).extra_headers == {
        "api-key": "env:AZURE_KEY"
    }
    assert (
        ModelSettings(extra_headers={"HTTP-Referer": "https://x"}).extra_headers["HTTP-Referer"]
        == "https://x"
    )


def test_settings_from_pairs():
    from callbench.models.registry import settings_from_pairs

    s = settings_from_pairs(["temperature=0.7", "top_k=20", "seed=3", "base_url=http://h:1/v1",
                             "reasoning_effort=low", "extra_headers.X-Title=my bench"])
    assert (s.temperature, s.top_k, s.seed, s.base_url) == (0.7, 20, 3, "http://h:1/v1")
    assert s.reasoning_effort == "low" and s.extra_headers == {"X-Title": "my bench"}
    assert settings_from_pairs(["max_tokens=64"], base=s).temperature == 0.7
    with pytest.raises(ValueError, match="unknown setting 'temp'"):
        settings_from_pairs(["temp=1"])
    with pytest.raises(ValueError, match="expected name=value"):
        settings_from_pairs(["temperature"])
    with pytest.raises(ValueError, match="model setting top_k"):
        settings_from_pairs(["top_k=many"])


def test_requantized_local_spec(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from callbench.models.local import requantize

    monkeypatch.setattr(local_module, "llama_available", lambda: True)
    made: list[tuple[str, str]] = []
    copy = tmp_path / "copy.gguf"

    def fake(name: str, quant: str = "q4_0", **_: object) -> Path:
        made.append((name, quant))
        return copy

    monkeypatch.setattr(requantize, "ensure_requantized", fake)
    client = create_client("local:0.5b-q4_0")
    assert made == [("0.5b", "q4_0")]
    assert client.model_path == copy  # type: ignore[attr-defined]
    assert client.embedded_smoke_test_model is True  # type: ignore[attr-defined]
    assert client.model_name.endswith("requantized to Q4_0")  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=r"local:0\.5b-q4_0"):
        create_client("local:0.5b-q2_k")
