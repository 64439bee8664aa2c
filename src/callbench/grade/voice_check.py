"""An executable conversation check grounded in the voice channel's events: when the recogniser
garbled an entity the caller said (a digit string, amount or name whose ``survived`` is false in
the turn's :class:`~callbench.trace.VoiceEvent`), the candidate's next spoken reply should ask back
or confirm instead of acting on what it misheard.

Rule, per caller turn with at least one garbled entity: the turn counts as *handled* when the
candidate's first non-empty reply after the turn's last user message either contains a question
mark (``?``, or the full-width ``？``) or repeats one of the garbled entities as the caller said it
(digits compared as digit strings, so "4 8 2 1 5" matches "48215"; names and amounts compared
case-insensitively on their letters and digits), i.e. reads it back for confirmation. The item's
label: met when every garbled turn was handled, partial when some were, not met when none; no item
when the trace has no voice event, and ``not_applicable`` when it has voice events but nothing was
garbled. It is a deterministic check (source ``action_check``, conversation pillar, diagnostic
channel robustness), not a judge's opinion.

Limits, stated because the rule is cheap: any question counts, even one unrelated to the garbled
entity ("anything else?"); a read-back that repeats the *intended* entity counts even when the
candidate got it from elsewhere (a tool result); a reply in a script whose question mark is not
``?``/``？`` is not recognised as a question unless it reads the entity back; a candidate that
acts correctly without asking (its tool found the right record anyway) is still marked down on
that turn. It says whether the candidate reacted to a garbled entity, not whether it recovered it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from callbench.bundle.models import Diagnostic, Pillar
from callbench.grade.models import GradedItem, Label
from callbench.trace import CallerTurn, Trace, TraceMessage

CHECK_ID = "voice_confirms_garbled_entity"
QUESTION_MARKS = ("?", "？")


def _norm(text: str, digits_only: bool) -> str:
    if digits_only:
        return re.sub(r"\D", "", text)
    return re.sub(r"[\W_]", "", text.casefold())


def _next_reply(trace: Trace, turn: CallerTurn) -> TraceMessage | None:
    after = max(turn.message_indices, default=-1)
    for m in sorted(trace.messages, key=lambda m: m.index):
        if m.index > after and m.role == "assistant" and (m.content or "").strip():
            return m
        if m.index > after and m.role == "user":
            return None  # the caller spoke again before the candidate said anything
    return None


def handled(reply: str, garbled: Sequence[tuple[str, str]]) -> bool:
    """Whether ``reply`` asks back or reads back one of ``garbled`` (``(kind, text)`` pairs as the
    caller said them) under the module's rule."""
    if any(q in reply for q in QUESTION_MARKS):
        return True
    for kind, text in garbled:
        digits = kind == "digits"
        want = _norm(text, digits)
        if want and want in _norm(reply, digits):
            return True
    return False


def grade_voice_confirmation(trace: Trace) -> list[GradedItem]:
    """The check's item for ``trace`` (module docstring): ``[]`` without voice events, else one
    item citing the candidate replies it looked at."""
    voiced = [t for t in trace.caller_turns if t.voice is not None]
    if not voiced:
        return []
    garbled_turns = 0
    ok = 0
    cited: list[int] = []
    notes: list[str] = []
    for turn in voiced:
        assert turn.voice is not None
        garbled = [(e.kind, e.text) for e in turn.voice.entities if not e.survived]
        if not garbled:
            continue
        garbled_turns += 1
        reply = _next_reply(trace, turn)
        good = reply is not None and handled(reply.content or "", garbled)
        ok += good
        if reply is not None:
            cited.append(reply.index)
        said = ", ".join(t for _, t in garbled)
        notes.append(f"turn {turn.index} ({said}): " + ("asked back or confirmed" if good else
                                                          "no reply" if reply is None else "went on"))
    item = GradedItem(id=CHECK_ID, source="action_check", pillar=Pillar.CONVERSATION,
                      diagnostic=Diagnostic.CHANNEL_AND_CLOSING, weight=1, cited_messages=cited)
    if not garbled_turns:
        item.label = Label.NOT_APPLICABLE
        item.reason = "the recogniser garbled no entity the caller said"
        return [item]
    item.label = Label.MET if ok == garbled_turns else Label.NOT_MET if ok == 0 else Label.PARTIAL
    item.r = {Label.MET: 1.0, Label.PARTIAL: 0.5, Label.NOT_MET: 0.0}[item.label]
    item.reason = (f"asked back or confirmed after {ok} of {garbled_turns} caller turn(s) with a garbled "
                   "entity: " + "; ".join(notes))
    return [item]
