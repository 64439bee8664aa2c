"""One trace's voice-channel counts, kept by the report loader in place of the trace
(:mod:`callbench.report.model.voice` sums them into the report's voice section)."""

from __future__ import annotations

from typing import Any

from callbench.trace import Trace


def voice_tally(trace: Trace) -> dict[str, Any] | None:
    """The voice channel's counts for one trace, plain values (cheap to pickle): ``turns`` (caller
    turns with a voice record), ``wer_sum``/``wer_n`` (sum and count of defined turn WERs),
    ``truncated``, ``entities`` (kind -> ``[survived, said]``), ``stress`` (a turn was spoken
    by a stress-channel voice), and for the agent's side (``run --agent-speech``): ``agent_turns``
    (candidate turns spoken), ``agent_heard`` (of those, carried over the line) and
    ``agent_wer_sum``/``agent_wer_n``. None when no caller turn went through the voice channel."""
    events = [t.voice for t in trace.caller_turns if t.voice is not None]
    if not events:
        return None
    heard = [a.heard for a in trace.agent_speech if a.heard is not None]
    agent_wers = [h.wer for h in heard if h.wer is not None]
    entities: dict[str, list[int]] = {}
    for ev in events:
        for e in ev.entities:
            cell = entities.setdefault(e.kind, [0, 0])
            cell[0] += int(e.survived)
            cell[1] += 1
    wers = [ev.wer for ev in events if ev.wer is not None]
    return {
        "turns": len(events),
        "wer_sum": float(sum(wers)),
        "wer_n": len(wers),
        "truncated": sum(ev.truncated for ev in events),
        "entities": entities,
        "stress": any(bool((ev.tts.get("settings") or {}).get("stress_channel")) for ev in events),
        "agent_turns": len(trace.agent_speech),
        "agent_heard": len(heard),
        "agent_wer_sum": float(sum(agent_wers)),
        "agent_wer_n": len(agent_wers),
    }
