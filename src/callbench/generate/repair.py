"""The request / audit / repair loop of one plan item.

The answer to each request is checked against the scenario JSON Schema, its language, difficulty
and channel against its plan item (:mod:`.contract`), its id against the bundle's ids, its intent
and facts against the agent's scenarios (:mod:`.duplicates`) and the whole file by the audit
(:mod:`.audit`). Located problems go back to the model with its answer in
a repair request (:func:`.request.repair_messages`), at most ``max_attempts`` requests in all.
Every request carries ``RequestContext(role="generator", episode_id="generate:<batch>:<item>",
turn=item, attempt=n)``, so the response cache gives each item and attempt its own slot, and an
output budget sized from the expected scenario (:mod:`.budget`); a fenced answer is unwrapped and a
cut-off one gets its own problem and a larger budget (:mod:`.answer`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from callbench.bundle.loader import Problem
from callbench.bundle.models import LoadedAgent, Scenario
from callbench.generate.answer import read_answer
from callbench.generate.audit import audit_candidate
from callbench.generate.budget import repair_budget
from callbench.generate.contract import plan_problems, section_problems
from callbench.generate.duplicates import near_duplicate
from callbench.generate.manifest import AttemptRecord, UsageRecord
from callbench.generate.plan import PlanItem
from callbench.generate.request import SCHEMA_NAME, repair_messages, scenario_schema
from callbench.models.base import (
    ChatMessage,
    ModelClient,
    ModelOutputError,
    ModelRequest,
    RequestContext,
    Usage,
)
from callbench.models.cache import NON_KEY_SETTINGS, canonical_json


def sha256_json(value: Any) -> str:
    """SHA-256 (hex) of canonical JSON (sorted keys, no whitespace, UTF-8)."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def key_settings(client: ModelClient) -> dict[str, Any]:
    """The client's settings that shape its output (no endpoint, header or retry settings)."""
    return client.settings.model_dump(mode="json", exclude=set(NON_KEY_SETTINGS), exclude_none=True)


def _usage(u: Usage | None) -> UsageRecord:
    if u is None:
        return UsageRecord()
    return UsageRecord(input_tokens=u.input_tokens, output_tokens=u.output_tokens, cost_usd=u.cost_usd)


def add_usage(a: UsageRecord, b: UsageRecord) -> UsageRecord:
    """The sum of two usage records (cost None when either is unknown)."""
    cost = None if a.cost_usd is None or b.cost_usd is None else round(a.cost_usd + b.cost_usd, 8)
    return UsageRecord(
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cost_usd=cost,
    )


def _problem(code: str, message: str, file: str, path: str = "") -> Problem:
    return Problem(file=file, path=path, code=code, message=message)


async def request_and_repair(
    client: ModelClient,
    bundle_dir: Path,
    agent: LoadedAgent,
    messages: list[ChatMessage],
    bid: str,
    plan_item: PlanItem,
    max_attempts: int,
    others: list[Scenario],
    taken: set[str],
    budget: int,
    adjust: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[dict[str, Any] | None, list[AttemptRecord], list[str], str]:
    """Run the loop of one item (module docstring). Returns (the accepted scenario data or None,
    one record per request, the last problems as text, the failure reason: ``output``, ``audit``
    or ``near_duplicate``; empty when accepted). The scenario must be what ``plan_item`` asked for
    (:func:`callbench.generate.contract.plan_problems`). ``budget``: the first request's output
    budget (:func:`callbench.generate.budget.output_budget`; the client's ``max_tokens`` wins).
    ``adjust``, when given, edits each answer that is a JSON object in place before any check (the
    transcript import puts the recorded call's fixtures and checks in). Raises InfrastructureError
    from the client (a provider failure after its retries, or a replay-only cache miss)."""
    schema = scenario_schema()
    aid = agent.config.id
    item = plan_item.index
    records: list[AttemptRecord] = []
    last: list[str] = []
    reason = "audit"
    given = client.settings.max_tokens
    budget = given or budget
    for attempt in range(max_attempts):
        ctx = RequestContext(
            role="generator", episode_id=f"generate:{bid}:{item}", agent_id=aid, turn=item, attempt=attempt
        )
        request = ModelRequest(
            messages=messages, response_schema=schema, response_schema_name=SCHEMA_NAME, context=ctx,
            max_output_tokens=budget,
        )
        req_hash = sha256_json([m.model_dump(mode="json") for m in messages])
        answer: str | None = None
        usage: Usage | None = None
        finish: str | None = None
        client_error: str | None = None
        problems: list[Problem] = []
        try:
            response = await client.complete(request)
            answer, usage, finish = response.content, response.usage, response.finish_reason
        except ModelOutputError as err:
            answer, usage, client_error = err.raw, err.usage, str(err)
        sent = budget
        read = read_answer(answer, schema, usage=usage, finish_reason=finish, budget=sent,
                           client_error=client_error)
        data: Any = read.data
        for code, message in read.problems:
            problems.append(_problem(code, message, "(model output)"))
            reason = "output"
        if read.truncated:
            if given is None:
                budget = repair_budget(budget)
            else:
                problems.append(_problem(
                    "output.truncated", f"max_tokens {given:,} in the generator's settings is below this "
                    "scenario's size; raise it (or remove it: the budget then follows the expected "
                    "scenario size)", "(model output)"))
        if data is not None and not isinstance(data, dict):
            problems = [_problem("output.invalid", "the answer is not a JSON object", "(model output)")]
        if not problems:
            data["agent"] = aid
            if adjust is not None:
                adjust(data)
            sid = data.get("id")
            sfile = f"agents/{aid}/scenarios/{sid}.yaml"
            if isinstance(sid, str) and sid in taken:
                problems.append(
                    _problem(
                        "generate.duplicate_id",
                        f"scenario id {sid!r} is already used in the bundle; choose a new id",
                        sfile,
                        "id",
                    )
                )
            try:
                scen = Scenario.model_validate(data)
            except ValidationError:
                scen = None
            dup = near_duplicate(scen, others) if scen is not None else None
            if dup is not None:
                problems.append(
                    _problem(
                        "generate.near_duplicate",
                        f"same intent and facts as scenario {dup.scenario_id!r} (intent similarity "
                        f"{dup.intent:.2f}, facts {dup.facts:.2f}); write a call with another intent "
                        "or other facts",
                        sfile,
                    )
                )
            problems += plan_problems(plan_item, data, sfile)
            problems += section_problems(plan_item, agent, data, sfile)
            problems += await audit_candidate(bundle_dir, aid, data)
            codes = {p.code for p in problems}
            reason = "near_duplicate" if codes == {"generate.near_duplicate"} else "audit"
        out_hash = hashlib.sha256(answer.encode("utf-8")).hexdigest() if answer else None
        last = [str(p) for p in problems]
        records.append(
            AttemptRecord(
                attempt=attempt,
                request_sha256=req_hash,
                output_sha256=out_hash,
                problems=last,
                notes=read.notes,
                output_budget=sent,
                usage=_usage(usage),
            )
        )
        if not problems:
            return data, records, [], ""
        messages = repair_messages(messages, answer, last)
    return None, records, last, reason
