"""The task judge and the conversation judge: requests, one retry, and judge-error handling.

Both judges go through any :class:`~callbench.models.base.ModelClient` with JSON output
constrained to a schema that enumerates the expected item ids (``request.response_schema``) and
``RequestContext`` role ``task_judge`` / ``conversation_judge``.

Failure handling: a reply that cannot be used (not JSON, an unknown label, a rating
outside 1..5, a cited index not in the trace, a missing item, or a :class:`ModelOutputError`) gets
one more attempt, with the assistant's reply and the list of problems appended to the
conversation. Items usable in the first reply are kept; the retry fills only the rest. Whatever is
still unusable is recorded as :attr:`Label.JUDGE_ERROR` with the reason: excluded from the scores
and counted, never scored as not met. An :class:`InfrastructureError` (adapters already retried
it) gets one more attempt too (not for HTTP 401/403/404), then turns every pending item into a
judge error with the reason; an episode whose judged items mostly errored is *not graded*
(``scoring.not_graded_reason``), never scored on what is left.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from callbench.bundle.models import Criterion, Pillar, Scenario
from callbench.grade.models import GradedItem, JudgeRequestTiming, Label
from callbench.grade.parse import ItemKey, ItemReply, ReplyError, key_str, parse_judge_reply
from callbench.grade.prompts import (
    conversation_judge_messages,
    response_schema,
    retry_message,
    task_judge_messages,
)
from callbench.grade.rubric import DEFAULT_RUBRIC, Rubric
from callbench.models.base import (
    ChatMessage,
    InfrastructureError,
    ModelClient,
    ModelOutputError,
    ModelRequest,
    RequestContext,
    Role,
    Usage,
)
from callbench.models.output_limits import safe_response, safe_text
from callbench.models.timing import ResponseTiming
from callbench.trace import Trace

MAX_ATTEMPTS = 2
"""One request plus one retry; a provider failure is retried the same way,
except authentication and not-found errors (``FATAL_STATUS``), which cannot pass by asking again."""
FATAL_STATUS = frozenset({401, 403, 404})
REASK_CHARS = 300
"""The length kept of the problem that made a judge ask again (``JudgeOutcome.reask``)."""


class JudgeOutcome(BaseModel):
    """Usable items by ``"<kind>.<id>"``, the judge-error reason of every other item, usage, and the
    number of requests made."""

    items: dict[str, ItemReply] = Field(default_factory=dict)
    errors: dict[str, str] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    attempts: int = 0
    timings: list[JudgeRequestTiming] = Field(default_factory=list)
    reask: str | None = None
    """The first problem of the first reply when it was asked again (:data:`REASK_CHARS` at most)."""


def _timing(ask: int, timing: ResponseTiming | None, cached: bool) -> list[JudgeRequestTiming]:
    """The request's timing as a grade keeps it; none when its client timed nothing."""
    if timing is None:
        return []
    return [JudgeRequestTiming(ask=ask, waited_s=timing.waited_s, first_token_s=timing.first_token_s,
                               streamed=timing.streamed, retries=max(0, len(timing.attempts) - 1),
                               replayed=cached)]


async def ask_judge(
    client: ModelClient,
    messages: list[ChatMessage],
    expected: list[ItemKey],
    valid_indices: set[int],
    schema: dict[str, object],
    context: RequestContext,
    *,
    schema_name: str,
    max_attempts: int = MAX_ATTEMPTS,
) -> JudgeOutcome:
    """Send the judge request, parse, retry once with the problems appended; never raises for
    judge failures (they become ``errors``)."""
    out = JudgeOutcome()
    convo = list(messages)
    pending = [key_str(k) for k in expected]
    last_errors: dict[str, str] = {}
    for attempt in range(max_attempts):
        ctx = context.model_copy(update={"attempt": attempt})
        out.attempts += 1
        try:
            resp = safe_response(await client.complete(
                ModelRequest(
                    messages=convo, response_schema=schema, response_schema_name=schema_name, context=ctx
                )
            ))
        except InfrastructureError as e:
            if e.status not in FATAL_STATUS and attempt < max_attempts - 1:
                out.reask = out.reask or safe_text(f"judge infrastructure error: {e}")[:REASK_CHARS]
                continue  # the judge's provider failed: ask again (the adapter already retried)
            reason = f"judge infrastructure error: {e}"
            for k in pending:
                out.errors[k] = reason
            return out
        except ModelOutputError as e:
            out.timings += _timing(attempt, e.timing, False)
            content: str | None = None
            problems = [f"the reply violated the output format: {safe_text(str(e))}"]
            last_errors = {k: problems[0] for k in pending}
        else:
            out.usage = out.usage + resp.usage
            out.timings += _timing(attempt, resp.timing, resp.cached)
            content = resp.content
            try:
                parsed = parse_judge_reply(content, expected, valid_indices)
            except ReplyError as e:
                problems = [str(e)]
                last_errors = {k: str(e) for k in pending}
            else:
                for k in pending:
                    if k in parsed.items:
                        out.items[k] = parsed.items[k]
                last_errors = {
                    k: parsed.errors.get(k, f"{k}: missing from the reply")
                    for k in pending
                    if k not in out.items
                }
                problems = list(last_errors.values())
        pending = [k for k in pending if k not in out.items]
        if not pending:
            return out
        if out.reask is None and attempt < max_attempts - 1:
            out.reask = safe_text(problems[0] if problems else "no usable reply")[:REASK_CHARS]
        said = [ChatMessage(role="assistant", content=content)] if content and content.strip() else []
        convo = [*convo, *said, retry_message(problems)]
    for k in pending:
        out.errors[k] = (
            f"judge error after {out.attempts} attempt(s): {last_errors.get(k, 'no usable reply')}"
        )
    return out


