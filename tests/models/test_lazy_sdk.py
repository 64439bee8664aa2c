"""``callbench validate`` builds request bodies for the provider checks without importing the
openai or anthropic SDK (importing both cost about a second of its start-up)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def test_validate_path_imports_no_sdk() -> None:
    code = (
        "import sys, json\n"
        "import callbench.cli, callbench.cli.bundle, callbench.bundle.validate.audits\n"
        "import callbench.runs.provider_check, callbench.models.remote.openai_client\n"
        "import callbench.models.remote.anthropic_client, callbench.models.remote.retry\n"
        "print(json.dumps(sorted(m for m in ('openai', 'anthropic', 'httpx2')"
        " if m in sys.modules)))\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert json.loads(out.stdout) == []


def test_exceptions_of_a_loaded_sdk_are_still_classified() -> None:
    import httpx2
    import openai

    from callbench.models.remote.retry import classify_exception
    from callbench.models.remote.secrets import Redactor

    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    err = classify_exception(openai.APITimeoutError(request=request), provider="openai", redactor=Redactor())
    assert err is not None and err.kind == "timeout"
    answer = httpx2.Response(429, request=request, headers={"retry-after": "3"})
    status = openai.RateLimitError("slow down", response=answer, body=None)
    err = classify_exception(status, provider="openai", redactor=Redactor())
    assert err is not None and (err.kind, err.status, err.retry_after_s) == ("rate_limit", 429, 3.0)
    assert classify_exception(ValueError("a bug"), provider="openai", redactor=Redactor()) is None
