"""What each party sees, rebuilt from the trace (DESIGN.md "Who sees what").

The episode loop builds every request through these functions from the trace it is writing, so a
reader of a saved trace rebuilds exactly the messages each model was sent:

* candidate: :func:`candidate_messages` - every trace message in order, except an assistant
  message that records a candidate output error (``error`` set): such an output is unusable, was
  never part of the conversation, and is not sent back to the candidate.
* caller: :func:`caller_messages` - its system prompt, then the public conversation: the
  candidate's speech per candidate turn (message text plus a call-ending tool's
  ``concluding_message``; never tool calls or results) as ``user`` messages, and its own accepted
  turns as ``assistant`` messages holding the JSON it returned (intended text, never the channel's
  observed text). An empty candidate turn appears as ``(silence)``. When the agent's side went
  over the line (``run --agent-speech line``), a candidate turn's speech is what the recogniser
  heard of it (``Trace.agent_speech``), as a caller on a phone line hears the agent. A second
  attempt at a caller turn gets :func:`with_retry_note` (the first rejection, from
  ``CallerTurn.rejections``) appended to its last message.
"""

from __future__ import annotations

from callbench.models.base import ChatMessage
from callbench.sim.text import json_text
from callbench.trace import CallerTurn, ToolEvent, TraceMessage

SILENCE = "(silence)"
REPLY_SEP = " | reply: "
"""Separates a rejection reason from the rejected reply in ``CallerTurn.rejections``."""


def candidate_messages(messages: list[TraceMessage]) -> list[ChatMessage]:
    """The candidate's conversation: ``messages`` as chat messages, minus recorded output errors."""
    return [
        ChatMessage(
            role=m.role,
            content=m.content,
            tool_calls=list(m.tool_calls),
            tool_call_id=m.tool_call_id,
            name=m.name,
        )
        for m in messages
        if m.error is None
    ]


def candidate_speech(messages: list[TraceMessage], tool_events: list[ToolEvent], turn: int) -> str:
    """What the caller heard of candidate turn ``turn``: its spoken texts, in order, joined by spaces."""
    return candidate_speeches(messages, tool_events).get(turn, SILENCE)


def candidate_speeches(messages: list[TraceMessage], tool_events: list[ToolEvent]) -> dict[int, str]:
    """:func:`candidate_speech` of every candidate turn that said something, in one pass over
    ``messages`` and ``tool_events`` (turn -> text; a turn not in it was silent)."""
    return {turn: " ".join(p) for turn, p in speech_parts(messages, tool_events).items()}


def speech_parts(messages: list[TraceMessage], tool_events: list[ToolEvent]) -> dict[int, list[str]]:
    """The pieces of every candidate turn's speech, in order: each answer's text and a call-ending
    tool's concluding message, stripped (turn -> pieces; a turn not in it was silent)."""
    parts: dict[int, list[tuple[int, int, str]]] = {}
    for m in messages:
        turn = m.candidate_turn
        if turn is not None and m.role == "assistant" and m.error is None and m.content:
            text = m.content.strip()
            if text:
                parts.setdefault(turn, []).append((m.index, 0, text))
    for ev in tool_events:
        if ev.call_ending and ev.executed and isinstance(ev.arguments, dict):
            msg = ev.arguments.get("concluding_message")
            if isinstance(msg, str) and msg.strip():
                parts.setdefault(ev.candidate_turn, []).append((ev.message_index, 1 + ev.index, msg.strip()))
    return {turn: [text for _, _, text in sorted(p)] for turn, p in parts.items()}


def caller_turn_json(turn: CallerTurn) -> str:
    """The caller's own accepted turn as it returned it (speech = intended text)."""
    step = turn.expressed_steps[0] if turn.expressed_steps else None
    return json_text({"expressed_step": step, "speech": turn.intended, "done": turn.done})


def caller_messages(
    system_prompt: str,
    messages: list[TraceMessage],
    tool_events: list[ToolEvent],
    caller_turns: list[CallerTurn],
    heard: dict[int, str] | None = None,
) -> list[ChatMessage]:
    """The caller's request for its next turn: system prompt, then candidate turn 0, caller turn 1,
    candidate turn 1, ... up to the latest candidate turn. ``heard`` (candidate turn -> text)
    replaces a turn's speech with what the recogniser made of it when the agent's side went over
    the line (``Trace.agent_speech[].heard.observed``)."""
    speech = {**candidate_speeches(messages, tool_events), **(heard or {})}
    out = [ChatMessage(role="system", content=system_prompt)]
    out.append(ChatMessage(role="user", content=speech.get(0, SILENCE)))
    for ct in caller_turns:
        out.append(ChatMessage(role="assistant", content=caller_turn_json(ct)))
        out.append(ChatMessage(role="user", content=speech.get(ct.index, SILENCE)))
    return out


def with_retry_note(messages: list[ChatMessage], rejection: str) -> list[ChatMessage]:
    """``messages`` with a harness note appended to the last one, telling the caller why its previous
    reply was rejected (``rejection`` as recorded, the rejected reply itself left out)."""
    reason = rejection.split(REPLY_SEP)[0]
    note = (
        f"(Note from the call harness, not part of the call: your previous reply was rejected - {reason}. "
        "Reply again to the agent's last words, following every rule.)"
    )
    last = messages[-1]
    return [*messages[:-1], last.model_copy(update={"content": f"{last.content}\n\n{note}"})]
