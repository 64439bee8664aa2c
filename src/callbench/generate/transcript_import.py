"""``callbench import transcript``: a real call drafted into an unreviewed scenario.

Order of work, so that no personal data leaves the file: the transcript is read
(:func:`~callbench.generate.transcript.read_transcript`, every supported shape) and its PII replaced
(:func:`~callbench.generate.transcript.redact`: phones, e-mails, card numbers, the names the user
lists) *first*; everything after sees only the replaced call. The fixtures and action checks are
drafted from its tool calls (:func:`~callbench.generate.transcript.draft_fixtures`, each check's
description starting ``FOR REVIEW:``). The generator model then gets the generator's rules, the
agent's operating document and tools, the replaced call and the drafted fixtures and checks, and
writes the rest of the scenario: the caller's brief (context, reason, known and unknown facts, plan
steps with trigger and meaning, language, script, date and time) from the caller's turns, the goal,
criteria and a reference path. The answer goes through the generator's audit-and-repair loop
(:func:`callbench.generate.repair.request_and_repair`: schema, ids, near-duplicates, ``callbench
validate`` with the reference replay, the run audit), with the drafted fixtures and checks put into
every answer as drafted, so what is validated is what is written.

A draft that passes is committed like a generated scenario (:func:`callbench.generate.records.
commit_scenario`): a ``generation.yaml`` batch ``t-<hash>`` (its one plan entry records the
source, the SHA-256 of the *replaced* transcript, the counts of values replaced and the called
tools the agent lacks; never a replaced value or a listed name), a ``provenance.yaml`` entry
(``made: generated``, review ``unreviewed``), then the file; ``callbench review`` lists it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from callbench.bundle.models import LoadedAgent
from callbench.bundle.provenance import Generation
from callbench.bundle.render import render_instructions
from callbench.generate.audit import scenario_text
from callbench.generate.budget import output_budget
from callbench.generate.contract import planned_facts, written_facts
from callbench.generate.generator import GenerateError, _prepare, batch_id
from callbench.generate.manifest import (
    BatchRecord,
    FailedItem,
    ScenarioRecord,
    UsageRecord,
    load_manifest,
    save_manifest,
)
from callbench.generate.plan import PlanItem
from callbench.generate.records import commit_scenario, roll_back_orphans
from callbench.generate.repair import add_usage, key_settings, request_and_repair, sha256_json
from callbench.generate.request import PLAN_ITEM_MARK, plan_item_contract, tools_payload
from callbench.generate.rules import GENERATOR_RULES
from callbench.generate.transcript import REVIEW_MARK, Transcript, draft_fixtures, read_transcript, redact
from callbench.models.base import ChatMessage, ModelClient
from callbench.models.specs import parse_spec

MADE_BY = "callbench import transcript"
JUDGED = ("critical", "diagnostic", "importance", "after", "applies_after", "count")
"""Fields of a drafted action check the model may set (the rest is the recorded call's)."""
CLEAN_CHANNEL = "a clean channel (no channel events)"


class ImportOptions(BaseModel):
    """What to import: the transcript at ``path`` as a scenario of ``agent``; ``pii_names``: names
    to replace (besides phones, e-mails and cards); ``scenario_id``: the id to use (None: the
    model's); ``language``: the call's BCP 47 tag (None: the agent's first language)."""

    path: Path
    agent: str
    pii_names: list[str] = Field(default_factory=list)
    scenario_id: str | None = None
    language: str | None = None
    difficulty: str = "medium"
    max_attempts: int = Field(default=3, ge=1, le=10)


class ImportOutcome(BaseModel):
    """What the import did: the scenario id written (None when the draft failed, then ``failed``
    holds the last problems), the batch id, the PII replaced by kind, the called tools the agent
    does not have (no fixture or check drafted), the number of drafted checks and the usage."""

    batch_id: str
    scenario_id: str | None = None
    file: str | None = None
    failed: FailedItem | None = None
    replaced: dict[str, int] = Field(default_factory=dict)
    unknown_tools: list[str] = Field(default_factory=list)
    drafted_checks: int = 0
    usage: UsageRecord = Field(default_factory=UsageRecord)


def call_text(t: Transcript) -> str:
    """The (replaced) call as numbered lines: ``CALLER: ...``, ``AGENT: ...`` and, per tool call,
    ``AGENT calls name({...}) -> result``."""
    lines: list[str] = []
    for turn in t.turns:
        who = "CALLER" if turn.role == "caller" else "AGENT"
        if turn.text.strip():
            lines.append(f"{who}: {turn.text.strip()}")
        for c in turn.tool_calls:
            args = json.dumps(c.arguments, ensure_ascii=False, sort_keys=True)
            result = json.dumps(c.result, ensure_ascii=False, sort_keys=True)
            lines.append(f"AGENT calls {c.name}({args}) -> {result}")
    return "\n".join(f"{n}. {line}" for n, line in enumerate(lines, 1))


def user_message(agent: LoadedAgent, rendered: str, t: Transcript, fixtures: dict[str, Any],
                 checks: list[dict[str, Any]], item: PlanItem, scenario_id: str | None) -> str:
    """The request for the draft: the agent, its rendered document and tools, the replaced call,
    the drafted fixtures and checks (kept as given), what to write, and the contract line."""
    payload = tools_payload(agent)
    dump = json.dumps
    wanted = f"Use the id {scenario_id!r}." if scenario_id else "Choose a new id."
    return (
        f"# Agent\nid: {agent.config.id}\nname: {agent.config.name}\ndomain: {agent.config.domain}\n"
        f"direction: {agent.config.direction}\nlanguages: {', '.join(agent.config.languages)}\n\n"
        f"# Operating document (rendered)\n<document>\n{rendered}\n</document>\n\n"
        f"# Tools (JSON Schema parameters)\n{dump(payload['tools'], ensure_ascii=False, indent=1)}\n\n"
        "# Call-ending tools and their success conditions\n"
        f"{dump(payload['call_ending_tools'], ensure_ascii=False, indent=1)}\n\n"
        "# A real call (personal data already replaced by placeholders; keep the placeholders)\n"
        f"<call>\n{call_text(t)}\n</call>\n\n"
        "# Fixtures and action checks from the call's tool calls (kept exactly as given)\n"
        f"fixtures: {dump(fixtures, ensure_ascii=False, sort_keys=True)}\n"
        f"action_checks: {dump(checks, ensure_ascii=False, sort_keys=True)}\n\n"
        "# This request\n"
        "Write the scenario this call is a test of, so that the same call can be replayed against the "
        "agent. The brief comes from the CALLER lines only: context and reason (why they called), "
        "known_facts (every value they gave, with its placeholder), unknown_facts (what they asked "
        "and did not know), and one plan step per caller turn after the first agent turn, its "
        "trigger what the agent did that made the step due and its meaning what the caller got "
        f"across. Set brief.language to {item.language}, the script it is written in, and a "
        "datetime with a UTC offset. The goal says what a correct call achieves. The reference path "
        "is one correct call that makes the tool calls above with exactly their arguments, so the "
        f"fixtures answer it. Action checks whose description starts with {REVIEW_MARK!r} are drafts "
        "a person will confirm: keep their id, tool, args and description; set critical (and "
        "diagnostic outcome_reached) on the check(s) that show the caller got what they called for, "
        f"and importance, after, count as the call shows; you may add other checks. {wanted} "
        f"Difficulty {item.difficulty}; a clean "
        "channel.\n"
        f"{PLAN_ITEM_MARK}{dump(plan_item_contract(item), ensure_ascii=False, sort_keys=True)}\n"
    )


def _adjust(fixtures: dict[str, Any], checks: list[dict[str, Any]], scenario_id: str | None) -> Any:
    drafted = {c["id"] for c in checks}

    def adjust(data: dict[str, Any]) -> None:
        # the recorded call is the evidence: its fixtures and the drafted checks' tool, arguments
        # and description win over the model's; how much a check weighs is the model's to judge
        have = data.get("fixtures")
        data["fixtures"] = {**(have if isinstance(have, dict) else {}), **json.loads(json.dumps(fixtures))}
        given = [c for c in data.get("action_checks") or [] if isinstance(c, dict)]
        judged = {c.get("id"): c for c in given if c.get("id") in drafted}
        out = []
        for check in json.loads(json.dumps(checks)):
            mine = judged.get(check["id"], {})
            out.append({**check, **{k: mine[k] for k in JUDGED if k in mine}})
        data["action_checks"] = [*out, *(c for c in given if c.get("id") not in drafted)]
        if scenario_id:
            data["id"] = scenario_id

    return adjust


async def import_transcript(bundle_dir: Path, client: ModelClient, options: ImportOptions) -> ImportOutcome:
    """Draft the transcript ``options.path`` into an unreviewed scenario of ``options.agent`` in the
    bundle at ``bundle_dir`` (module docstring). Raises :class:`~callbench.generate.transcript.
    TranscriptError` for a transcript that cannot be read, :class:`GenerateError` when the agent or
    bundle cannot take a scenario or the call is already imported, ``InfrastructureError`` from the
    client, ``OSError`` when a write fails."""
    # replaced before anything else: nothing below sees the original values
    call, replaced = redact(read_transcript(options.path), options.pii_names)
    roll_back_orphans(bundle_dir)
    agent, others, taken = _prepare(bundle_dir, options.agent)
    try:
        rendered = render_instructions(agent)
    except ValueError as e:
        raise GenerateError(f"agent {options.agent!r}: the operating document does not render: {e}") from None
    if not call.caller_lines():
        raise GenerateError(f"{options.path}: the call has no caller turn with text; "
                            "nothing to draft a brief from")
    language = options.language or agent.config.languages[0]
    if language not in agent.config.languages:
        raise GenerateError(f"--language {language!r}: agent {options.agent!r} serves "
                            f"{', '.join(agent.config.languages)}")
    fixtures, checks, unknown = draft_fixtures(call, {t.name for t in agent.config.tools},
                                               {e.tool for e in agent.config.call_ending_tools})
    item = PlanItem(index=0, language=language, difficulty=options.difficulty, sections=[],
                    tools=sorted({c.name for c in call.tool_calls()} - set(unknown)),
                    failure_mode="what happened in the recorded call", channel=CLEAN_CHANNEL)
    call_sha = sha256_json(call.model_dump(mode="json"))
    provider, model = parse_spec(client.spec)
    source = {"source": "transcript", "transcript_sha256": call_sha, "replaced": replaced,
              "unknown_tools": unknown, "scenario_id": options.scenario_id, **item.model_dump(mode="json")}
    params: dict[str, Any] = {
        "agent": options.agent, "model": client.spec, "provider": provider, "settings": key_settings(client),
        "seed": 0, "n": 1, "languages": {language: 1}, "difficulty": {options.difficulty: 1},
        "max_attempts": options.max_attempts,
        "document_sha256": hashlib.sha256(rendered.encode("utf-8")).hexdigest(),
        "tools_sha256": sha256_json(tools_payload(agent)),
        "rules_sha256": hashlib.sha256(GENERATOR_RULES.encode("utf-8")).hexdigest(),
        "plan": [source],
    }
    bid = "t-" + batch_id(params)[2:]
    manifest = load_manifest(bundle_dir)
    # the same call (whatever the model or id asked for) is one scenario until it is rejected
    same = {b for b, rec in manifest.batches.items() if rec.agent == options.agent and rec.plan
            and rec.plan[0].get("transcript_sha256") == call_sha}
    done = sorted(sid for sid, r in manifest.scenarios.items()
                  if r.batch in same and r.review.status != "rejected")
    if done:
        raise GenerateError(f"{options.path}: this call is already imported as {done[0]}; "
                            "reject it in callbench review to import it again")
    outcome = ImportOutcome(batch_id=bid, replaced=replaced, unknown_tools=unknown,
                            drafted_checks=len(checks))
    messages = [ChatMessage(role="system", content=GENERATOR_RULES),
                ChatMessage(role="user", content=user_message(agent, rendered, call, fixtures, checks, item,
                                                              options.scenario_id))]
    data, records, last, reason = await request_and_repair(
        client, bundle_dir, agent, messages, bid, item, options.max_attempts, list(others), set(taken),
        output_budget(list(others), language), adjust=_adjust(fixtures, checks, options.scenario_id))
    for r in records:
        outcome.usage = add_usage(outcome.usage, r.usage)
    batch = manifest.batches.get(bid) or BatchRecord.model_validate(params)
    batch.usage = outcome.usage
    if data is None:
        outcome.failed = FailedItem(item=0, reason=reason, attempts=len(records), last_problems=last)
        batch.failed = [outcome.failed]
        manifest.batches[bid] = batch
        save_manifest(bundle_dir, manifest)
        return outcome
    sid = str(data["id"])
    rel = f"agents/{options.agent}/scenarios/{sid}.yaml"
    text = scenario_text(data)
    manifest.scenarios[sid] = ScenarioRecord(
        batch=bid, item=0, file=rel, planned=planned_facts(item), written=written_facts(data, agent),
        attempts=len(records), audit=records, prompt_sha256=records[0].request_sha256,
        output_sha256=hashlib.sha256(text.encode("utf-8")).hexdigest())
    batch.written, batch.failed = [sid], []
    batch.written_languages = {str(data.get("language")): 1}
    batch.written_difficulty = {str(data.get("difficulty")): 1}
    manifest.batches[bid] = batch
    generation = Generation(model=model or client.spec, provider=provider, settings=batch.settings, seed=0,
                            notes=f"{MADE_BY}, {client.spec}; generation.yaml batch {bid}")
    commit_scenario(bundle_dir, manifest, sid, rel, text, generation, client.spec, made_by=MADE_BY)
    outcome.scenario_id, outcome.file = sid, rel
    return outcome
