"""Tool calls that a server returns as JSON text in ``content`` instead of ``tool_calls``.

Some OpenAI-compatible servers put the tool list in the prompt but do not parse the model's calls
out of its answer: llama-cpp-python 0.3.36 with a GGUF's own chat template answered
``{"name": "lookup_order", "arguments": {"order_id": "A123"}}`` as the message's ``content``, and
with its ``chatml-function-calling`` format ``functions.lookup_order:``. Spoken, such a
reply would be JSON read out to the caller; executed, it is the call the model meant. The
``openai:`` adapter therefore either parses it (the opt-in setting ``parse_content_tool_calls``) or
records it as a candidate output error of kind ``tool_call_in_content`` (never silent speech).

Forms recognised (the ones chat templates teach; the text around them is the speech):

- ``<tool_call>{...}</tool_call>`` blocks (Qwen2.5, Hermes templates), anywhere in the text;
- ``functions.<name>:`` lines, each optionally followed by a JSON object of arguments
  (llama-cpp-python's ``chatml-function-calling``);
- JSON objects or lists of objects ending the text, one or several (one per line, back to back
  or separated by commas), optionally in a code fence or after ``[TOOL_CALLS]`` /
  ``<|python_tag|>``, each ``{"name", "arguments"|"parameters"}``,
  ``{"function": {"name", "arguments"}}`` or ``{"tool_calls": [...]}``.

Every call found is returned, in order (with several objects one per line only the last
was executed and the others read to the caller as speech). The episode loop executes up to the
paper's limit of ten per turn and answers later ones ``limit_reached`` (``sim/conversation.py``),
so none is dropped silently.

A JSON object counts as a call only when ``name`` is a string naming one of the offered tools, so
ordinary speech that happens to contain JSON is left alone; if any value in the trailing run is not
a call, the text is left alone too.

:func:`truncated_call` finds a call cut off in the middle (a reply that ran into ``max_tokens``:
an unterminated JSON object that starts like a call of an offered tool); the adapter records it
as a candidate output error of kind ``truncated_call``, never as speech.
"""

from __future__ import annotations

import json
import re
from typing import Any

from callbench.models.base import ToolCall

_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FUNCTIONS = re.compile(r"^[ \t]*functions\.([A-Za-z0-9_.-]+?):[ \t]*$", re.MULTILINE)
_FENCE = re.compile(r"```[A-Za-z]*\s*(.*?)\s*```\s*$", re.DOTALL)
_PREFIXES = ("[TOOL_CALLS]", "<|python_tag|>")


def _call_of(obj: Any, names: frozenset[str]) -> ToolCall | None:
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict):
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or name not in names:
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    raw = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return ToolCall(id="", name=name, arguments=raw)


def _calls_of(value: Any, names: frozenset[str]) -> list[ToolCall] | None:
    """The calls in a decoded JSON value, or None unless every item is a call."""
    if isinstance(value, dict) and isinstance(value.get("tool_calls"), list):
        value = value["tool_calls"]
    items = value if isinstance(value, list) else [value]
    calls = [_call_of(item, names) for item in items]
    if not calls or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


_SEPARATORS = " \t\r\n,"


def _values_to_end(text: str, start: int) -> list[Any] | None:
    """The JSON values from ``start`` to the end of ``text`` (whitespace or commas between them),
    or None when something else is in the way."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    pos = start
    while pos < len(text):
        try:
            value, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return None
        values.append(value)
        while pos < len(text) and text[pos] in _SEPARATORS:
            pos += 1
    return values


def _trailing_json(text: str, names: frozenset[str]) -> tuple[str, list[ToolCall]] | None:
    """(speech before, calls) when ``text`` ends with one or more JSON values that are all calls."""
    for start in (i for i, ch in enumerate(text) if ch in "{["):
        values = _values_to_end(text, start)
        if not values:
            continue
        calls: list[ToolCall] = []
        for value in values:
            found = _calls_of(value, names)
            if found is None:
                return None  # a trailing value that is not a call: the text is left alone
            calls += found
        return text[:start], calls
    return None


_CALL_HEAD = re.compile(r'\{\s*"(?:name|function)"\s*:\s*(?:\{\s*"name"\s*:\s*)?"([A-Za-z0-9_.-]*)')


def truncated_call(content: str | None, tool_names: list[str]) -> str | None:
    """The (possibly partial) tool name of a call that ``content`` starts but never finishes: its
    last ``{"name": "<offered tool or a prefix of one>"...`` (or ``{"function": {"name": ...``)
    does not decode as JSON because the text ends inside it. None when there is no such call."""
    if not content or not tool_names:
        return None
    heads = list(_CALL_HEAD.finditer(content))
    if not heads:
        return None
    last = heads[-1]
    partial = last.group(1)
    if not any(name.startswith(partial) for name in tool_names):
        return None
    try:
        json.JSONDecoder().raw_decode(content, last.start())
    except ValueError:
        return partial
    return None


def _functions_lines(text: str, names: frozenset[str]) -> tuple[str, list[ToolCall]] | None:
    matches = list(_FUNCTIONS.finditer(text))
    if not matches or any(m.group(1) not in names for m in matches):
        return None
    decoder = json.JSONDecoder()
    calls = []
    for i, m in enumerate(matches):
        stop = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        body = text[m.end():stop].strip()
        args = "{}"
        if body:
            try:
                value, end = decoder.raw_decode(body)
            except ValueError:
                args = body  # malformed arguments: the backend reports them as such
            else:
                args = body[:end] if isinstance(value, dict) else body
        calls.append(ToolCall(id="", name=m.group(1), arguments=args))
    return text[: matches[0].start()], calls


def content_tool_calls(content: str | None, tool_names: list[str]) -> tuple[str | None, list[ToolCall]]:
    """Split ``content`` into (speech, tool calls) when it holds calls of ``tool_names`` in one of
    the forms of the module docstring; ``(content, [])`` when it holds none. Speech is stripped,
    None when nothing is left. Call ids are empty (the conversation assigns them)."""
    if not content or not tool_names:
        return content, []
    names = frozenset(tool_names)
    tagged = list(_TAGGED.finditer(content))
    if tagged:
        calls: list[ToolCall] = []
        for m in tagged:
            try:
                found = _calls_of(json.loads(m.group(1)), names)
            except ValueError:
                found = None
            if found is None:
                return content, []
            calls += found
        speech = _TAGGED.sub("", content).strip()
        return speech or None, calls
    lines = _functions_lines(content, names)
    if lines is not None:
        return lines[0].strip() or None, lines[1]
    text = content.strip()
    for prefix in _PREFIXES:
        text = text.replace(prefix, "\n")
    fenced = _FENCE.search(text)
    if fenced:
        inner = _trailing_json(fenced.group(1).strip(), names)
        if inner is not None and not inner[0].strip():
            return text[: fenced.start()].strip() or None, inner[1]
    trailing = _trailing_json(text, names)
    if trailing is not None:
        return trailing[0].strip() or None, trailing[1]
    return content, []
