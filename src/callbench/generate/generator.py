"""The generation loop: plan, request, audit, repair, write, record.

For each plan item the generator model gets the first request (:mod:`.request`); its JSON answer
is checked against the scenario JSON Schema, its id against the bundle's ids, its intent and facts
against the agent's scenarios (:mod:`.duplicates`) and the whole file by the audit
(:mod:`.audit`; the loop is :mod:`.repair`). Located problems go back in a repair request, at most
``max_attempts`` requests per item in all. The scenario must also be what its plan item asked for
(language, difficulty, channel event kinds: :mod:`.contract`). A scenario that passes is committed
at once with its generation-manifest (:mod:`.manifest`) and ``provenance.yaml`` entries (made
``generated``, review ``unreviewed``; :mod:`.records`); the others are listed with their last
problems. An interrupted batch resumes with the same command.

Determinism: every request carries ``RequestContext(role="generator", episode_id="generate:<batch
id>:<item>", turn=item, attempt=n)``, so the response cache (``models/cache.py``) gives each item
and attempt its own slot and a replay-only cache answers every request of an earlier run; the
scenario text is a function of the answer (:func:`.audit.scenario_text`), and nothing time-dependent
is recorded, so a replay writes identical files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from callbench.bundle.coverage import agent_coverage
from callbench.bundle.models import LoadedAgent, Scenario
from callbench.bundle.provenance import Generation, machine_written, provenance_path
from callbench.bundle.render import render_instructions
from callbench.bundle.validate.audits import scenario_files, validate_path
from callbench.generate.audit import scenario_text
from callbench.generate.budget import output_budget
from callbench.generate.contract import planned_facts, written_facts
from callbench.generate.manifest import (
    BATCH_RESULT_FIELDS,
    BatchRecord,
    FailedItem,
    GenerationManifest,
    ScenarioRecord,
    UsageRecord,
    load_manifest,
    save_manifest,
)
from callbench.generate.plan import DEFAULT_SECTIONS_PER_ITEM, MAX_SECTIONS_PER_ITEM, make_plan, parse_mix
from callbench.generate.records import commit_scenario, roll_back_orphans
from callbench.generate.repair import add_usage, key_settings, request_and_repair, sha256_json
from callbench.generate.request import (
    first_messages,
    tools_payload,
)
from callbench.generate.rules import GENERATOR_RULES
from callbench.models.base import (
    InfrastructureError,
    ModelClient,
)
from callbench.models.specs import parse_spec


class GenerateError(ValueError):
    """The batch cannot start: unknown agent, an agent or bundle with problems, a bad mix, or a
    bundle with scenarios but no provenance file. The message says what to do."""


class GenerateOptions(BaseModel):
    """What to generate: ``n`` scenarios of ``agent``, the language and difficulty mixes as on the
    command line (``"hi,en"``, ``"medium=5,hard=5"``), the seed and the request budget per item."""

    agent: str
    n: int = Field(default=10, ge=1, le=200)
    languages: str | None = None
    difficulty: str | None = None
    seed: int = 0
    max_attempts: int = Field(default=3, ge=1, le=10)
    sections_per_item: int = Field(default=DEFAULT_SECTIONS_PER_ITEM, ge=1, le=MAX_SECTIONS_PER_ITEM)
    """Most document sections one scenario is asked to test (:mod:`callbench.generate.plan`)."""


class ItemResult(BaseModel):
    """The outcome of one plan item: the scenario id written, or the failure."""

    item: int
    scenario_id: str | None = None
    attempts: int
    failed: FailedItem | None = None


class GenerationOutcome(BaseModel):
    """What a batch did: its id, the ids written, the failed items, the usage (cost None when a
    price is unknown), the manifest path, and the reason the batch stopped early (None if it
    did not)."""

    batch_id: str
    written: list[str] = Field(default_factory=list)
    failed: list[FailedItem] = Field(default_factory=list)
    usage: UsageRecord = Field(default_factory=UsageRecord)
    manifest: str = ""
    stopped: str | None = None
    resumed: int = 0
    """Items of this batch already done (written or failed) by an earlier, interrupted invocation."""
    rolled_back: list[str] = Field(default_factory=list)
    """Scenario ids whose records a crash left without their file (removed; regenerated)."""
    uncovered: list[str] = Field(default_factory=list)
    """Testable sections of the document that no plan item asked for (a larger batch covers them)."""


def _prepare(bundle_dir: Path, agent_id: str) -> tuple[LoadedAgent, list[Scenario], set[str]]:
    bundle, problems = validate_path(bundle_dir)
    if bundle is None:
        listed = "; ".join(str(p) for p in problems[:5])
        raise GenerateError(f"{bundle_dir}: the bundle does not load: {listed}")
    if agent_id not in bundle.agents:
        raise GenerateError(
            f"--agent {agent_id!r}: no such agent in {bundle_dir} "
            f"(agents: {', '.join(sorted(bundle.agents)) or 'none'}; make one with callbench new-agent)"
        )
    mine = [p for p in problems if p.file.startswith(f"agents/{agent_id}/") or p.file.startswith("bundle")]
    if mine:
        listed = "\n".join(str(p) for p in mine[:10])
        raise GenerateError(
            f"agent {agent_id!r} has problems; fix them first (callbench validate):\n{listed}"
        )
    if provenance_path(bundle_dir) is None and bundle.scenarios():
        files = scenario_files(bundle)
        machine = machine_written(bundle_dir, files)
        if machine:
            raise GenerateError(
                f"{bundle_dir} has no provenance.yaml and {len(machine)} scenario file(s) written by "
                f"callbench generate without their records ({', '.join(machine[:5])}); they are not "
                "hand-authored: delete them (or record them with callbench provenance --update --made "
                "generated --model M), then generate again"
            )
        raise GenerateError(
            f"{bundle_dir} has scenarios but no provenance.yaml; record how they were made "
            f"first: callbench provenance {bundle_dir} --update --made hand_authored"
        )
    agent = bundle.agents[agent_id]
    return agent, list(agent.scenarios), {s.id for _, s in bundle.scenarios()}


def batch_id(record: dict[str, Any]) -> str:
    """``g-`` and the first 12 hex digits of SHA-256 of the batch parameters (everything the batch
    record holds before generation: agent, model, settings, seed, mixes, hashes, plan)."""
    return "g-" + sha256_json(record)[:12]


async def generate_batch(
    bundle_dir: Path,
    client: ModelClient,
    options: GenerateOptions,
    *,
    on_item: Callable[[ItemResult], None] | None = None,
) -> GenerationOutcome:
    """Generate ``options.n`` scenarios of ``options.agent`` into the bundle at ``bundle_dir``
    with ``client`` (the loop in the module docstring). ``on_item`` is called after each item.

    Crash safety: each accepted scenario is committed by
    :func:`callbench.generate.records.commit_scenario` (manifest entry, then provenance entry, then
    the file, each atomic), and the batch record is saved after every item, so an interrupted
    batch leaves every scenario file with its records. The same command resumes it: the batch id is
    a function of the parameters, items already written or failed are skipped (their scenarios
    re-enter the requests as they did the first time, so the remaining requests are the ones an
    uninterrupted batch sends), and records left by a crash before their file are rolled back
    (:func:`callbench.generate.records.roll_back_orphans`).

    Raises :class:`GenerateError` before any request when the batch cannot start. A provider
    failure (:class:`InfrastructureError` after the client's retries, or a replay-only cache miss)
    stops the batch: what was written so far is recorded and ``stopped`` gives the reason.
    Cancellation (Ctrl-C) propagates after the item in progress is abandoned; everything
    committed before it stays recorded.
    """
    aid = options.agent
    rolled_back = roll_back_orphans(bundle_dir)
    agent, others, taken = _prepare(bundle_dir, aid)
    try:
        rendered = render_instructions(agent)
    except ValueError as e:
        raise GenerateError(f"agent {aid!r}: the operating document does not render: {e}") from None
    try:
        langs = parse_mix(options.languages, options.n, None, "--languages")
        diffs = parse_mix(options.difficulty, options.n, ("medium", "hard"), "--difficulty")
        untested = _untested_by_hand(bundle_dir, agent)
        plan = make_plan(agent, rendered, n=options.n, seed=options.seed, languages=langs, difficulty=diffs,
                         sections_per_item=options.sections_per_item, untested=untested)
    except ValueError as e:
        raise GenerateError(str(e)) from None
    provider, model = parse_spec(client.spec)
    params: dict[str, Any] = {
        "agent": aid,
        "model": client.spec,
        "provider": provider,
        "settings": key_settings(client),
        "seed": options.seed,
        "n": options.n,
        "languages": dict(sorted(_counts(plan, "language").items())),
        "difficulty": dict(sorted(_counts(plan, "difficulty").items())),
        "max_attempts": options.max_attempts,
        "document_sha256": hashlib.sha256(rendered.encode("utf-8")).hexdigest(),
        "tools_sha256": sha256_json(tools_payload(agent)),
        "rules_sha256": hashlib.sha256(GENERATOR_RULES.encode("utf-8")).hexdigest(),
        "plan": [i.model_dump(mode="json") for i in plan.items],
    }
    bid = batch_id(params)
    manifest = load_manifest(bundle_dir)
    batch = manifest.batches.get(bid) or BatchRecord.model_validate(params)
    batch.failed = [f for f in batch.failed if f.reason != "infrastructure"]  # retried on resume
    batch.uncovered = list(plan.uncovered)
    mine = {
        r.item: sid for sid, r in manifest.scenarios.items()
        if r.batch == bid and (sid in taken or r.review.status == "rejected")
    }
    batch.written = [mine[i] for i in sorted(mine)]
    done_failed = {f.item for f in batch.failed}
    by_id = {s.id: s for s in others}
    others = [s for s in others if s.id not in set(mine.values())]  # re-added in item order below
    outcome = GenerationOutcome(batch_id=bid, resumed=len(mine) + len(done_failed), rolled_back=rolled_back,
                                uncovered=list(plan.uncovered))
    outcome.usage = batch.usage
    existing = sorted((s.id, s.title) for s in others)
    budgets = {lang: output_budget(others, lang) for lang in sorted({i.language for i in plan.items})}
    generation = _generation(batch, model)
    for item in plan.items:
        if item.index in mine:
            done = by_id.get(mine[item.index])
            if done is not None:  # None: rejected in review since
                others.append(done)
                existing = sorted([*existing, (done.id, done.title)])
            continue
        if item.index in done_failed:
            continue
        messages = first_messages(agent, rendered, plan, item, existing)
        try:
            data, records, last, reason = await request_and_repair(
                client, bundle_dir, agent, messages, bid, item, options.max_attempts, others, taken,
                budgets[item.language],
            )
        except InfrastructureError as err:
            outcome.stopped = f"item {item.index + 1}: {err}"
            batch.failed.append(
                FailedItem(item=item.index, reason="infrastructure", attempts=0, last_problems=[str(err)])
            )
            break
        for r in records:
            outcome.usage = add_usage(outcome.usage, r.usage)
        batch.usage = outcome.usage
        if data is None:
            failed = FailedItem(item=item.index, reason=reason, attempts=len(records), last_problems=last)
            batch.failed.append(failed)
            _note_written_mix(batch, manifest)
            manifest.batches[bid] = batch
            save_manifest(bundle_dir, manifest)
            result = ItemResult(item=item.index, attempts=len(records), failed=failed)
        else:
            sid = str(data["id"])
            rel = f"agents/{aid}/scenarios/{sid}.yaml"
            text = scenario_text(data)
            manifest.scenarios[sid] = ScenarioRecord(
                batch=bid,
                item=item.index,
                file=rel,
                planned=planned_facts(item),
                written=written_facts(data, agent),
                attempts=len(records),
                audit=records,
                prompt_sha256=records[0].request_sha256,
                output_sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
            )
            batch.written.append(sid)
            _note_written_mix(batch, manifest)
            manifest.batches[bid] = batch
            commit_scenario(bundle_dir, manifest, sid, rel, text, generation, batch.model)
            others.append(Scenario.model_validate(data))
            taken.add(sid)
            existing = sorted([*existing, (sid, str(data.get("title", "")))])
            result = ItemResult(item=item.index, scenario_id=sid, attempts=len(records))
        if on_item is not None:
            on_item(result)
    batch.usage = outcome.usage
    _note_written_mix(batch, manifest)
    manifest.batches[bid] = batch
    outcome.written, outcome.failed = list(batch.written), list(batch.failed)
    outcome.manifest = str(save_manifest(bundle_dir, manifest))
    return outcome


def _untested_by_hand(bundle_dir: Path, agent: LoadedAgent) -> list[str]:
    """The sections of ``agent``'s document that no scenario outside ``generation.yaml`` tests.
    Generated scenarios are left out so that a batch's plan does not change as the batch writes
    (a resumed batch must find the same plan, hence the same batch id)."""
    try:
        generated = set(load_manifest(bundle_dir).scenarios)
    except ValueError:
        generated = set()
    kept = [s for s in agent.scenarios if s.id not in generated]
    return agent_coverage(agent.model_copy(update={"scenarios": kept})).unexercised_sections


def _note_written_mix(batch: BatchRecord, manifest: GenerationManifest) -> None:
    langs: dict[str, int] = {}
    diffs: dict[str, int] = {}
    for sid in batch.written:
        w = manifest.scenarios[sid].written if sid in manifest.scenarios else None
        if w is not None:
            langs[w.language] = langs.get(w.language, 0) + 1
            diffs[w.difficulty] = diffs.get(w.difficulty, 0) + 1
    batch.written_languages = dict(sorted(langs.items()))
    batch.written_difficulty = dict(sorted(diffs.items()))


def _counts(plan: Any, field: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in plan.items:
        out[getattr(i, field)] = out.get(getattr(i, field), 0) + 1
    return out


def _generation(batch: BatchRecord, model: str) -> Generation:
    """The provenance ``generation`` record of the scenarios of ``batch``."""
    return Generation(
        model=model or batch.model,
        provider=batch.provider,
        settings=batch.settings,
        seed=batch.seed,
        notes=f"callbench generate, {batch.model}; generation.yaml batch {batch_id_of(batch)}",
    )


def batch_id_of(batch: BatchRecord) -> str:
    """The id of ``batch`` (recomputed from its parameters, as :func:`generate_batch` made it)."""
    params = batch.model_dump(mode="json", exclude=set(BATCH_RESULT_FIELDS))
    return batch_id(params)
