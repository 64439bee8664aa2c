"""The request / audit / repair loop of one plan item (issue 13 item 3).

The answer to each request is checked against the scenario JSON Schema, its language, difficulty
and channel against its plan item (:mod:`.contract`), its id against the bundle's ids, its intent
and facts against the agent's scenarios (:mod:`.duplicates`) and the whole file by the audit
(:mod:`.audit`). Located problems go back to the model with its answer in
a repair request (:func:`.request.repair_messages`), at most ``max_attempts`` requests in all.
Every request carries ``RequestContext(role="generator", episode_id="generate:<batch>:<item>",
turn=item, attempt=n)``, so the response cache gives each item and attempt its own slot.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from callbench.bundle.loader import Problem
from callbench.bundle.models import LoadedAgent, Scenario
from callbench.generate.audit import audit_candidate
from callbench.generate.contract import plan_problems
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
from callbench.models.output import check_json_output


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
) -> tuple[dict[str, Any] | None, list[AttemptRecord], list[str], str]:
    """Run the loop of one item (module docstring). Returns (the accepted scenario data or None,
    one record per request, the last problems as text, the failure reason: ``output``, ``audit``
    or ``near_duplicate``; empty when accepted). The scenario must be what ``plan_item`` asked for
    (:func:`callbench.generate.contract.plan_problems`). Raises InfrastructureError from the client (a
    provider failure after its retries, or a replay-only cache miss)."""
    schema = scenario_schema()
    aid = agent.config.id
    item = plan_item.index
    records: list[AttemptRecord] = []
    last: list[str] = []
    reason = "audit"
    for attempt in range(max_attempts):
        ctx = RequestContext(
            role="generator", episode_id=f"generate:{bid}:{item}", agent_id=aid, turn=item, attempt=attempt
        )
        request = ModelRequest(
            messages=messages, response_schema=schema, response_schema_name=SCHEMA_NAME, context=ctx
        )
        req_hash = sha256_json([m.model_dump(mode="json") for m in messages])
        answer: str | None = None
        usage: Usage | None = None
        problems: list[Problem] = []
        data: Any = None
        try:
            response = await client.complete(request)
            answer, usage = response.content, response.usage
            data = check_json_output(answer, schema, usage=usage)
        except ModelOutputError as err:
            answer = err.raw if answer is None else answer
            usage = err.usage or usage
            problems = [_problem("output.invalid", str(err), "(model output)")]
            reason = "output"
        if data is not None and not isinstance(data, dict):
            problems = [_problem("output.invalid", "the answer is not a JSON object", "(model output)")]
        if not problems:
            data["agent"] = aid
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
                usage=_usage(usage),
            )
        )
        if not problems:
            return data, records, [], ""
        messages = repair_messages(messages, answer, last)
    return None, records, last, reason
