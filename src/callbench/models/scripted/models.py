"""Deterministic scripted models for the candidate and caller roles (tests, the reference-path
audit, offline smoke runs). No model, no network; every reply is a function of the request and the
bundle, so the same episode always gives the same trace.

Specs (:func:`create_scripted`):

``scripted:reference``
    A candidate replaying the scenario's ``reference_path`` (found through
    ``request.context.scenario_id`` in the bundle given at construction). Candidate turn k (0 = the
    greeting, k = the answer to caller turn k, from ``request.context.turn``) is sent as messages:
    ``before_tools`` with the ``tool_calls`` entries up to the first one marked ``after_results``,
    one more message per call so marked (with the calls after it, up to the next one marked) once
    the previous results are in, then ``speech``. A turn without tool calls is the single message
    ``speech``. A turn beyond the path raises :class:`ModelOutputError` (recorded in the trace).
``scripted:plan``
    A caller that expresses plan step k, in order, at caller turn k, speaking the step's ``meaning``
    as its speech (without asides in parentheses or brackets, which are manner hints, see
    :func:`spoken`). The turn after the last step is ``done: true`` with a short closing line in the
    brief's language (:data:`CLOSINGS`, by primary language subtag; English when the language is
    not listed). It never expresses a step out of order and never ends before the plan is complete.
``scripted:hangup``
    A candidate that only chats: it greets, and on every later turn says a generic goodbye and calls
    a call-ending tool with the smallest arguments its schema allows (first enum value, empty
    string, 0, false, empty list/object for required fields). The tool is the agent's first
    call-ending tool whose name says it simply ends the call (end, hang, close, finish, disconnect,
    goodbye), else its first call-ending tool: hanging up must not pass for a transfer. Without a
    bundle, call-ending tools are recognised by their ``concluding_message`` property. Grading must
    score it low.
``scripted:talk``
    A candidate that only talks and never calls a tool: it greets, then says the same polite,
    noncommittal sentence (:data:`TalkCandidate.LINE`) on every turn, so the call ends when the
    caller gives up or the turn limit is reached. With ``scripted:hangup`` it is the audit's
    do-nothing candidate (the *null floor*); grading must score it low.
``scripted:junk-lookups``, ``scripted:junk-all``, ``scripted:claim-done``, ``scripted:caller-values``
    The gaming candidates of the audit's floor (:mod:`callbench.models.scripted.gaming`).
``scripted:file:<path>``
    Replies from a script file (:mod:`callbench.models.scripted.script`).
``scripted:generator:<path>``
    Scenario answers for ``callbench generate`` (:mod:`callbench.models.scripted.generator`).

The judges' scripted models (``scripted:met`` ...) live in :mod:`callbench.models.scripted.judge`.
"""

from __future__ import annotations

import difflib
import json
import re
import unicodedata
from typing import Any

from callbench.bundle.models import Bundle
from callbench.models.base import (
    ModelClient,
    ModelOutputError,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ToolCall,
)
from callbench.models.output_limits import MAX_CALLER_SPEECH_CHARS
from callbench.models.scripted.hangup import HangupCandidate, ScriptedBase
from callbench.models.scripted.script import ScriptedFileModel

CLOSINGS: dict[str, str] = {
    "en": "Okay, thank you. Bye.",
    "hi": "ठीक है, धन्यवाद। नमस्ते।",
    "mr": "ठीक आहे, धन्यवाद. नमस्कार.",
    "gu": "સારું, આભાર. આવજો.",
    "ta": "சரி, நன்றி. வணக்கம்.",
    "bn": "ঠিক আছে, ধন্যবাদ। রাখছি।",
    "te": "సరే, ధన్యవాదాలు.",
    "kn": "ಸರಿ, ಧನ್ಯವಾದಗಳು.",
    "ml": "ശരി, നന്ദി.",
    "pa": "ਠੀਕ ਹੈ, ਧੰਨਵਾਦ।",
    "or": "ଠିକ ଅଛି, ଧନ୍ୟବାଦ।",
    "ur": "ٹھیک ہے، شکریہ۔ خدا حافظ۔",
    "es": "Vale, gracias. Adiós.",
    "fr": "D'accord, merci. Au revoir.",
    "de": "Okay, danke. Tschüss.",
    "pt": "Está bem, obrigado. Tchau.",
}

