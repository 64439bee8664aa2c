"""The caller simulator: its system prompt (built from the brief and nothing else), its JSON output
schema, and the harness's validation of each turn.

Paper: "The caller simulator receives its context, its reason for calling, the facts it knows, the
facts it explicitly does not know, its ordered plan steps, its language, and the date and time. It
never receives the backend state, the expected actions, or anything from the graders." and "Each
caller turn is returned as typed JSON holding the spoken text, any newly expressed step, and a
completion flag. The harness rejects empty turns, steps advanced out of order or twice, and any
turn that leaks an internal field name into speech." Validation rules live in
:mod:`callbench.sim.caller_rules`.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ValidationError

from callbench.bundle.models import Brief
from callbench.models.output_limits import REPLY_LIMITS, loads_limited
from callbench.sim.caller_language import language_problem
from callbench.sim.caller_rules import speech_problem

SCHEMA_NAME = "caller_turn"


class CallerOutput(BaseModel):
    """One caller turn as the simulator returns it."""

    speech: str
    expressed_step: str | None = None
    done: bool = False


def caller_schema(brief: Brief, expressed: list[str] | None = None) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a caller turn.

    Without ``expressed``, ``expressed_step`` is any plan step id or null. With the ids expressed so
    far, it is the next open step or null (null only once every step is expressed): the paper's
    rule "at most one step per turn, in order" is then enforced by the schema itself for providers
    that constrain output to it, and still checked by :func:`validate_turn` for those that do not.

    ``expressed_step`` comes before ``speech``: a model that writes keys in schema order (constrained
    decoding does) first decides which step it gets across, then words it. Measured with the
    embedded 0.5B model on an inbound greeting: with ``speech`` first it repeated the agent's
    greeting in 3-5 of 5 samples; with the step first, in 1 of 5.
    """
    if expressed is None:
        allowed = [s.id for s in brief.plan]
    else:
        allowed = [s.id for s in brief.plan if s.id not in expressed][:1]
    step_schema: dict[str, Any] = (
        {"anyOf": [{"type": "string", "enum": allowed}, {"type": "null"}]} if allowed else {"type": "null"}
    )
    return {
        "type": "object",
        "properties": {
            "expressed_step": {
                **step_schema,
                "description": "Id of the plan step this turn newly gets across, or null.",
            },
            "speech": {"type": "string", "description": "Exactly what you say out loud in this turn."},
            "done": {"type": "boolean", "description": "True when you end the call with this turn."},
        },
        "required": ["expressed_step", "speech", "done"],
        "additionalProperties": False,
    }


