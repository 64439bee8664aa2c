"""What the two judges are shown: the rendered trace, the items to label, and the JSON schema.

Isolation (DESIGN.md "Who sees what"; paper: "A judge that could read the expected outcome would
grade against what should have happened instead of what the trace shows"):

- task judge: the trace, the scenario's goal, its TASK criteria with anchors and excerpts;
- conversation judge: the trace (for each caller turn, what the caller said and what the agent
  heard), the rating rubric, the call's language and script, and the CONVERSATION criteria only.
  It never receives the goal, the expected actions (action checks and their matchers), the task
  criteria or the brief: :func:`conversation_judge_messages` takes only those inputs.

Neither judge is shown the agent's operating document (tens of thousands of characters); criteria
that depend on it carry verbatim excerpts, which the loader checked against the rendered prompt.
The trace is shown with its message indices, which are the only indices a judge may cite.
"""

from __future__ import annotations

import json
from typing import Any

from callbench.bundle.models import Criterion
from callbench.grade.rubric import RatingSpec
from callbench.models.base import ChatMessage
from callbench.trace import EndReason, Trace, TraceMessage

PROMPT_VERSION = "callbench-judge-prompts-2"
"""Changes whenever the judge prompts change; part of the grade set id."""
MAX_MESSAGE_CHARS = 6000
"""Longest message text shown to a judge; longer text is cut with a visible note."""
LABELS = ("met", "partial", "not_met", "not_applicable")

_END = {
    EndReason.CALL_ENDED: "the agent ended the call with a call-ending tool that succeeded",
    EndReason.CALLER_DONE: "the caller ended the call",
    EndReason.CALLER_DONE_EARLY: "the caller ended the call",
    EndReason.MAX_TURNS: "the call was cut off at the turn limit",
    EndReason.SKIPPED: "the call was not completed",
}


def _cut(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f" [... {len(text) - limit} more characters not shown]"


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))


def render_trace(trace: Trace) -> str:
    """The trace as judges read it: one block per message, each led by its ``[index]``.

    Caller messages show what the agent heard; after a caller turn's last fragment a line shows what
    the caller actually said and which channel events changed it, so recognition damage and splits
    are never blamed on the caller. Tool calls show the tool event number, raw arguments and any
    parse error; tool results show the returned object. The system message is summarised.
    """
    turns = {t.index: t for t in trace.caller_turns}
    events = {e.index: e for e in trace.tool_events}
    by_call_id = {(e.message_index, e.tool_call_id): e for e in trace.tool_events}
    lines: list[str] = []
    for m in trace.messages:
        lines.extend(_render_message(m, turns, events, by_call_id))
    lines.append(f"End of call: {_END.get(trace.end_reason, str(trace.end_reason))}.")
    return "\n".join(lines)


def _render_message(
    m: TraceMessage, turns: dict[int, Any], events: dict[int, Any], by_call_id: dict[tuple[int, str], Any]
) -> list[str]:
    i = f"[{m.index}]"
    if m.role == "system":
        n = len(m.content or "")
        return [f"{i} SYSTEM: the agent's operating instructions ({n} characters, not shown here)."]
    if m.role == "user":
        turn = turns.get(m.caller_turn) if m.caller_turn is not None else None
        if turn is None:
            text = m.content or ""
            return [f"{i} (a user message not spoken by the caller: {_quote(_cut(text))})"]
        parts = len(turn.observed)
        frag = m.fragment if m.fragment is not None else 0
        where = f"turn {turn.index}" + (f", fragment {frag + 1} of {parts}" if parts > 1 else "")
        heard = m.content or ""
        out = [f"{i} CALLER ({where}), as the agent heard it: {_quote(_cut(heard))}"]
        last = frag >= parts - 1
        if last:
            same = " ".join(turn.observed).split() == turn.intended.split() and parts == 1
            if same:
                out.append("     (the agent heard this exactly as the caller said it)")
            else:
                out.append(
                    f"     what the caller actually said in turn {turn.index}: {_quote(_cut(turn.intended))}"
                )
                applied = [e for e in turn.channel_events if e.applied]
                for e in applied:
                    if e.kind == "vad_split":
                        out.append("     phone line: the speech was split into fragments at pauses")
                    elif e.kind == "drop":
                        out.append(f"     phone line: the recognizer dropped {_quote(e.span)}")
                    elif e.kind == "double":
                        out.append(f"     phone line: the recognizer doubled {_quote(e.span)}")
                    else:
                        out.append(
                            f"     phone line: the recognizer heard {_quote(e.replacement or '')} "
                            f"instead of {_quote(e.span)}"
                        )
            if turn.done:
                out.append("     (the caller considered the call finished after this turn)")
        return out
    if m.role == "assistant":
        speech = m.content
        head = f"{i} AGENT: {_quote(_cut(speech))}" if speech else f"{i} AGENT (no speech)"
        out = [head]
        for tc in m.tool_calls:
            ev = by_call_id.get((m.index, tc.id))
            num = f"tool event #{ev.index}" if ev is not None else "tool call"
            line = f"     calls {num}: {tc.name} with arguments {_cut(tc.arguments, 2000)}"
            if ev is not None and ev.parse_error:
                line += f" (arguments could not be parsed: {ev.parse_error})"
            if ev is not None and not ev.known_tool:
                line += " (no such tool)"
            if ev is not None and not ev.executed:
                line += f" (not executed: {ev.outcome.replace('_', ' ')})"
            out.append(line)
        if m.error:
            out.append(f"     (agent output problem: {m.error})")
        return out
    # tool result
    ev = events.get(m.tool_event) if m.tool_event is not None else None
    if ev is not None:
        body = _compact(ev.result) if ev.result is not None else (m.content or "")
        extra = ""
        if ev.call_ending:
            extra = " (call-ending tool: " + ("the call ended)" if ev.ended_call else "the call did not end)")
        return [f"{i} TOOL RESULT for #{ev.index} {ev.name}{extra}: {_cut(body)}"]
    return [f"{i} TOOL RESULT ({m.name or 'tool'}): {_cut(m.content or '')}"]


