"""Readable per-episode views for the HTML trace viewer.

Each view holds plain strings and numbers (escaped by the template, never marked safe): messages
by index, tool events with arguments/results/outcome, caller turns with intended vs observed text
and channel events, and the judge's labels with the message and tool-event indices they cite
(rendered as in-page links ``#e<n>-m<index>`` / ``#e<n>-t<index>``). System messages (the long
operating instructions) are stored once per distinct text and linked, so a report over many
episodes of one agent does not repeat a 30,000-character document per episode.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from callbench.bundle.models import DIAGNOSTIC_LABELS
from callbench.grade.models import EpisodeGrade
from callbench.report.load import RunData
from callbench.trace import Trace


def pretty(value: Any) -> str:
    """Indented JSON for display (non-ASCII kept as is)."""
    try:
        return json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def _messages(trace: Trace, prefix: str, instructions: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for m in trace.messages:
        view: dict[str, Any] = {
            "anchor": f"{prefix}-m{m.index}",
            "index": m.index,
            "role": m.role,
            "content": m.content,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls],
            "tool_call_id": m.tool_call_id,
            "name": m.name,
            "caller_turn": m.caller_turn,
            "fragment": m.fragment,
            "tool_event": f"{prefix}-t{m.tool_event}" if m.tool_event is not None else None,
            "tool_event_index": m.tool_event,
            "candidate_turn": m.candidate_turn,
            "error": m.error,
            "instructions": None,
        }
        if m.role == "system" and m.content:
            sha = hashlib.sha256(m.content.encode()).hexdigest()
            entry = instructions.setdefault(
                sha,
                {"anchor": f"instr-{sha[:16]}", "sha256": sha, "length": len(m.content), "text": m.content},
            )
            view["instructions"] = entry["anchor"]
            view["content"] = f"(operating instructions, {len(m.content)} characters, sha256 {sha[:12]}…)"
        out.append(view)
    return out


def _tool_events(trace: Trace, prefix: str) -> list[dict[str, Any]]:
    return [
        {
            "anchor": f"{prefix}-t{e.index}",
            "index": e.index,
            "name": e.name,
            "candidate_turn": e.candidate_turn,
            "message": f"{prefix}-m{e.message_index}",
            "message_index": e.message_index,
            "result_message": f"{prefix}-m{e.result_message_index}",
            "result_message_index": e.result_message_index,
            "raw_arguments": e.raw_arguments,
            "arguments": pretty(e.arguments) if e.arguments is not None else None,
            "parse_error": e.parse_error,
            "double_encoded": e.double_encoded,
            "known_tool": e.known_tool,
            "queue_position": e.queue_position,
            "outcome": e.outcome,
            "executed": e.executed,
            "matchers": [{"field": r.field, "ok": r.ok, "reason": r.reason} for r in e.matcher_results],
            "result": pretty(e.result),
            "call_ending": e.call_ending,
            "success_condition_met": e.success_condition_met,
            "ended_call": e.ended_call,
        }
        for e in trace.tool_events
    ]


def _caller_turns(trace: Trace, prefix: str) -> list[dict[str, Any]]:
    return [
        {
            "index": t.index,
            "intended": t.intended,
            "observed": t.observed,
            "differs": t.observed != [t.intended],
            "messages": [(i, f"{prefix}-m{i}") for i in t.message_indices],
            "expressed_steps": t.expressed_steps,
            "done": t.done,
            "attempts": t.attempts,
            "rejections": t.rejections,
            "channel_events": [ev.model_dump(mode="json") for ev in t.channel_events],
        }
        for t in trace.caller_turns
    ]


def _items(grade: EpisodeGrade | None, prefix: str, trace: Trace | None) -> list[dict[str, Any]]:
    if grade is None:
        return []
    known_msgs = {m.index for m in trace.messages} if trace else set()
    known_events = {e.index for e in trace.tool_events} if trace else set()
    return [
        {
            "id": it.id,
            "source": it.source,
            "pillar": it.pillar.value,
            "diagnostic": DIAGNOSTIC_LABELS[it.diagnostic],
            "weight": it.weight,
            "label": it.label.value if it.label is not None else None,
            "rating": it.rating,
            "r": it.r,
            "reason": it.reason,
            "messages": [(i, f"{prefix}-m{i}" if i in known_msgs else None) for i in it.cited_messages],
            "events": [(i, f"{prefix}-t{i}" if i in known_events else None) for i in it.cited_events],
        }
        for it in grade.items
    ]


def episode_views(runs: list[RunData]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Views of every episode that has a trace or a grade, in run then plan order, and the
    distinct operating instructions they link to."""
    instructions: dict[str, dict[str, Any]] = {}
    views: list[dict[str, Any]] = []
    for run in runs:
        for rec in run.records:
            trace, grade = run.traces.get(rec.episode_id), run.grades.get(rec.episode_id)
            if trace is None and grade is None:
                continue
            prefix = f"e{len(views)}"
            views.append(
                {
                    "anchor": prefix,
                    "run_id": rec.run_id,
                    "episode_id": rec.episode_id,
                    "candidate": rec.candidate,
                    "agent_id": rec.agent_id,
                    "scenario_id": rec.scenario_id,
                    "repeat": rec.repeat,
                    "language": rec.language,
                    "difficulty": rec.difficulty,
                    "status": rec.status,
                    "skip_reason": rec.skip_reason,
                    "end_reason": trace.end_reason.value if trace else grade.end_reason if grade else "",
                    "caller": trace.caller.spec if trace else "",
                    "grade": grade,
                    "messages": _messages(trace, prefix, instructions) if trace else [],
                    "tool_events": _tool_events(trace, prefix) if trace else [],
                    "caller_turns": _caller_turns(trace, prefix) if trace else [],
                    "unreached_channel_events": (
                        [ev.model_dump(mode="json") for ev in trace.unreached_channel_events] if trace else []
                    ),
                    "judged": _items(grade, prefix, trace),
                    "usage": {k: v.model_dump(mode="json") for k, v in trace.usage.items()} if trace else {},
                }
            )
    return views, list(instructions.values())