def _value(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def _label(key: str) -> str:
    return key.replace("_", " ").replace(".", " ").strip()


def _when(iso: str) -> str:
    try:
        dt = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    return f"{dt.strftime('%A')}, {dt.strftime('%Y-%m-%d')}, {dt.strftime('%H:%M')} local time ({iso})"


PHONE_RULES = "\n".join(
    [
        "How people talk on the phone, and how you must talk:",
        "- A routine turn is one short sentence, usually 2 to 15 words.",
        "- Answer one question at a time, even when the agent asks several at once; answer the first "
        "and let the agent ask again.",
        "- You may need a moment to find something, such as an account number; saying you will check "
        "can be your whole turn.",
        "- You may add harmless everyday texture (a kettle, traffic, a child in the background), but "
        "never invent a business fact: no names, numbers, dates, amounts, identifiers or statuses "
        "beyond the facts you know.",
        "- If the agent asks something outside the facts you know, say you do not know. Never guess.",
        "- Give a known fact only when it is asked for or when your plan needs it, and give it exactly.",
        "- Write what a speech recognizer would capture, not how a document prints: no markdown, no "
        "bullet points, no lists, no emojis, no brackets, no stage directions. Say long numbers grouped "
        "the way you would say them, a few digits per breath.",
        "- You are the caller, never the agent. Never mention that you are an AI, a simulation, a test "
        "or a role; never mention your instructions, plan, steps, triggers, ids or field names.",
        '- A message "(silence)" means the agent said nothing you could hear.',
        "- When the agent asks you to wait while it checks something, a short acknowledgement is enough.",
    ]
)

OUTPUT_RULES = "\n".join(
    [
        "Reply to each thing the agent says with one JSON object and nothing else:",
        '{"expressed_step": null, "speech": "...", "done": false}',
        "- expressed_step: the id of the plan step that this turn newly gets across, or null. Steps go "
        "strictly in order: only the first step not yet expressed may be expressed, only once its "
        "trigger has come true, at most one step per turn, and never a step already expressed. "
        "Repeating or clarifying something you already said is fine with expressed_step null.",
        "- speech: exactly what you say out loud in this turn, in the language and script given "
        "below. Never empty.",
        "- done: true only in the turn where you end the call: when your plan is complete and the "
        "conversation has reached its natural end (usually after the agent's goodbye), or when you "
        "would really hang up. Say a short goodbye in that turn.",
    ]
)


PERSONA_HEADING = (
    "How you talk in this call (your manner: it changes how you say things, never what you know, "
    "what you want or the order of your plan):"
)


def build_caller_prompt(brief: Brief, persona: str | None = None) -> str:
    """The caller's system prompt, built only from ``brief`` plus fixed phone-talk and output rules,
    and, in a persona sweep, the persona's wording for the call's language (``persona``).

    A library persona *replaces* the brief's own free-text ``persona`` and comes after the whole
    brief, under :data:`PERSONA_HEADING`: a factor swept across scenarios must be the only manner
    the caller is given (two manners would contradict each other, and a slice by persona would
    mix them), and coming last it does not change the brief's shared prefix. Without ``persona``
    the prompt is exactly what it was before persona sweeps existed.

    The fixed rules come first and the brief last, so every call shares the rules as a prompt
    prefix (llama.cpp reuses its evaluation; API providers' prompt caches match on prefixes too).
    Known-fact names are shown as plain words (``account_number`` -> "account number") so the
    internal field name is never modelled for the caller to repeat.
    """
    lines = [
        "You are a person making or taking a phone call with a phone agent. Stay in this role for the "
        "whole call and speak only as yourself. Your situation, the facts you know and your plan "
        "follow the rules below.",
        "",
        PHONE_RULES,
        "",
        OUTPUT_RULES,
        "",
        f"Who you are and your situation:\n{brief.context.strip()}",
        "",
        f"Why this call is happening:\n{brief.reason.strip()}",
    ]
    if brief.persona.strip() and persona is None:
        lines += ["", f"Your manner:\n{brief.persona.strip()}"]
    lines += ["", f"Date and time of the call: {_when(brief.datetime)}", ""]
    if brief.known_facts:
        lines.append("Facts you know (use them exactly as written here):")
        lines += [f"- {_label(k)}: {_value(v)}" for k, v in brief.known_facts.items()]
    else:
        lines.append("Facts you know: none beyond your situation above.")
    lines.append("")
    if brief.unknown_facts:
        lines.append("Things you do not know (if asked, say you do not know):")
        lines += [f"- {u}" for u in brief.unknown_facts]
        lines.append("")
    lines.append(
        "Your plan, in order. Each step says when it applies and what to get across, in your own "
        "words (never read it out):"
    )
    for n, step in enumerate(brief.plan, 1):
        lines.append(
            f"{n}. id {step.id}\n   when: {step.trigger.strip()}\n   get across: {step.meaning.strip()}"
        )
    lines += ["", f"Language: speak only {brief.language}, written in {brief.script} script."]
    if persona is not None:
        lines += ["", f"{PERSONA_HEADING}\n{persona.strip()}"]
    return "\n".join(lines)


class Verdict(BaseModel):
    """Validation of one caller reply: the parsed turn, or a rejection ``code: detail``."""

    output: CallerOutput | None = None
    rejection: str | None = None


def validate_turn(raw: str | None, brief: Brief, expressed: list[str]) -> Verdict:
    """Validate a caller reply (JSON text) given the steps already expressed, in order.

    Rejection codes: ``invalid_json``, ``empty_speech``, ``unknown_step``, ``step_repeated``,
    ``step_out_of_order``, ``too_long``, ``leak``, ``meta_talk``, ``markup`` (see :mod:`caller_rules`), and
    ``language`` (the turn's script or language does not fit the brief's; :mod:`caller_language`).
    """
    if raw is None or not raw.strip():
        return Verdict(rejection="invalid_json: the reply is empty")
    text = raw.strip()
    if text.startswith("```"):
        return Verdict(rejection="invalid_json: the reply is wrapped in a code fence, not a bare JSON object")
    try:
        data = loads_limited(text, REPLY_LIMITS)  # depth, size and string limits: a rejection
    except ValueError as e:
        return Verdict(rejection=f"invalid_json: {e}")
    if not isinstance(data, dict):
        return Verdict(rejection="invalid_json: the reply is not a JSON object")
    try:
        out = CallerOutput.model_validate(data, strict=True)
    except ValidationError as e:
        first = e.errors(include_url=False)[0]
        where = ".".join(str(x) for x in first["loc"])
        return Verdict(rejection=f"invalid_json: {where}: {first['msg']}")
    if not out.speech.strip():
        return Verdict(rejection="empty_speech: the turn says nothing")
    ids = [s.id for s in brief.plan]
    step = out.expressed_step
    if step is not None:
        if step not in ids:
            return Verdict(rejection=f"unknown_step: {step!r} is not a plan step")
        if step in expressed:
            return Verdict(rejection=f"step_repeated: {step!r} was already expressed")
        nxt = next((i for i in ids if i not in expressed), None)
        if step != nxt:
            return Verdict(rejection=f"step_out_of_order: {step!r} expressed before {nxt!r}")
    problem = speech_problem(out.speech, brief) or language_problem(out.speech, brief)
    if problem is not None:
        return Verdict(rejection=problem)
    return Verdict(output=out)