def _criteria_block(criteria: list[Criterion]) -> str:
    out = []
    for c in criteria:
        lines = [
            f"- id: {c.id}",
            f"  statement: {c.statement}",
            f"  met: {c.anchors.met}",
            f"  partial: {c.anchors.partial}",
            f"  not_met: {c.anchors.not_met}",
        ]
        for ex in c.excerpts:
            lines.append(f"  from the agent's instructions (verbatim): {_quote(ex)}")
        out.append("\n".join(lines))
    return "\n".join(out)


def _ratings_block(ratings: list[RatingSpec]) -> str:
    out = []
    for r in ratings:
        out.append(
            "\n".join(
                [
                    f"- id: {r.id}",
                    f"  question: {r.question}",
                    f"  1: {r.anchors.one}",
                    f"  3: {r.anchors.three}",
                    f"  5: {r.anchors.five}",
                    "  (2 and 4 lie between the anchors)",
                ]
            )
        )
    return "\n".join(out)


_COMMON_RULES = """Rules:
- Judge only what the transcript shows. Cite evidence by message index: the number in [brackets].
  Cite only indices that appear in the transcript.
- Caller lines show what the agent heard. When the phone line changed the caller's words, the line
  after shows what the caller actually said: hold the agent to what it heard, and never blame the
  caller for the recognizer's damage.
- Keep each reason to one or two sentences.
- Reply with one JSON object and nothing else."""

TASK_SYSTEM = f"""You are the task judge of a phone-agent benchmark. You read the transcript of one phone
call between an AI phone agent and a caller, with every tool call the agent made and every result
it got, and decide for each task criterion whether the call met it.

Labels: "met", "partial", "not_met", or "not_applicable" (only when the situation the criterion is
about never arose in this call). Use the criterion's anchors to choose between met, partial and
not_met. A claim the agent made that a tool result contradicts, or an action it said it took but
never did, counts against it.

{_COMMON_RULES}"""

CONVERSATION_SYSTEM = f"""You are the conversation judge of a phone-agent benchmark. You read the transcript
of one phone call between an AI phone agent and a caller and judge what the call was like for the
caller to sit through, as speech on a phone line: not whether the business task succeeded.

For each conversation criterion give a label: "met", "partial", "not_met", or "not_applicable"
(only when the situation the criterion is about never arose). For each rating give a whole number
from 1 to 5 using its anchors.

{_COMMON_RULES}"""


def _output_block(criteria_ids: list[str], rating_ids: list[str]) -> str:
    lines = ["Reply with a JSON object of this shape:"]
    if criteria_ids:
        lines.append('  "criteria": an object with exactly these keys: ' + ", ".join(criteria_ids))
        lines.append(
            '    each {"reason": "...", "cited_messages": [indices], '
            '"label": "met|partial|not_met|not_applicable"}'
        )
    if rating_ids:
        lines.append('  "ratings": an object with exactly these keys: ' + ", ".join(rating_ids))
        lines.append('    each {"reason": "...", "cited_messages": [indices], "rating": 1-5}')
    return "\n".join(lines)


def task_judge_messages(trace: Trace, goal: str, criteria: list[Criterion]) -> list[ChatMessage]:
    """System and user messages for the task judge: goal, task criteria (anchors, excerpts), trace."""
    user = "\n\n".join(
        [
            f"Goal of this call (what a correct call achieves):\n{goal}",
            f"Task criteria:\n{_criteria_block(criteria)}",
            f"Transcript:\n{render_trace(trace)}",
            _output_block([c.id for c in criteria], []),
        ]
    )
    return [ChatMessage(role="system", content=TASK_SYSTEM), ChatMessage(role="user", content=user)]


