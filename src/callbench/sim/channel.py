"""The channel (paper, "The channel layer decides what text the candidate observes").

For each caller turn, in this order:

1. authored ASR events aimed at the turn (by ``turn`` number, or by ``step`` = the turn that
   expressed that plan step; both must hold when both are given), in authored order: ``drop``
   removes the span, ``double`` repeats it, ``substitute`` replaces it with ``replacement``. Spans are
   found case-insensitively after NFC, preferring whole-word matches, reading decimal digits of any
   script as the same digit and ignoring how a digit run is grouped (:mod:`callbench.sim.text`);
   the edit works on the caller's original characters (a drop removes them, a double repeats
   them), and a substitute's ASCII digits are written in the script of the digits it replaces;
2. seeded noise, on the first caller turn only (see :mod:`callbench.sim.noise`);
3. the first VAD split aimed at the turn: the text is cut right after the first occurrence of each
   anchor (the second anchor searched after the first, matched like spans but anywhere, not only on
   whole words), giving at most three fragments; the cut falls right after the caller's own
   characters that matched the anchor.

With a voice channel (:mod:`callbench.sim.voice`), steps 1 and 2 are replaced by what a
recogniser made of the spoken turn: the turn is synthesised, carried over the phone line and
recognised, the authored ASR events aimed at the turn and the first turn's seeded noise are
recorded as not applied (the recogniser's errors stand in for them), and the turn's
:class:`~callbench.trace.VoiceEvent` is returned with the fragments; step 3 then splits the
recognised text.

Each step records a :class:`~callbench.trace.ChannelEvent` saying what changed or why it did not
apply; when a match needed digit normalisation (another digit script, another grouping) the
event's ``detail`` says so. Events whose turn never came are reported by :meth:`Channel.unreached`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from callbench.bundle.models import AsrEvent, ChannelProgram, VadSplit
from callbench.sim.noise import seeded_slip
from callbench.sim.text import SpanMatch, digits_like, find_span_match, nfc, tidy
from callbench.trace import AgentSpeech, ChannelEvent, VoiceEvent

if TYPE_CHECKING:
    from callbench.sim.voice.pipeline import VoiceLine


class Rendered(BaseModel):
    """What the candidate observes of one caller turn: fragments (one user message each) and events."""

    fragments: list[str]
    events: list[ChannelEvent]
    voice: VoiceEvent | None = None


def _aimed(ev: AsrEvent | VadSplit, turn: int, steps: list[str]) -> bool:
    if ev.turn is None and ev.step is None:
        return False
    return (ev.turn is None or ev.turn == turn) and (ev.step is None or ev.step in steps)


def _target(ev: AsrEvent | VadSplit) -> str:
    parts = []
    if ev.turn is not None:
        parts.append(f"turn {ev.turn}")
    if ev.step is not None:
        parts.append(f"the turn expressing step {ev.step!r}")
    return " and ".join(parts) or "no turn or step"


def _with_note(detail: str, hit: SpanMatch) -> str:
    note = hit.note()
    return f"{detail} ({note})" if note else detail


def apply_asr(text: str, ev: AsrEvent, turn: int) -> tuple[str, ChannelEvent]:
    """Apply one authored ASR event to ``text``; return the new text and its event record.

    The span is found with :func:`callbench.sim.text.find_span_match`; the recorded ``span`` is the
    caller's original substring that matched, and ``detail`` notes any digit normalisation."""
    base = ChannelEvent(
        kind=ev.kind, source="authored", turn=turn, span=ev.span, replacement=ev.replacement, applied=False
    )
    if ev.kind == "substitute" and ev.replacement is None:
        return text, base.model_copy(update={"detail": "substitute event has no replacement"})
    hit = find_span_match(text, ev.span)
    if hit is None:
        return text, base.model_copy(update={"detail": f"span {ev.span!r} not found in the turn"})
    s, e = hit.start, hit.end
    found = text[s:e]
    update: dict[str, object] = {"applied": True, "span": found}
    if ev.kind == "drop":
        new, detail = text[:s] + text[e:], f"dropped {found!r}"
    elif ev.kind == "double":
        new, detail = text[:e] + " " + found + text[e:], f"doubled {found!r}"
    else:
        rep = digits_like(nfc(ev.replacement or ""), found)
        new, detail = text[:s] + rep + text[e:], f"replaced {found!r} with {rep!r}"
        update["replacement"] = rep
    update["detail"] = _with_note(detail, hit)
    return tidy(new), base.model_copy(update=update)