SCRIPTED_SPECS = (
    "scripted:reference", "scripted:plan", "scripted:hangup", "scripted:talk", "scripted:junk-lookups",
    "scripted:junk-all", "scripted:claim-done", "scripted:file:<path>", "scripted:generator:<path>",
)

SPECS_BY_ROLE: dict[str, tuple[str, ...]] = {
    "candidate": ("scripted:reference", "scripted:hangup", "scripted:talk", "scripted:junk-lookups",
                  "scripted:junk-all", "scripted:claim-done", "scripted:file:<path>"),
    "caller": ("scripted:plan", "scripted:file:<path>"),
    "generator": ("scripted:generator:<path>",),
}
"""The scripted models that can play each role (judges: ``scripted.judge.SCRIPTED_JUDGE_SPECS``);
a mistyped name is matched against its role's models only, so ``scripted:refrence`` as a
candidate suggests ``scripted:reference``, never a judge."""

GAMING_SPECS = ("scripted:junk-lookups", "scripted:junk-all", "scripted:claim-done", "scripted:caller-values")
"""Candidates that try to collect action-check weight without doing the task."""


def closing_line(language: str) -> str:
    """A short goodbye in ``language`` (BCP 47), by primary subtag; English when not listed."""
    return CLOSINGS.get(language.split("-")[0].lower(), CLOSINGS["en"])


class ReferenceCandidate(ScriptedBase):
    """``scripted:reference`` (see the module docstring)."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        _, scen = self._scenario(request)
        path = scen.reference_path
        if not path:
            raise ModelOutputError(f"{self.spec}: scenario {scen.id!r} has no reference path")
        k = request.context.turn
        if k >= len(path):
            raise ModelOutputError(f"{self.spec}: the reference path of {scen.id!r} has no turn {k}")
        turn = path[k]
        returned: set[str] = set()  # results of this turn so far: the trailing run of tool messages
        for m in reversed(request.messages):
            if m.role not in ("assistant", "tool"):
                break
            returned.add(m.tool_call_id or "")
        rounds = turn.tool_rounds()
        sent = sum(any(f"ref_{k}_{i}" in returned for i, _ in r) for r in rounds)
        if sent >= len(rounds):
            return self._reply(turn.speech)
        calls = [
            ToolCall(id=f"ref_{k}_{i}", name=c.name, arguments=json.dumps(c.arguments, ensure_ascii=False))
            for i, c in rounds[sent]
        ]
        return self._reply(turn.before_tools if sent == 0 else None, calls)


_ASIDE = re.compile(r"\s*[\(\[][^\)\]]*[\)\]]")


def spoken(meaning: str) -> str:
    """A plan step's meaning as the scripted caller says it: asides in parentheses or brackets (manner
    hints such as "(annoyed)") removed, whitespace collapsed; the whole meaning if nothing is left;
    in NFC, cut to the longest caller turn the harness accepts
    (:data:`~callbench.models.output_limits.MAX_CALLER_SPEECH_CHARS`: a meaning is written for a
    model caller, which puts it in its own words, and may run longer than one turn): at the last
    word boundary within it, or at the limit itself when that boundary would drop more than a
    fifth of it (a word as long as the turn)."""
    text = " ".join(_ASIDE.sub("", meaning).split())
    text = re.sub(r"\s+([,.!?;:।])", r"\1", text)
    text = unicodedata.normalize("NFC", text or " ".join(meaning.split()))
    limit = MAX_CALLER_SPEECH_CHARS
    if len(text) <= limit:
        return text
    head = text[: limit + 1]
    cut = head.rsplit(" ", 1)[0].rstrip() if " " in head else ""
    return cut if len(cut) >= limit * 4 // 5 else text[:limit].rstrip()


class PlanCaller(ScriptedBase):
    """``scripted:plan`` (see the module docstring)."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        _, scen = self._scenario(request)
        plan = scen.brief.plan
        done_turns = sum(1 for m in request.messages if m.role == "assistant")
        k = request.context.turn or done_turns + 1
        if k <= len(plan):
            step = plan[k - 1]
            out: dict[str, Any] = {"speech": spoken(step.meaning), "expressed_step": step.id, "done": False}
        else:
            out = {"speech": closing_line(scen.brief.language), "expressed_step": None, "done": True}
        return self._reply(json.dumps(out, ensure_ascii=False))