def conversation_judge_messages(
    trace: Trace,
    language: str,
    script: str,
    criteria: list[Criterion],
    ratings: list[RatingSpec],
    asked: list[str] | None = None,
) -> list[ChatMessage]:
    """System and user messages for the conversation judge: the whole rating rubric, language,
    conversation criteria, trace, and the reply shape. Takes no goal, action check or task
    criterion by construction.

    ``ratings`` is the rubric as a whole and ``asked`` the ids of the ratings that apply to this
    trace (all of them when None): the prompt always shows every rating, first, and asks only for
    ``asked`` (the rest are named as not applying). So the start of the prompt (instructions and
    rubric) is the same for every call of a run, then the criteria for every call of a scenario,
    and a local model re-reads only what follows the longest prefix shared with its previous
    prompt (:mod:`callbench.models.local.client`) instead of the whole rubric each time."""
    asked_ids = [r.id for r in ratings] if asked is None else list(asked)
    parts = []
    if ratings:
        parts.append(f"Ratings:\n{_ratings_block(ratings)}")
    parts.append(f"The caller speaks language {language} in {script} script.")
    if criteria:
        parts.append(f"Conversation criteria:\n{_criteria_block(criteria)}")
    parts.append(f"Transcript:\n{render_trace(trace)}")
    not_asked = [r.id for r in ratings if r.id not in asked_ids]
    if not_asked:
        parts.append(
            "These ratings do not apply to this call and are not asked for: " + ", ".join(not_asked)
        )
    parts.append(_output_block([c.id for c in criteria], asked_ids))
    return [
        ChatMessage(role="system", content=CONVERSATION_SYSTEM),
        ChatMessage(role="user", content="\n\n".join(parts)),
    ]


MAX_INDEX_ENUM = 100
"""Most message indices a judge schema lists as an ``enum``; more become integer bounds."""


def message_index_schema(message_indices: list[int]) -> dict[str, Any]:
    """The schema of one cited message index: ``minimum``/``maximum`` bounds when the indices are
    consecutive or more than :data:`MAX_INDEX_ENUM`, else an ``enum`` of them. A long enum is
    what targets reject (a transcript of ~490 messages gave a 500-value enum; OpenAI structured
    outputs allow 1,000 enum values in a whole schema, and Gemini enums of strings only), while the
    bounds are accepted by all of them; a cited index inside the bounds that is not the trace's
    is still refused when the reply is read (``grade/parse.py``)."""
    indices = sorted(set(message_indices))
    if not indices:
        return {"type": "integer", "minimum": 0, "maximum": 0}
    consecutive = indices[-1] - indices[0] + 1 == len(indices)
    if consecutive or len(indices) > MAX_INDEX_ENUM:
        return {"type": "integer", "minimum": indices[0], "maximum": indices[-1]}
    return {"type": "integer", "enum": indices}


def response_schema(
    criteria_ids: list[str], rating_ids: list[str], message_indices: list[int]
) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a judge reply: every expected id is a required key; cited
    indices are restricted to the trace's message indices (``$defs.message_index``,
    :func:`message_index_schema`)."""
    cite = {"type": "array", "items": {"$ref": "#/$defs/message_index"}}
    props: dict[str, Any] = {}
    required: list[str] = []
    if criteria_ids:
        item = {
            "type": "object",
            "additionalProperties": False,
            "required": ["reason", "cited_messages", "label"],
            "properties": {
                "reason": {"type": "string"},
                "cited_messages": cite,
                "label": {"type": "string", "enum": list(LABELS)},
            },
        }
        props["criteria"] = {
            "type": "object",
            "additionalProperties": False,
            "required": list(criteria_ids),
            "properties": {i: {"$ref": "#/$defs/criterion"} for i in criteria_ids},
        }
        required.append("criteria")
    if rating_ids:
        rating = {
            "type": "object",
            "additionalProperties": False,
            "required": ["reason", "cited_messages", "rating"],
            "properties": {
                "reason": {"type": "string"},
                "cited_messages": cite,
                "rating": {"type": "integer", "minimum": 1, "maximum": 5},
            },
        }
        props["ratings"] = {
            "type": "object",
            "additionalProperties": False,
            "required": list(rating_ids),
            "properties": {i: {"$ref": "#/$defs/rating"} for i in rating_ids},
        }
        required.append("ratings")
    defs: dict[str, Any] = {"message_index": message_index_schema(message_indices)}
    if criteria_ids:
        defs["criterion"] = item
    if rating_ids:
        defs["rating"] = rating
    return {
        "type": "object",
        "additionalProperties": False,
        "required": required,
        "properties": props,
        "$defs": defs,
    }


def retry_message(errors: list[str]) -> ChatMessage:
    """The user message appended after an unusable reply: what was wrong, and a request to resend."""
    listed = "\n".join(f"- {e}" for e in errors)
    return ChatMessage(
        role="user",
        content=(
            f"Your reply could not be used:\n{listed}\n"
            "Reply again with the complete JSON object (every criterion and rating), and nothing else."
        ),
    )


__all__ = [
    "CONVERSATION_SYSTEM",
    "LABELS",
    "PROMPT_VERSION",
    "TASK_SYSTEM",
    "conversation_judge_messages",
    "render_trace",
    "response_schema",
    "retry_message",
    "task_judge_messages",
]