def split_vad(text: str, split: VadSplit, turn: int) -> tuple[list[str], ChannelEvent]:
    """Cut ``text`` after each anchor of ``split``; return the fragments and the event record.

    Anchors are found with :func:`callbench.sim.text.find_span_match` (not only on whole words);
    ``detail`` notes each anchor whose match needed digit normalisation."""
    cuts: list[int] = []
    missing: list[str] = []
    notes: list[str] = []
    pos = 0
    for anchor in split.after:
        hit = find_span_match(text, anchor, pos, whole_words=False)
        if hit is None:
            missing.append(anchor)
            continue
        cut = hit.end
        if text[cut:].strip():
            cuts.append(cut)
            if hit.normalised:
                notes.append(f"anchor {anchor!r} matched {text[hit.start : cut]!r} ({hit.note()})")
        else:
            missing.append(f"{anchor} (at the end of the turn)")
        pos = cut
    frags, prev = [], 0
    for c in cuts:
        frags.append(text[prev:c].strip())
        prev = c
    frags.append(text[prev:].strip())
    frags = [f for f in frags if f] or [text]
    span = " | ".join(split.after)
    if len(frags) < 2:
        return [text], ChannelEvent(
            kind="vad_split",
            source="authored",
            turn=turn,
            span=span,
            applied=False,
            detail="no anchor found to split at: " + ", ".join(repr(m) for m in missing),
        )
    detail = f"split into {len(frags)} fragments: " + " / ".join(repr(f) for f in frags)
    if missing:
        detail += "; not found: " + ", ".join(repr(m) for m in missing)
    if notes:
        detail += "; " + "; ".join(notes)
    return frags, ChannelEvent(
        kind="vad_split", source="authored", turn=turn, span=span, applied=True, detail=detail
    )


