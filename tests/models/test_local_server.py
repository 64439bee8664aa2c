"""``callbench serve-local``'s options, llama-cpp-python server settings and the run settings it
prints (models/local/server.py); serving for real is tests/e2e/test_serve_local_run.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from callbench.cli import app
from callbench.models.local.server import (
    CLIENT_TIMEOUT_S,
    ServeError,
    ServeOptions,
    check_options,
    is_loopback,
    llama_model_settings,
    llama_server_settings,
    resolve_model,
    role_settings,
    usage_text,
    write_settings,
)


def test_loopback_only() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.3.4.5", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "192.168.1.4", "example.com", "::"))
    with pytest.raises(ServeError, match="loopback only"):
        check_options(ServeOptions(host="0.0.0.0"))
    with pytest.raises(ServeError, match="--chat-format 'llama-2'"):
        check_options(ServeOptions(chat_format="llama-2"))


def test_llama_settings_keep_logits_off_and_use_every_core() -> None:
    opts = ServeOptions(threads=3, n_ctx=8192, cache_bytes=1 << 30)
    s = llama_model_settings(opts, Path("/m/x.gguf"), "local-0.5b")
    assert s["logits_all"] is False
    assert (s["n_threads"], s["n_threads_batch"], s["n_ctx"]) == (3, 3, 8192)
    assert (s["cache"], s["cache_type"], s["cache_size"]) == (True, "ram", 1 << 30)
    assert s["chat_format"] is None  # the GGUF's own template
    assert llama_model_settings(ServeOptions(cache_bytes=0), Path("/m"), "a")["cache"] is False
    fc = llama_model_settings(ServeOptions(chat_format="chatml-function-calling"), Path("/m"), "a")
    assert fc["chat_format"] == "chatml-function-calling"
    assert llama_model_settings(ServeOptions(), Path("/m"), "a")["n_threads"] >= 1


def test_server_settings_let_requests_wait_instead_of_cutting_streams() -> None:
    """llama-cpp-python's server ends a streamed reply early when another request waits, unless
    ``interrupt_requests`` is off (the real server's behaviour: tests/e2e/test_serve_local_run.py)."""
    s = llama_server_settings(ServeOptions(host="::1", port=8123))
    assert s == {"host": "::1", "port": 8123, "interrupt_requests": False}


def test_role_settings_put_every_role_on_the_server(tmp_path: Path) -> None:
    opts = ServeOptions(port=8123)
    roles = role_settings(opts, "local-0.5b")
    assert set(roles) == {"candidate", "caller", "task_judge", "conversation_judge"}
    for entry in roles.values():
        assert entry["spec"] == "openai:local-0.5b"
        assert entry["base_url"] == "http://127.0.0.1:8123/v1"
        assert entry["timeout_s"] == CLIENT_TIMEOUT_S
    assert roles["candidate"]["parse_content_tool_calls"] is True
    assert "parse_content_tool_calls" not in roles["caller"]
    fc = role_settings(ServeOptions(chat_format="chatml-function-calling"), "a")
    assert "parse_content_tool_calls" not in fc["candidate"]
    assert role_settings(ServeOptions(host="::1", port=9), "a")["caller"]["base_url"] == "http://[::1]:9/v1"
    path = tmp_path / "roles.yaml"
    write_settings(path, opts, "local-0.5b")
    assert yaml.safe_load(path.read_text()) == roles
    text = usage_text(opts, "local-0.5b", path)
    assert "http://127.0.0.1:8123/v1" in text and "--settings " + str(path) in text


def test_a_gguf_path_is_checked(tmp_path: Path) -> None:
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"NOPE")
    with pytest.raises(ServeError, match="not a GGUF file"):
        resolve_model(str(bad))
    good = tmp_path / "tiny.gguf"
    good.write_bytes(b"GGUF" + bytes(8))
    assert resolve_model(f"local:{good}") == (good, "tiny")
    with pytest.raises(ServeError, match=r"--model 'local:2b': expected local, local:0.5b, local:1.5b"):
        resolve_model("local:2b")


def test_cli_refuses_a_public_host_in_one_line() -> None:
    result = CliRunner().invoke(app, ["serve-local", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "loopback only" in result.output