def _context(trace: Trace, role: Role) -> RequestContext:
    return RequestContext(
        role=role, episode_id=trace.episode_id, agent_id=trace.agent_id, scenario_id=trace.scenario_id
    )


def _criterion_item(c: Criterion, key: str, outcome: JudgeOutcome) -> GradedItem:
    source = "task_criterion" if c.pillar == Pillar.TASK else "conversation_criterion"
    got = outcome.items.get(key)
    if got is None:
        return GradedItem(
            id=c.id,
            source=source,
            pillar=c.pillar,
            diagnostic=c.diagnostic,
            weight=c.importance,
            label=Label.JUDGE_ERROR,
            reason=outcome.errors.get(key, "judge error"),
        )
    return GradedItem(
        id=c.id,
        source=source,
        pillar=c.pillar,
        diagnostic=c.diagnostic,
        weight=c.importance,
        label=got.label,
        reason=got.reason,
        cited_messages=got.cited_messages,
    )


def _indices(trace: Trace) -> set[int]:
    return {m.index for m in trace.messages}


async def run_task_judge(
    trace: Trace, scenario: Scenario, client: ModelClient
) -> tuple[list[GradedItem], JudgeOutcome]:
    """Label the scenario's TASK criteria. No request is made when there are none."""
    criteria = [c for c in scenario.criteria if c.pillar == Pillar.TASK]
    if not criteria:
        return [], JudgeOutcome()
    expected: list[ItemKey] = [("criteria", c.id) for c in criteria]
    schema = response_schema([c.id for c in criteria], [], sorted(_indices(trace)))
    outcome = await ask_judge(
        client,
        task_judge_messages(trace, scenario.goal, criteria),
        expected,
        _indices(trace),
        schema,
        _context(trace, "task_judge"),
        schema_name="task_judgement",
    )
    return [_criterion_item(c, key_str(("criteria", c.id)), outcome) for c in criteria], outcome


async def run_conversation_judge(
    trace: Trace, scenario: Scenario, client: ModelClient, rubric: Rubric = DEFAULT_RUBRIC
) -> tuple[list[GradedItem], JudgeOutcome]:
    """Label the scenario's CONVERSATION criteria and give the rubric's ratings.

    Only the conversation criteria, the language and script, the rubric and the trace are passed
    to the prompt builder: the goal, action checks and task criteria never reach this judge.
    Ratings that do not apply by the trace (:meth:`RatingSpec.applicable`) are recorded as not
    applicable without asking.
    """
    criteria = [c for c in scenario.criteria if c.pillar == Pillar.CONVERSATION]
    asked = []
    skipped: dict[str, str] = {}
    for r in rubric.ratings:
        ok, why = r.applicable(trace)
        if ok:
            asked.append(r)
        else:
            skipped[r.id] = why
    outcome = JudgeOutcome()
    if criteria or asked:
        expected: list[ItemKey] = [("criteria", c.id) for c in criteria] + [("ratings", r.id) for r in asked]
        schema = response_schema([c.id for c in criteria], [r.id for r in asked], sorted(_indices(trace)))
        messages = conversation_judge_messages(
            trace, scenario.language, scenario.brief.script, criteria, rubric.ratings,
            asked=[r.id for r in asked],
        )
        outcome = await ask_judge(
            client,
            messages,
            expected,
            _indices(trace),
            schema,
            _context(trace, "conversation_judge"),
            schema_name="conversation_judgement",
        )
    items = [_criterion_item(c, key_str(("criteria", c.id)), outcome) for c in criteria]
    for r in rubric.ratings:
        base = dict(
            id=r.id, source="rating", pillar=Pillar.CONVERSATION, diagnostic=r.diagnostic, weight=r.weight
        )
        if r.id in skipped:
            items.append(GradedItem(**base, label=Label.NOT_APPLICABLE, reason=skipped[r.id]))
            continue
        key = key_str(("ratings", r.id))
        got = outcome.items.get(key)
        if got is None:
            items.append(
                GradedItem(**base, label=Label.JUDGE_ERROR, reason=outcome.errors.get(key, "judge error"))
            )
        else:
            items.append(
                GradedItem(**base, rating=got.rating, reason=got.reason, cited_messages=got.cited_messages)
            )
    return items, outcome
