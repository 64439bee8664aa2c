"""Reading the generator model's answer: fenced JSON and cut-off answers get
their own messages and repair steps instead of a bare JSON error.

- A JSON object wrapped in a Markdown code fence (```` ```json ... ``` ````), which chat models
  write out of habit, is unwrapped and read; the attempt records the note ``output.fenced``.
- An answer cut off at its output budget (the provider's ``finish_reason: length``, or as many
  output tokens as the budget allowed) is ``output.truncated``: the message gives the budget and
  how far the answer got, and the next request gets a larger budget (``budget.repair_budget``).
- Anything else that is not a schema-valid JSON object is ``output.invalid`` with the parser's or
  the schema validator's message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from callbench.models.base import ModelOutputError, Usage
from callbench.models.output import check_json_output

_FENCE = re.compile(r"\A\s*```[A-Za-z0-9_-]*[ \t]*\r?\n(?P<body>.*?)\r?\n?```\s*\Z", re.DOTALL)


def unfence(text: str) -> str | None:
    """The body of ``text`` when it is one Markdown code fence (any info string), else None."""
    m = _FENCE.match(text)
    return m.group("body") if m else None


@dataclass
class ReadAnswer:
    """The parsed answer (None when unusable), its problems as (code, message), and notes that do
    not reject it (``output.fenced``)."""

    data: Any = None
    problems: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    truncated: bool = False


def read_answer(
    text: str | None,
    schema: dict[str, Any],
    *,
    usage: Usage | None,
    finish_reason: str | None,
    budget: int,
    client_error: str | None = None,
) -> ReadAnswer:
    """Read one answer (module docstring). ``budget`` is the output budget the request had (tokens);
    ``client_error`` the client's own message when it already refused the output."""
    out = ReadAnswer()
    body = text
    fenced = unfence(text) if text else None
    if fenced is not None:
        body = fenced
        out.notes.append("output.fenced: the answer was wrapped in a Markdown code fence; unwrapped")
    try:
        out.data = check_json_output(body, schema, usage=usage)
        if fenced is None and client_error is not None:  # the client refused what we accept
            out.notes.append(f"output: the client reported {client_error}")
        return out
    except ModelOutputError as err:
        message = str(err) if (client_error is None or fenced is not None) else client_error
    used = usage.output_tokens if usage is not None else 0
    if finish_reason == "length" or (used and used >= budget):
        out.truncated = True
        got = len(text or "")
        out.problems.append((
            "output.truncated",
            f"the answer was cut off at its output budget of {budget:,} tokens "
            f"(finish_reason: {finish_reason or 'length'}; {used:,} tokens, {got:,} characters written) "
            "before the JSON object was complete; write the whole scenario again as one JSON object, "
            "concisely: short turns, no repeated text, only the fields the scenario needs",
        ))
        return out
    if fenced is not None:
        message += " (inside the code fence)"
    out.problems.append(("output.invalid", message + "; answer with one JSON object and nothing else"))
    return out
