"""One trace's voice-channel counts, kept by the report loader in place of the trace
(:mod:`callbench.report.model.voice` sums them into the report's voice section)."""

from __future__ import annotations

from typing import Any

from callbench.trace import Trace


def voice_tally(trace: Trace) -> dict[str, Any] | None:
    """The voice channel's counts for one trace, plain values (cheap to pickle): ``turns`` (caller
    turns with a voice record), ``wer_sum``/``wer_n`` (sum and count of defined turn WERs),
    ``truncated``, ``entities`` (kind -> ``[survived, said]``) and ``stress`` (a turn was spoken
    by a stress-channel voice). None when no caller turn went through the voice channel."""
    events = [t.voice for t in trace.caller_turns if t.voice is not None]
    if not events:
        return None
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
    }
