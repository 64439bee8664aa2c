"""Speech rules the harness enforces on every caller turn (paper: the harness rejects "any turn that
leaks an internal field name into speech"; the caller writes "what a recognizer would capture ...
so no markdown, no bullet lists").

A turn longer than :data:`~callbench.models.output_limits.MAX_CALLER_SPEECH_CHARS` (600
characters) is rejected first (``too_long``; paper: "A routine turn is one short sentence, usually
2 to 15 words"): a caller model that runs on would otherwise
hand the candidate a wall of text, and with the voice channel a turn the speech engine cannot say
within its time limit (piper: 8.9 s of wall time per 100 words on a loaded machine) fails the
episode as a channel fault. Then three families, checked in this order (stage directions last,
after markup); the first problem found is the rejection:

``leak``
    An internal name or id in speech: a plan step id that is not a plain word (it contains ``_``,
    ``-``, ``.``, a digit or an inner capital, so "confirm" as an id is not flagged but
    "give_estimate" is), a known-fact key with ``_`` in it, and the harness's own vocabulary:
    known_facts, unknown_facts, expressed_step, hidden_state, plan step(s), trigger(s), "the/my/your
    brief", and a JSON key such as ``"speech":``. Plain "brief" and "hidden" are not flagged, since
    "I'll be brief" and "hidden charges" are things real callers say.
``meta_talk``
    Role confusion or narration: a speaker prefix (``Caller:``, ``Agent:``, ``User:``,
    ``Assistant:``, ``Customer:``), self-reference as an AI, language model, simulator, simulation,
    test or role-play, narrating instructions ("my instructions", "system prompt", "my plan says"),
    speaking as the agent ("how may I help you", "thank you for calling"), and stage directions in
    brackets or parentheses ("(sighs)", "[pause]").
``markup``
    Markdown bold/italic, headers, bullets, numbered lists over several lines, code (fenced or
    inline), links, and HTML tags.
"""

from __future__ import annotations

import functools
import re

from callbench.bundle.models import Brief
from callbench.models.output_limits import MAX_CALLER_SPEECH_CHARS
from callbench.sim.text import nfc

_I = re.IGNORECASE | re.MULTILINE


HARNESS_TERMS: list[tuple[str, re.Pattern[str]]] = [
    ("known_facts", re.compile(r"known[_ ]facts?", _I)),
    ("unknown_facts", re.compile(r"unknown[_ ]facts?", _I)),
    ("expressed_step", re.compile(r"expressed[_ ]steps?", _I)),
    ("hidden_state", re.compile(r"hidden[_ ]state", _I)),
    ("plan step", re.compile(r"\bplan[_ ]steps?\b", _I)),
    ("trigger", re.compile(r"\btriggers?\b", _I)),
    ("brief", re.compile(r"\b(the|my|your|this|caller)[_ ]brief\b", _I)),
    ("a JSON key", re.compile(r"\"(speech|done|expressed_step)\"\s*:", _I)),
]

META: list[tuple[str, re.Pattern[str]]] = [
    ("a speaker prefix", re.compile(r"^\s*(caller|agent|user|assistant|customer|system)\s*:", _I)),
    (
        "self-reference as an AI",
        re.compile(
            r"\b(as an ai|an ai (model|assistant|language model)|i am an ai|i'm an ai|language model|"
            r"artificial intelligence)\b",
            _I,
        ),
    ),
    (
        "talk about the simulation",
        re.compile(
            r"\b(simulat(ed|ion|or)|role[- ]?play(ing)?|this (is a|is just a) test|test scenario)\b", _I
        ),
    ),
    (
        "narrating instructions",
        re.compile(
            r"\b(my|these) (instructions|prompt|persona)\b|\bsystem prompt\b|\bmy plan (says|is to)\b", _I
        ),
    ),
    (
        "speaking as the agent",
        re.compile(r"\b(how (can|may) i (help|assist) you|thank you for calling|thanks for calling)\b", _I),
    ),
]

STAGE_DIRECTION = re.compile(r"[\(\[]\s*[^\W\d_][^\)\]]*[\)\]]")
"""Bracketed or parenthesised words ("(sighs)", "[pause]"): checked after markup, so a markdown
link is reported as markup."""

MARKUP: list[tuple[str, re.Pattern[str]]] = [
    ("markdown bold", re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")),
    ("markdown italics", re.compile(r"(?<![*\w])\*[^*\s][^*\n]*\*(?![*\w])")),
    ("a markdown header", re.compile(r"^\s*#{1,6}\s", re.MULTILINE)),
    ("a bullet", re.compile(r"^\s*[-*•●▪]\s+\S", re.MULTILINE)),
    ("a numbered list", re.compile(r"\n\s*\d+[.)]\s+\S")),
    ("a code fence", re.compile(r"```|~~~")),
    ("inline code", re.compile(r"`[^`\n]+`")),
    ("a markdown link", re.compile(r"\[[^\]\n]+\]\([^)\n]+\)")),
    ("an HTML tag", re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(\s[^<>]*)?/?>")),
]

_PLAIN_WORD = re.compile(r"^[a-z]+$|^[A-Z][a-z]+$|^[A-Z]+$")


def is_internal_id(name: str) -> bool:
    """True when ``name`` looks like an internal identifier rather than a word a person says."""
    return not _PLAIN_WORD.match(name)


@functools.lru_cache(maxsize=4096)
def _token(name: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w])" + re.escape(name) + r"(?![\w])", re.IGNORECASE)


@functools.lru_cache(maxsize=4096)
def _names_screen(names: tuple[str, ...]) -> re.Pattern[str]:
    """Matches somewhere in a text exactly when ``_token(name)`` does for one of ``names``."""
    return re.compile(r"(?<![\w])(?:" + "|".join(re.escape(n) for n in names) + r")(?![\w])", re.IGNORECASE)


def leaked_names(speech: str, brief: Brief) -> list[str]:
    """Internal names found in ``speech``: step ids, underscored fact keys, harness vocabulary.

    The names are looked for one by one only when one search for all of them at once finds one
    (most turns leak nothing)."""
    found: list[str] = []
    steps = [s.id for s in brief.plan if is_internal_id(s.id)]
    facts = [k for k in brief.known_facts if "_" in k]
    if (steps or facts) and _names_screen((*steps, *facts)).search(speech):
        found += [f"plan step id {i!r}" for i in steps if _token(i).search(speech)]
        found += [f"fact name {k!r}" for k in facts if _token(k).search(speech)]
    found += [f"{label!r}" for label, pat in HARNESS_TERMS if pat.search(speech)]
    return found


def speech_problem(speech: str, brief: Brief) -> str | None:
    """The first rule ``speech`` breaks, as ``code: detail``, or None when it is clean."""
    said = len(nfc(speech).strip())  # as the channel hands it on: NFC (sim/channel.py), ends trimmed
    if said > MAX_CALLER_SPEECH_CHARS:
        return (f"too_long: the turn is {said} characters; a caller's turn is at most "
                f"{MAX_CALLER_SPEECH_CHARS} (a routine turn is one short sentence)")
    leaks = leaked_names(speech, brief)
    if leaks:
        return "leak: speech contains internal " + ", ".join(leaks)
    for label, pat in META:
        m = pat.search(speech)
        if m:
            return f"meta_talk: {label} ({m.group(0).strip()!r})"
    for label, pat in MARKUP:
        m = pat.search(speech)
        if m:
            return f"markup: {label} ({m.group(0).strip()!r})"
    m = STAGE_DIRECTION.search(speech)
    if m:
        return f"meta_talk: a stage direction ({m.group(0).strip()!r})"
    return None
