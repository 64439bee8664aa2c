"""The embedded local model through one generation attempt. Skipped unless
llama-cpp-python and the 0.5B weights are installed. The 0.5B model is not expected to write a
scenario that passes the audit (and 400 output tokens cannot hold one); the test checks that the
path works: the request is built and sent with the scenario schema's grammar, the answer is read,
audited or rejected with located problems, and the attempt is recorded in the manifest."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import pytest

from callbench.generate.generator import GenerateOptions, generate_batch
from callbench.generate.manifest import load_manifest
from callbench.models.base import ModelSettings
from callbench.models.local.weights import VARIANTS, find_parts
from callbench.models.registry import create_client

from .conftest import AGENT

_MISSING = (
    "llama-cpp-python is not installed"
    if importlib.util.find_spec("llama_cpp") is None
    else "the 0.5B weights (callbench[local]) are not installed"
    if find_parts(VARIANTS["0.5b"]) is None
    else ""
)
if _MISSING:
    pytest.skip(_MISSING, allow_module_level=True)


def test_one_generation_attempt_on_the_embedded_model(agent_bundle: Path) -> None:
    from callbench.models.local.client import release_engines

    client = create_client(
        "local:0.5b", ModelSettings(seed=1, temperature=0.0, max_tokens=400), role="generator"
    )
    try:
        outcome = asyncio.run(
            generate_batch(agent_bundle, client, GenerateOptions(agent=AGENT, n=1, max_attempts=1))
        )
    finally:
        asyncio.run(client.aclose())
        release_engines()
    print(f"local generation attempt: {outcome.model_dump_json()}")  # shown with pytest -s
    assert outcome.stopped is None, outcome.stopped
    assert len(outcome.written) + len(outcome.failed) == 1
    assert outcome.usage.input_tokens > 1000 and 0 < outcome.usage.output_tokens <= 400
    batch = load_manifest(agent_bundle).batches[outcome.batch_id]
    assert batch.provider == "local" and batch.usage.output_tokens == outcome.usage.output_tokens
    if outcome.failed:
        [failed] = outcome.failed
        assert failed.attempts == 1 and failed.reason in ("output", "audit", "near_duplicate")
        assert failed.last_problems and all("[" in p for p in failed.last_problems)
