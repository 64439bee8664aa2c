"""``callbench generate``: the request / audit / repair loop, near-duplicate rejection, the
generation manifest and its byte-for-byte replay, driven by the scripted generator (offline)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
import yaml

from callbench.bundle.provenance import load_provenance
from callbench.generate.generator import GenerateError, GenerateOptions, generate_batch
from callbench.generate.manifest import load_manifest
from callbench.models.base import InfrastructureError, ModelRequest, ModelResponse
from callbench.models.cache import CachedClient, ResponseCache
from callbench.models.registry import create_client
from callbench.models.scripted.generator import ScriptedGenerator

from .conftest import AGENT, NEAR_DUPLICATE, REPAIRED, VALID, invoke, tree_bytes


def _generate(bundle: Path, script: Path, *extra: str) -> tuple[int, str, str]:
    return invoke(
        "generate",
        str(bundle),
        "--agent",
        AGENT,
        "--model",
        f"scripted:generator:{script}",
        "--n",
        "3",
        "--seed",
        "7",
        *extra,
    )


def test_generate_writes_only_audited_scenarios(agent_bundle: Path, script: Path) -> None:
    code, out, err = _generate(agent_bundle, script)
    assert code == 1, out + err  # one item was not written
    folder = agent_bundle / "agents" / AGENT / "scenarios"
    assert sorted(p.stem for p in folder.iterdir()) == sorted([VALID, REPAIRED])
    assert "item 3/3: not written (near_duplicate, 3 attempt(s))" in out
    assert "2 written, 1 not" in out and f"Next: callbench review {agent_bundle} --agent {AGENT}" in out
    # what is written validates (with the reference replay), and validate only warns about review
    code, out, err = invoke("validate", str(agent_bundle))
    assert code == 0, out
    assert "no problems" in out and "2 generated scenario(s) not reviewed yet" in out


def test_repair_loop_sends_located_problems_back(agent_bundle: Path, script: Path) -> None:
    seen: list[ModelRequest] = []
    inner = ScriptedGenerator(f"scripted:generator:{script}", None, script)

    class Recording:
        spec, settings = inner.spec, inner.settings

        async def complete(self, request: ModelRequest) -> ModelResponse:
            seen.append(request)
            return await inner.complete(request)

        async def aclose(self) -> None:
            return None

    outcome = asyncio.run(
        generate_batch(agent_bundle, Recording(), GenerateOptions(agent=AGENT, n=3, seed=7))
    )
    assert outcome.written == [VALID, REPAIRED]
    # item 1 once, item 2 twice (invalid, then repaired), item 3 three times (near-duplicate each time)
    assert [(r.context.turn, r.context.attempt) for r in seen] == [
        (0, 0),
        (1, 0),
        (1, 1),
        (2, 0),
        (2, 1),
        (2, 2),
    ]
    repair = seen[2].messages
    assert [m.role for m in repair] == ["system", "user", "assistant", "user"]
    assert json.loads(repair[2].content or "")["id"] == REPAIRED  # the rejected answer goes back
    ask = repair[3].content or ""
    assert f"agents/{AGENT}/scenarios/{REPAIRED}.yaml:criteria.0.excerpts.0: [excerpt.not_verbatim]" in ask
    assert "[reference.check_unmet]" in ask
    # the first request carries the rendered document, the tools, the success condition and the plan
    first = seen[0].messages[1].content or ""
    assert "## Water tankers" in first and '"name": "book_tanker"' in first
    assert '"success": {\n   "status": "ended"' in first and "# Batch plan (3 scenarios" in first
    assert seen[0].response_schema is not None and seen[0].response_schema["$id"].endswith(
        "scenario.schema.json"
    )
    assert seen[0].context.role == "generator"
    # the first item's scenario is listed as existing in the next item's request
    assert f"- {VALID}: No water for two days" in (seen[1].messages[1].content or "")


def test_manifest_and_provenance_record_the_batch(agent_bundle: Path, script: Path) -> None:
    _generate(agent_bundle, script)
    m = load_manifest(agent_bundle)
    [(bid, batch)] = m.batches.items()
    assert bid.startswith("g-") and batch.seed == 7 and batch.model == f"scripted:generator:{script}"
    assert batch.provider == "scripted" and batch.n == 3 and batch.languages == {"en-IN": 3}
    assert sum(batch.difficulty.values()) == 3 and len(batch.plan) == 3
    assert batch.written == [VALID, REPAIRED]
    [failed] = batch.failed
    assert failed.item == 2 and failed.reason == "near_duplicate" and failed.attempts == 3
    assert f"same intent and facts as scenario {VALID!r}" in failed.last_problems[0]
    assert len(batch.document_sha256) == len(batch.tools_sha256) == len(batch.rules_sha256) == 64
    rec = m.scenarios[REPAIRED]
    assert rec.batch == bid and rec.item == 1 and rec.attempts == 2
    codes = " ".join(rec.audit[0].problems)
    assert "excerpt.not_verbatim" in codes and "reference.check_unmet" in codes
    assert rec.audit[1].problems == [] and rec.review.status == "unreviewed"
    assert rec.audit[0].request_sha256 != rec.audit[1].request_sha256
    import hashlib

    data = (agent_bundle / rec.file).read_bytes()
    assert rec.output_sha256 == hashlib.sha256(data).hexdigest()
    assert NEAR_DUPLICATE not in m.scenarios
    prov = load_provenance(agent_bundle, [])
    assert prov is not None
    entry = prov.scenarios[REPAIRED]
    assert entry.made == "generated" and entry.review.status == "unreviewed"
    assert entry.generation is not None and entry.generation.seed == 7 and bid in entry.generation.notes
    assert entry.sha256 == rec.output_sha256


def test_same_seed_model_and_inputs_reproduce_the_files_byte_for_byte(
    tmp_path: Path, agent_bundle: Path, script: Path
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(agent_bundle, copy)
    _generate(agent_bundle, script)
    _generate(copy, script)
    a, b = tree_bytes(agent_bundle), tree_bytes(copy)
    assert "generation.yaml" in a and "provenance.yaml" in a and a == b


class _Counting:
    """A non-scripted stand-in (the cache wraps it) that answers from the scripted generator, or
    raises when ``fail`` (proving a replay never reaches the model)."""

    def __init__(self, inner: ScriptedGenerator, fail: bool) -> None:
        self.inner, self.fail, self.calls = inner, fail, 0
        self.spec, self.settings = "openai:gpt-test", inner.settings

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        if self.fail:
            raise InfrastructureError("the network is not there", retryable=False)
        return await self.inner.complete(request)

    async def aclose(self) -> None:
        return None


def test_replay_only_cache_reproduces_a_batch_without_the_model(
    tmp_path: Path, agent_bundle: Path, script: Path
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(agent_bundle, copy)
    inner = ScriptedGenerator(f"scripted:generator:{script}", None, script)
    opts = GenerateOptions(agent=AGENT, n=3, seed=11)
    live = _Counting(inner, fail=False)
    cache = ResponseCache(tmp_path / "cache.sqlite", "read_write")
    first = asyncio.run(generate_batch(agent_bundle, CachedClient(live, cache), opts))
    cache.close()
    assert live.calls == 6 and first.written == [VALID, REPAIRED]
    dead = _Counting(inner, fail=True)
    replay = ResponseCache(tmp_path / "cache.sqlite", "replay_only")
    second = asyncio.run(generate_batch(copy, CachedClient(dead, replay), opts))
    replay.close()
    assert dead.calls == 0 and second.batch_id == first.batch_id and second.stopped is None
    assert tree_bytes(agent_bundle) == tree_bytes(copy)
    # another seed is another batch: the replay-only cache has none of its requests
    other = ResponseCache(tmp_path / "cache.sqlite", "replay_only")
    third = asyncio.run(
        generate_batch(copy, CachedClient(dead, other), GenerateOptions(agent=AGENT, n=1, seed=12))
    )
    other.close()
    assert third.written == [] and third.stopped is not None and "replay-only cache miss" in third.stopped


def test_cli_cache_flags_replay(tmp_path: Path, agent_bundle: Path, script: Path) -> None:
    code, _, err = _generate(agent_bundle, script, "--cache-mode", "replay_only")
    assert code == 2 and "--cache-mode replay_only needs --cache FILE" in err


def test_second_batch_sees_the_first(agent_bundle: Path, script: Path) -> None:
    """Generating again into the same bundle: every answer now duplicates an existing scenario."""
    _generate(agent_bundle, script)
    code, out, _ = _generate(agent_bundle, script, "--seed", "8")
    assert code == 1 and "0 written, 3 not" in out
    assert "Next: callbench review" not in out  # regression: suggested with nothing to review
    assert "generate.duplicate_id" in out or "generate.near_duplicate" in out
    m = load_manifest(agent_bundle)
    assert len(m.batches) == 2 and sorted(m.scenarios) == sorted([VALID, REPAIRED])


def test_bad_inputs_are_refused_before_any_request(tmp_path: Path, agent_bundle: Path, script: Path) -> None:
    code, _, err = _generate(agent_bundle, script, "--difficulty", "medium=1,hard=1")
    assert code == 2 and "the counts sum to 2, not --n 3" in err
    code, _, err = _generate(agent_bundle, script, "--languages", "ta")
    assert code == 2 and "'ta' is not served by agent 'water_helpline'" in err
    code, _, err = invoke(
        "generate", str(agent_bundle), "--agent", "nobody", "--model", f"scripted:generator:{script}"
    )
    assert code == 2 and "no such agent" in err
    code, _, err = invoke("generate", str(agent_bundle), "--agent", AGENT, "--model", "nosuch:model")
    assert code == 2 and "unknown provider" in err
    settings = tmp_path / "s.yaml"
    settings.write_text("generator: {temperature: hot}\n", encoding="utf-8")
    code, _, err = _generate(agent_bundle, script, "--settings", str(settings))
    assert code == 2 and "temperature" in err
    # a bundle with hand-written scenarios but no provenance file
    scen = agent_bundle / "agents" / AGENT / "scenarios" / f"{VALID}.yaml"
    scen.write_text((Path(script).parent / f"{VALID}.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(GenerateError, match=r"no provenance\.yaml"):
        asyncio.run(
            generate_batch(
                agent_bundle, create_client(f"scripted:generator:{script}"), GenerateOptions(agent=AGENT, n=1)
            )
        )


def test_invalid_json_output_is_repaired(agent_bundle: Path, tmp_path: Path, script: Path) -> None:
    answers = tmp_path / "script" / "broken.yaml"
    answers.write_text(
        yaml.safe_dump({
            "follow_plan": yaml.safe_load(script.read_text(encoding="utf-8"))["follow_plan"],
            "items": [[{"raw": '{"id": "water_x", '}, "water_no_supply_tanker.yaml"]],
        }),
        encoding="utf-8",
    )
    outcome = asyncio.run(
        generate_batch(
            agent_bundle, create_client(f"scripted:generator:{answers}"), GenerateOptions(agent=AGENT, n=1)
        )
    )
    assert outcome.written == [VALID]
    rec = load_manifest(agent_bundle).scenarios[VALID]
    assert rec.attempts == 2 and "[output.invalid] output is not valid JSON" in rec.audit[0].problems[0]
