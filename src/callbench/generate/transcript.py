"""A real call as material for a scenario: reading a transcript, replacing its PII, and the
fixtures and action-check drafts its tool calls give.

Shapes read (:func:`read_transcript`), detected from the content:

- **callbench JSON**: ``{"turns": [TURN, ...]}``, or **JSONL**: one TURN per line. A TURN is
  ``{"role": "caller" | "agent", "text": "..."}``, an agent turn may carry ``"tool_calls":
  [{"id": "c1", "name": "lookup", "arguments": {...}}]``, and ``{"role": "tool", "tool_call_id":
  "c1", "result": {...}}`` answers one.
- **OpenAI-style message list**: ``[{"role": "system" | "user" | "assistant" | "tool", ...}]``
  (or ``{"messages": [...]}``): ``user`` is the caller, ``assistant`` the agent, its
  ``tool_calls[].function.arguments`` a JSON string, ``tool`` messages' ``content`` the result
  (JSON when it parses). System messages are dropped (they are the agent's prompt, not the call).
- **Vapi and Retell call objects** (``GET /call/{id}`` and ``GET /v2/get-call/{call_id}``):
  converted to the rows above by :mod:`callbench.generate.call_exports`, whose docstring cites the
  platforms' documentation of each field read.

PII (:func:`redact`) is replaced *before* anything else sees the transcript: phone numbers
(8 to 13 digits, separators allowed), e-mail addresses, card numbers (13 to 19 digits passing the
Luhn check) and the names the user lists. Each distinct value gets one placeholder for the whole
transcript, so the same phone number in a caller turn and in a tool argument stays the same value:
``9000000001`` (phones, same digit count), ``person1@example.com``, ``4000000000000002``-style
Luhn-valid test cards, ``Person A`` (names). Placeholders are plausible values so that a draft
scenario built on them still runs.

A whole draft scenario (brief, goal, criteria and reference path from the generator model, with
these fixtures and checks) is made by :mod:`callbench.generate.transcript_import`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from callbench.generate.call_exports import retell_rows, vapi_rows


class TranscriptError(ValueError):
    """The file is not a transcript of a supported shape; the message says where."""


class ToolCall(BaseModel):
    id: str = ""
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: Any = None


class Turn(BaseModel):
    role: Literal["caller", "agent"]
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)


class Transcript(BaseModel):
    """A call as turns, tool results attached to the calls they answer."""

    turns: list[Turn] = Field(default_factory=list)

    def caller_lines(self) -> list[str]:
        return [t.text for t in self.turns if t.role == "caller" and t.text.strip()]

    def tool_calls(self) -> list[ToolCall]:
        return [c for t in self.turns for c in t.tool_calls]


def _load(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TranscriptError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise TranscriptError(f"{path}:{n}: neither JSON nor JSONL: {e.msg}") from None
        return rows


def _arguments(raw: Any, where: str) -> dict[str, Any]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw or "{}")
        except json.JSONDecodeError as e:
            raise TranscriptError(f"{where}: arguments are not JSON: {e.msg}") from None
    if not isinstance(raw, dict):
        raise TranscriptError(f"{where}: arguments must be a JSON object")
    return raw


def _result(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


def parse_transcript(data: Any, source: str = "transcript") -> Transcript:
    """A :class:`Transcript` from loaded JSON data of any shape of the module docstring. Raises
    :class:`TranscriptError` naming the entry (``source:messages.3``) that does not fit."""
    for convert in (vapi_rows, retell_rows):
        found = convert(data)
        if found is not None:
            data, source = found[0], f"{source}:{found[1]}"
            break
    rows = data.get("turns", data.get("messages")) if isinstance(data, dict) else data
    if not isinstance(rows, list) or not rows:
        raise TranscriptError(f"{source}: expected a list of turns or messages (or {{\"turns\": [...]}})")
    turns: list[Turn] = []
    pending: dict[str, ToolCall] = {}
    for i, row in enumerate(rows):
        where = f"{source}:{i}"
        if not isinstance(row, dict) or not isinstance(row.get("role"), str):
            raise TranscriptError(f"{where}: each entry is an object with a role")
        role = row["role"]
        if role == "system":
            continue
        if role == "tool":
            cid = str(row.get("tool_call_id", ""))
            open_calls = [c for c in pending.values() if c.result is None]
            call = pending.get(cid) or (open_calls[-1] if open_calls else None)
            if call is None:
                raise TranscriptError(f"{where}: a tool result answers no tool call")
            call.result = _result(row.get("result", row.get("content")))
            continue
        if role not in ("caller", "agent", "user", "assistant"):
            raise TranscriptError(f"{where}: unknown role {role!r} (caller, agent, tool; or user, assistant)")
        text = row.get("text", row.get("content")) or ""
        if not isinstance(text, str):
            raise TranscriptError(f"{where}: the text must be a string")
        calls = []
        for j, c in enumerate(row.get("tool_calls") or []):
            fn = c.get("function", c) if isinstance(c, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                raise TranscriptError(f"{where}.tool_calls.{j}: a tool call needs a name")
            call = ToolCall(id=str(c.get("id", "")), name=fn["name"],
                            arguments=_arguments(fn.get("arguments", {}), f"{where}.tool_calls.{j}"),
                            result=_result(c["result"]) if "result" in c else None)
            pending[call.id or f"{i}.{j}"] = call
            calls.append(call)
        who: Literal["caller", "agent"] = "caller" if role in ("caller", "user") else "agent"
        turns.append(Turn(role=who, text=text, tool_calls=calls))
    return Transcript(turns=turns)


def read_transcript(path: str | Path) -> Transcript:
    """Read and parse the transcript file ``path`` (JSON or JSONL)."""
    p = Path(path)
    return parse_transcript(_load(p), str(p))


_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_DIGITS = re.compile(r"(?<![\w])\+?\d(?:[\d \-().]{6,24}\d)(?![\w])")


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _luhn_card(n: int, length: int) -> str:
    body = ("4" + str(n).zfill(length - 2))[: length - 1]
    return next(body + c for c in "0123456789" if _luhn(body + c))


class Redactor:
    """Consistent placeholders for one transcript (module docstring); ``found`` maps each kind to
    how many distinct values were replaced."""

    def __init__(self, names: list[str]) -> None:
        self.names = sorted({n.strip() for n in names if n.strip()}, key=len, reverse=True)
        self.seen: dict[str, str] = {}
        self.found: dict[str, int] = {"phone": 0, "email": 0, "card": 0, "name": 0}

    def _sub(self, kind: str, value: str, make: Callable[[int], str]) -> str:
        key = f"{kind}:{value}"
        if key not in self.seen:
            self.found[kind] += 1
            self.seen[key] = make(self.found[kind])
        return self.seen[key]

    def text(self, s: str) -> str:
        for name in self.names:
            def person(m: re.Match[str], n: str = name) -> str:
                return self._sub("name", n.casefold(), lambda k: f"Person {chr(64 + k) if k <= 26 else k}")

            s = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", person, s, flags=re.IGNORECASE)
        s = _EMAIL.sub(lambda m: self._sub("email", m.group().lower(), lambda k: f"person{k}@example.com"), s)

        def number(m: re.Match[str]) -> str:
            digits = re.sub(r"\D", "", m.group())
            if 13 <= len(digits) <= 19 and _luhn(digits):
                return self._sub("card", digits, lambda k: _luhn_card(k, len(digits)))
            if 8 <= len(digits) <= 13:
                return self._sub("phone", digits, lambda k: "9" + str(k).zfill(len(digits) - 1))
            return m.group()

        return _DIGITS.sub(number, s)

    def value(self, v: Any) -> Any:
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()}
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, int) and not isinstance(v, bool) and 8 <= len(str(abs(v))) <= 19:
            out = self.text(str(v))
            return int(out) if out.isdigit() else out
        return v


def redact(transcript: Transcript, names: list[str] | None = None) -> tuple[Transcript, dict[str, int]]:
    """``transcript`` with every PII value replaced (module docstring) in turn texts, tool
    arguments and results, and the count of distinct values replaced by kind."""
    r = Redactor(names or [])
    turns = [Turn(role=t.role, text=r.text(t.text), tool_calls=[
        ToolCall(id=c.id, name=c.name, arguments=r.value(c.arguments), result=r.value(c.result))
        for c in t.tool_calls]) for t in transcript.turns]
    return Transcript(turns=turns), dict(r.found)


REVIEW_MARK = "FOR REVIEW:"
"""Starts the description of every drafted action check: a person says whether the call was right."""


def draft_fixtures(
    transcript: Transcript, tools: set[str], call_ending: frozenset[str] | set[str] = frozenset()
) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """Fixtures (per tool, a queue entry per call in order: each argument matched with ``eq``, the
    call's result as the response) and action-check drafts (one per call, its description starting
    with :data:`REVIEW_MARK`) from the transcript's tool calls, as scenario data (``fixtures``,
    ``action_checks``); and the names of called tools the agent does not have (left out). A call of
    a ``call_ending`` tool gets its fixture but no check: every call ends, so a check on it is met
    by an agent that does nothing but hang up (the null-floor audit rejects it), and the outcome's
    success condition already grades how the call ended."""
    fixtures: dict[str, Any] = {}
    checks: list[dict[str, Any]] = []
    unknown: list[str] = []
    for n, call in enumerate(transcript.tool_calls()):
        if call.name not in tools:
            unknown.append(call.name)
            continue
        args = {k: {"eq": v} for k, v in call.arguments.items()}
        response = call.result if isinstance(call.result, dict) else {"result": call.result}
        entry = {"args": args, "response": response,
                 "mismatch_response": {"error": "these arguments differ from the recorded call"}}
        fixtures.setdefault(call.name, {"queue": []})["queue"].append(entry)
        if call.name in call_ending:
            continue
        checks.append({"id": f"call_{n + 1}_{call.name}", "tool": call.name, "args": args,
                       "description": f"{REVIEW_MARK} the recorded call made this call; keep the check only "
                       "if it was the right thing to do"})
    return fixtures, checks, sorted(set(unknown))