class TalkCandidate(ScriptedBase):
    """``scripted:talk`` (see the module docstring)."""

    GREETING = HangupCandidate.GREETING
    LINE = "I understand. I am here to help you with that, please go on."

    async def complete(self, request: ModelRequest) -> ModelResponse:
        name = "the service"
        if self.bundle is not None and request.context.agent_id in self.bundle.agents:
            name = self.bundle.agents[request.context.agent_id].config.name
        if request.context.turn == 0:
            return self._reply(self.GREETING.format(name=name))
        return self._reply(self.LINE)


def create_scripted(
    spec: str, settings: ModelSettings | None = None, bundle: Bundle | None = None, role: str | None = None
) -> ModelClient:
    """Create the scripted candidate or caller model named by ``spec`` (see the module docstring).

    Raises ``ValueError`` for an unknown spec (suggesting the closest models of ``role``, see
    :data:`SPECS_BY_ROLE`; of every role when None), for ``scripted:reference`` / ``scripted:plan``
    without a bundle, and for an unreadable or invalid script file.
    """
    if spec == "scripted:reference":
        if bundle is None:
            raise ValueError(
                "scripted:reference needs the bundle (it replays each scenario's reference path)"
            )
        return ReferenceCandidate(spec, settings, bundle)
    if spec == "scripted:plan":
        if bundle is None:
            raise ValueError("scripted:plan needs the bundle (it speaks each scenario's plan steps)")
        return PlanCaller(spec, settings, bundle)
    if spec == "scripted:hangup":
        return HangupCandidate(spec, settings, bundle)
    if spec == "scripted:talk":
        return TalkCandidate(spec, settings, bundle)
    if spec in GAMING_SPECS:
        from callbench.models.scripted.gaming import GamingCandidate

        return GamingCandidate(spec, settings, bundle)
    if spec.startswith("scripted:generator:"):
        from pathlib import Path

        from callbench.models.scripted.generator import ScriptedGenerator

        gpath = spec.removeprefix("scripted:generator:")
        if not gpath:
            raise ValueError("scripted:generator: needs a path, e.g. scripted:generator:answers.yaml")
        return ScriptedGenerator(spec, settings, Path(gpath))
    if spec.startswith("scripted:file:"):
        path = spec.removeprefix("scripted:file:")
        if not path:
            raise ValueError("scripted:file: needs a path, e.g. scripted:file:dialogue.yaml")
        return ScriptedFileModel.from_file(path, settings)
    from callbench.models.scripted.judge import SCRIPTED_JUDGE_SPECS

    if spec in SCRIPTED_JUDGE_SPECS and role not in ("task_judge", "conversation_judge"):
        raise ValueError(f"{spec} is a scripted judge, for --task-judge and --conversation-judge; as a "
                         f"candidate or caller use one of {', '.join(SCRIPTED_SPECS)}")
    mine: tuple[str, ...]
    if role in ("task_judge", "conversation_judge"):
        mine, label = SCRIPTED_JUDGE_SPECS, "scripted judges"
    elif role in SPECS_BY_ROLE:
        mine, label = SPECS_BY_ROLE[role], f"scripted {role}s"
    else:
        mine, label = (*SCRIPTED_SPECS, *SCRIPTED_JUDGE_SPECS), "scripted models"
    # names compare without the "scripted:" every one shares (it made any two names look alike),
    # and "<path>" placeholders as their prefix ("file:")
    names = {m.removeprefix("scripted:").removesuffix("<path>"): m for m in mine}
    close = difflib.get_close_matches(spec.removeprefix("scripted:"), list(names), n=2, cutoff=0.6)
    hint = f"did you mean {' or '.join(names[c] for c in close)}? " if close else ""
    raise ValueError(f"unknown scripted model {spec!r}{f' for the {role}' if role else ''}; {hint}"
                     f"{label}: {', '.join(mine)}")