class Channel:
    """The channel program of one episode. ``seed`` is the episode's channel seed; ``known_facts``
    are the caller's facts that seeded noise must never touch. ``voice`` (with the scenario's
    ``language``) makes it a voice channel."""

    def __init__(self, program: ChannelProgram, seed: int, known_facts: dict[str, object],
                 voice: VoiceLine | None = None, language: str = "en") -> None:
        self.program = program
        self.seed = seed
        self.known_facts = known_facts
        self.voice = voice
        self.language = language
        self._said: dict[str, int] = {}
        self._agent_said: dict[str, int] = {}
        self._asr_done: set[int] = set()
        self._vad_done: set[int] = set()
        self._turns_seen = 0

    def render(self, intended: str, turn: int, expressed_steps: list[str]) -> Rendered:
        """Render caller turn ``turn`` (1-based) whose intended text is ``intended``."""
        self._turns_seen = max(self._turns_seen, turn)
        text = nfc(intended)
        events: list[ChannelEvent] = []
        voice: VoiceEvent | None = None
        if self.voice is not None:
            text, voice = self._recognise(text, turn, expressed_steps, events)
        for i, ev in enumerate(self.program.asr_events if voice is None else []):
            if i not in self._asr_done and _aimed(ev, turn, expressed_steps):
                self._asr_done.add(i)
                text, rec = apply_asr(text, ev, turn)
                events.append(rec.model_copy(update={"program_path": f"channel.asr_events.{i}"}))
        if self.program.seeded_noise and turn == 1 and voice is None:
            slip = seeded_slip(text, self.known_facts, self.seed)
            if slip is None:
                events.append(
                    ChannelEvent(
                        kind="seeded_substitute",
                        source="seeded",
                        turn=turn,
                        applied=False,
                        detail="no eligible word (four letters or more, outside known-fact values)",
                    )
                )
            else:
                text = text[: slip.start] + slip.replacement + text[slip.end :]
                events.append(
                    ChannelEvent(
                        kind="seeded_substitute",
                        source="seeded",
                        turn=turn,
                        span=slip.word,
                        replacement=slip.replacement,
                        applied=True,
                        detail=f"replaced {slip.word!r} with {slip.replacement!r} ({slip.how})",
                    )
                )
        fragments = [text]
        split_done = False
        for i, sp in enumerate(self.program.vad_splits):
            if i in self._vad_done or not _aimed(sp, turn, expressed_steps):
                continue
            self._vad_done.add(i)
            if split_done:
                events.append(
                    ChannelEvent(
                        kind="vad_split",
                        source="authored",
                        turn=turn,
                        span=" | ".join(sp.after),
                        applied=False,
                        detail="the turn was already split by an earlier VAD event",
                        program_path=f"channel.vad_splits.{i}",
                    )
                )
                continue
            fragments, rec = split_vad(text, sp, turn)
            split_done = rec.applied
            events.append(rec.model_copy(update={"program_path": f"channel.vad_splits.{i}"}))
        return Rendered(fragments=fragments, events=events, voice=voice)

    def _recognise(
        self, text: str, turn: int, steps: list[str], events: list[ChannelEvent]
    ) -> tuple[str, VoiceEvent]:
        """The voice channel's steps 1-2: recognise the spoken turn, record what it replaced."""
        assert self.voice is not None
        occurrence = self._said.get(text, 0)
        self._said[text] = occurrence + 1
        from callbench.models.base import InfrastructureError
        from callbench.sim.voice.engines import VoiceEngineError

        try:
            rec = self.voice.pipeline.observe(
                text, self.language, self.voice.config, channel_seed=self.seed, occurrence=occurrence,
                turn=turn, facts=self.known_facts, keep=self.voice.keep_dir,
            )
        except (VoiceEngineError, ValueError, OSError) as e:  # an engine or cache fault, not the candidate's
            raise InfrastructureError(f"voice channel: {e}", retryable=False, role="channel") from None
        replaced: list[str] = []
        for i, ev in enumerate(self.program.asr_events):
            if i not in self._asr_done and _aimed(ev, turn, steps):
                self._asr_done.add(i)
                path = f"channel.asr_events.{i}"
                replaced.append(path)
                events.append(ChannelEvent(
                    kind=ev.kind, source="authored", turn=turn, span=ev.span, replacement=ev.replacement,
                    applied=False, detail="replaced by the voice channel: the recogniser's output stands in",
                    program_path=path,
                ))
        if self.program.seeded_noise and turn == 1:
            events.append(ChannelEvent(
                kind="seeded_substitute", source="seeded", turn=turn, applied=False,
                detail="replaced by the voice channel: the recogniser's output stands in",
            ))
        # a recogniser that heard nothing still delivers a turn: an ellipsis, as phone transcripts show it
        observed = tidy(nfc(rec.observed)) or "..."
        return observed, rec.model_copy(update={"replaced": replaced})

    @property
    def speaks_agent(self) -> bool:
        """The candidate's side is spoken (``run --agent-speech tts`` or ``line``)."""
        return self.voice is not None and self.voice.agent != "off"

    def speak_agent(self, parts: list[str], turn: int) -> AgentSpeech:
        """Speak candidate turn ``turn`` (:func:`callbench.sim.voice.agent.speak_turn`). Raises
        :class:`~callbench.models.base.InfrastructureError` when an engine or the cache fails."""
        assert self.voice is not None
        from callbench.models.base import InfrastructureError
        from callbench.sim.voice.agent import speak_turn
        from callbench.sim.voice.engines import VoiceEngineError

        joined = " ".join(parts)
        occurrence = self._agent_said.get(joined, 0)
        self._agent_said[joined] = occurrence + 1
        try:
            return speak_turn(self.voice, parts, turn=turn, language=self.language, channel_seed=self.seed,
                              occurrence=occurrence)
        except (VoiceEngineError, ValueError, OSError) as e:  # an engine or cache fault, not the candidate's
            raise InfrastructureError(f"voice channel (agent side): {e}", retryable=False,
                                      role="channel") from None

    def unreached(self) -> list[ChannelEvent]:
        """Authored events whose target turn never came (or was never expressed), not applied."""
        out: list[ChannelEvent] = []
        for i, ev in enumerate(self.program.asr_events):
            if i not in self._asr_done:
                out.append(
                    ChannelEvent(
                        kind=ev.kind,
                        source="authored",
                        turn=ev.turn or 0,
                        span=ev.span,
                        replacement=ev.replacement,
                        applied=False,
                        detail=f"{_target(ev)} never came in {self._turns_seen} caller turns",
                        program_path=f"channel.asr_events.{i}",
                    )
                )
        for i, sp in enumerate(self.program.vad_splits):
            if i not in self._vad_done:
                out.append(
                    ChannelEvent(
                        kind="vad_split",
                        source="authored",
                        turn=sp.turn or 0,
                        span=" | ".join(sp.after),
                        applied=False,
                        detail=f"{_target(sp)} never came in {self._turns_seen} caller turns",
                        program_path=f"channel.vad_splits.{i}",
                    )
                )
        return out
