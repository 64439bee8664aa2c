"""Secrets never reach a file a run writes: canaries planted in every place a
secret can be given (the key's environment variable, a header from the environment, a literal
header value, a base URL's userinfo and query, in settings and in ``OPENAI_BASE_URL``) are searched
for in every file under the run's folders (manifest, traces, faults, grades, index, cache, lock,
JSON/CSV/HTML reports) and in the real command's stdout and stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from callbench.models.base import ModelSettings, saved_url
from callbench.models.remote.secrets import Redactor, resolve_base_url
from callbench.runfolder import episode_files
from fakes.fault_server import FaultServer
from waiting import limit

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
SRC = Path(__file__).parents[2] / "src"
CANARIES = {
    "key": "sk-canary-envkey-1111",
    "header_env": "hdr-canary-2222",
    "header_literal": "tag-canary-3333",
    "url_user": "user-canary-4444",
    "url_password": "pass-canary-5555",
    "url_query": "query-canary-6666",
    "env_url_password": "envpass-canary-7777",
    "env_url_query": "envquery-canary-8888",
}


def test_saved_url_keeps_the_endpoint_only() -> None:
    assert saved_url("https://u:p%40ss@api.example.com:8443/v1?subscription-key=abc&api-version=2024") == (
        "https://not-saved@api.example.com:8443/v1?subscription-key=not-saved&api-version=not-saved"
    )
    assert saved_url("http://localhost:8000/v1") == "http://localhost:8000/v1"
    dumped = ModelSettings(base_url="http://a:b@h/v1?k=secret-value").model_dump(mode="json")
    assert dumped["base_url"] == "http://not-saved@h/v1?k=not-saved"
    redactor = Redactor()
    bare, query = resolve_base_url("http://a-user:b-pass@h/v1?k=secret-value", redactor)
    assert bare == "http://a-user:b-pass@h/v1" and query == {"k": "secret-value"}
    assert redactor.clean("GET http://a-user:b-pass@h/v1?k=secret-value") == "GET http://[redacted]@h/v1?[redacted]"


def test_a_saved_url_read_back_is_refused_with_one_line() -> None:
    import pytest

    with pytest.raises(ValueError, match="were not saved with the run; give the role's settings again"):
        resolve_base_url("http://not-saved@h/v1?k=not-saved", Redactor())


@pytest.mark.slow  # a run, grade and report through the CLI: about 19 s at load 7
def test_canaries_planted_everywhere_reach_no_file_and_no_output(tmp_path: Path) -> None:
    c = CANARIES
    kinds = ("server_error", "reset", "truncated_json", "html", "error_body")
    with FaultServer(rate=0.2, seed=3, kinds=kinds) as server:
        host = server.url.removeprefix("http://")
        # no fault here is a hang: no attempt is meant to time out, however loaded the machine
        common = {"timeout_s": limit(120.0), "max_attempts": 8, "retry_base_delay_s": 0.01}
        settings = {
            "candidate": {"spec": "openai:fake-agent", **common,
                          "base_url": f"http://{c['url_user']}:{c['url_password']}@{host}",
                          "extra_headers": {"X-Access-Key": "env:CANARY_HEADER"}},
            "caller": {"spec": "openai:fake-caller", **common,
                       "base_url": f"{server.url}?subscription-key={c['url_query']}",
                       "extra_headers": {"X-Client-Tag": c["header_literal"]}},
            "task_judge": {"spec": "openai:fake-judge", **common},  # OPENAI_BASE_URL
            "conversation_judge": {"spec": "openai:fake-judge", **common},
        }
        path = tmp_path / "settings.yaml"
        path.write_text(yaml.safe_dump(settings), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
        env.update({
            "PYTHONPATH": str(SRC), "COLUMNS": "200", "OPENAI_API_KEY": c["key"],
            "CANARY_HEADER": c["header_env"],
            "OPENAI_BASE_URL": f"http://judge:{c['env_url_password']}@{host}?code={c['env_url_query']}",
        })
        out, cache = tmp_path / "run", tmp_path / "cache.sqlite"
        run = subprocess.run(
            [sys.executable, "-m", "callbench", "run", str(STARTER), "--candidate", "openai:fake-agent",
             "--caller", "openai:fake-caller", "--task-judge", "openai:fake-judge",
             "--conversation-judge", "openai:fake-judge", "--settings", str(path), "--out", str(out),
             "--cache", str(cache), "--limit", "2", "--max-turns", "4", "--seed", "1"],
            env=env, capture_output=True, text=True, timeout=limit(600),
        )
        assert run.returncode == 0, run.stderr
        assert server.log and any(e.kind for e in server.log)  # faults met: error messages were made
        reports = tmp_path / "reports"
        reports.mkdir()
        report = subprocess.run(
            [sys.executable, "-m", "callbench", "report", str(out), "--json", str(reports / "r.json"),
             "--csv", str(reports / "r.csv"), "--html", str(reports / "r.html")],
            env=env, capture_output=True, text=True, timeout=limit(600),
        )
        assert report.returncode == 0, report.stderr
    texts = {"run stdout": run.stdout, "run stderr": run.stderr,
             "report stdout": report.stdout, "report stderr": report.stderr}
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p != path]
    assert any(p.name == "manifest.json" for p in files) and (reports / "r.html").exists()
    for p in files:
        texts[str(p)] = episode_files.file_bytes(p).decode("utf-8", errors="replace")
    leaks = [(where, name) for where, text in texts.items() for name, canary in c.items() if canary in text]
    assert leaks == []
    manifest = (out / "manifest.json").read_text(encoding="utf-8")
    assert "not-saved@" in manifest and "subscription-key=not-saved" in manifest
