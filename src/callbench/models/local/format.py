"""Prompt and output format of the embedded local model (pure functions; no llama.cpp needed).

Small models call tools unreliably in free form, but JSON-schema constrained output always
parses (DESIGN.md "Embedded default model"). So a candidate answers every turn with one JSON object

    {"speech": "<words spoken to the caller>" | null,
     "tool_calls": [{"name": "<tool>", "arguments": {...}}, ...]}

decoded under a grammar built from :func:`candidate_output_schema`: ``name`` is one of the offered
tools and ``arguments`` that tool's own parameter schema (an ``anyOf`` over the tools), at most
``MAX_TOOL_CALLS`` calls per message (the paper's limit of ten chained calls). Callers and judges
are constrained to their ``response_schema``.

Prompt order: llama.cpp re-evaluates only the tokens after the longest common prefix with the
previous prompt of the same instance. A candidate's tools list and answer format follow the
operating document, as in Qwen2.5's own tool template (tried first: both first, for a longer
shared prefix; the 0.5B model then answered an inbound call's first turn by calling every listed
tool in order, 254 tokens, against a 26-token greeting with them last). When the document ends
with a call-specific section, the tools list goes before that section and the answer format
after it (:func:`tools_block_position`; with both blocks before it, the 0.5B model called a tool
with its schema as arguments, then chained calls to the loop limit).
A caller's or judge's JSON Schema block, which changes from turn to turn (e.g. the caller's next
open plan step), is appended to the last user message, so the system prompt and the history
before it are reused. Earlier candidate turns are shown in the same JSON form so the model sees
its own format; tool results are shown as ``<tool_response>`` blocks in a user turn (the Qwen2.5 chat
format) and consecutive messages of one role are merged (some chat templates require alternation).
"""

from __future__ import annotations

import json
from typing import Any

from callbench.models.base import ModelOutputError, ModelRequest, ToolCall, ToolSchema, Usage
from callbench.models.conversation import normalize_messages
from callbench.models.remote.schemas import clean_schema, map_subschemas

MAX_TOOL_CALLS = 10

TOOLS_LIST = """\
# Tools
You can call these tools. Each line gives a tool's name, what it does, and the JSON Schema of its arguments:
<tools>
{tools}
</tools>"""

ANSWER_FORMAT = """\
# How to answer
Answer every turn with one JSON object: {{"speech": ..., "tool_calls": [...]}}.
- "speech": the exact words you say aloud to the caller, or null when you say nothing this turn.
- "tool_calls": the tools to call now, in order, each as
  {{"name": "<tool name>", "arguments": {{...}}}}; [] when you call none.
Tool results come back to you in the next message, before the caller speaks again."""

FORMAT_JSON = """\
# How to answer
Answer with one JSON object that matches this JSON Schema:
{schema}"""


def grammar_friendly(schema: Any) -> Any:
    """A copy of ``schema`` for grammar-constrained decoding: objects that list properties and do
    not mention ``additionalProperties`` get ``false`` (a small model otherwise invents keys).
    Only keyword positions are visited (an ``enum`` value is left alone)."""
    if not isinstance(schema, dict):
        return schema
    out = map_subschemas(schema, grammar_friendly)
    if isinstance(out.get("properties"), dict):
        out.setdefault("additionalProperties", False)
    return out


STRING_MAX_CHARS = 400
ARRAY_MAX_ITEMS = 8
"""Caps on free strings and arrays in a local model's constrained output (speech, a judge's reason
and cited indices, a tool argument without its own bounds): small models can loop inside a
string or an array until the token limit (seen: 0.5B judges wrote 999 tokens, mostly a cited-index
list repeating "0, 1, 2", 100 s per reply, then failed as unparsable)."""


def cap_sizes(schema: Any, max_chars: int = STRING_MAX_CHARS, max_items: int = ARRAY_MAX_ITEMS) -> Any:
    """A copy of ``schema`` in which every string schema with no ``maxLength``, ``enum``,
    ``const``, ``pattern`` or ``format`` gets ``maxLength: max_chars``, and every array schema with
    no ``maxItems`` gets ``maxItems: max_items`` (keyword positions only). Output that fits the copy
    also fits the original, so only the grammar is built from the copy."""
    if not isinstance(schema, dict):
        return schema
    out = map_subschemas(schema, lambda sub: cap_sizes(sub, max_chars, max_items))
    kind = out.get("type")
    if kind == "string" and not ({"maxLength", "enum", "const", "pattern", "format"} & out.keys()):
        out["maxLength"] = max_chars
    if kind == "array" and "maxItems" not in out:
        out["maxItems"] = max(max_items, int(out.get("minItems", 0)))
    return out


def tool_arguments_schema(tool: ToolSchema) -> dict[str, Any]:
    """The schema that constrains ``tool``'s arguments (cleaned, closed objects)."""
    schema = clean_schema(tool.parameters, "local") if isinstance(tool.parameters, dict) else {}
    if "type" not in schema:
        schema = {"type": "object", **schema}
    return grammar_friendly(schema)


def candidate_output_schema(tools: list[ToolSchema], arguments: dict[str, dict[str, Any]] | None = None,
                            ) -> dict[str, Any]:
    """The "speech, tool calls or both" schema. ``arguments`` overrides a tool's argument schema
    (e.g. a simplified one when the original cannot be turned into a grammar)."""
    arguments = arguments or {}
    speech = {"anyOf": [{"type": "string"}, {"type": "null"}]}
    if not tools:
        return {"type": "object",
                "properties": {"speech": speech, "tool_calls": {"type": "array", "maxItems": 0}},
                "required": ["speech", "tool_calls"], "additionalProperties": False}
    variants = [
        {"type": "object",
         "properties": {"name": {"const": t.name},
                        "arguments": arguments.get(t.name, tool_arguments_schema(t))},
         "required": ["name", "arguments"], "additionalProperties": False}
        for t in tools
    ]
    return {
        "type": "object",
        "properties": {
            "speech": speech,
            "tool_calls": {"type": "array", "items": {"anyOf": variants}, "maxItems": MAX_TOOL_CALLS},
        },
        "required": ["speech", "tool_calls"],
        "additionalProperties": False,
    }


def candidate_blocks(request: ModelRequest) -> tuple[str, str]:
    """The candidate's ``(tools list, answer format)`` blocks for the system prompt."""
    lines = [
        json.dumps(
            {"name": t.name, "description": t.description, "parameters": clean_schema(t.parameters, "local")},
            ensure_ascii=False,
        )
        for t in request.tools
    ]
    return TOOLS_LIST.format(tools="\n".join(lines) if lines else "(none)"), ANSWER_FORMAT.format()


def schema_block(schema: dict[str, Any]) -> str:
    """The output instructions of a caller or judge: answer with JSON matching ``schema``."""
    return FORMAT_JSON.format(schema=json.dumps(schema, ensure_ascii=False))


def tools_block_position(system: str, static_chars: int) -> int:
    """Where the candidate's tools list goes in ``system`` (a character offset); the answer format
    always ends the system prompt.

    At the end, unless the operating document ends with a call-specific section: when the first
    call-specific character (``static_chars``, ``ModelRequest.static_system_chars``) lies in a
    markdown section (a line starting with ``#``) that begins in the second half of the document,
    the list goes just before that section's heading. llama.cpp then reuses the document and the
    list from one call of the agent to the next and re-reads only the call-specific section and
    the answer format (measured on the LPG helpline agent, 2 cores: 158 tokens re-read per call
    instead of 1,422, ~30 s less a call, and the same first turn as with both blocks at the end).
    A document whose variables come early keeps the list at the end (the 0.5B model answered with
    every tool in order when the list came first; see the module docstring)."""
    if not 0 < static_chars < len(system):
        return len(system)
    heading = system.rfind("\n#", 0, static_chars + 1)
    if heading < 0 or heading < len(system) / 2:
        return len(system)
    return heading + 1


def _assistant_json(content: str | None, calls: list[ToolCall]) -> str:
    rendered = []
    for call in calls:
        try:
            args: Any = json.loads(call.arguments)
        except json.JSONDecodeError:
            args = call.arguments
        rendered.append({"name": call.name, "arguments": args})
    return json.dumps({"speech": content if content else None, "tool_calls": rendered}, ensure_ascii=False)


def chat_messages(request: ModelRequest) -> list[dict[str, str]]:
    """The request as alternating ``system``/``user``/``assistant`` messages for a chat template.

    A candidate's answer format ends the system message, and its tools list comes just before it
    or before a call-specific last section (:func:`tools_block_position`). A caller's or judge's
    JSON Schema block ends the last user message, or is sent as a final user message after an
    assistant message. See the module docstring for why."""
    conv = normalize_messages(request.messages)
    candidate_format = request.response_schema is None
    names = {c.id: c.name for m in conv.messages for c in m.tool_calls}
    system = conv.system or ""
    if candidate_format:
        tools_list, answer_format = candidate_blocks(request)
        at = tools_block_position(system, request.static_system_chars)
        head, tail = system[:at].rstrip("\n"), system[at:].rstrip("\n")
        system = "\n\n".join(part for part in (head, tools_list, tail, answer_format) if part)
    out: list[dict[str, str]] = [{"role": "system", "content": system}]
    for msg in conv.messages:
        if msg.role == "assistant":
            role = "assistant"
            text = _assistant_json(msg.content, msg.tool_calls) if candidate_format else (msg.content or "")
        elif msg.role == "tool":
            role = "user"
            name = names.get(msg.tool_call_id or "", "tool")
            text = f'<tool_response name="{name}">\n{msg.content or ""}\n</tool_response>'
        else:
            role, text = "user", msg.content or ""
        if out[-1]["role"] == role and role != "system":
            out[-1]["content"] += "\n" + text
        else:
            out.append({"role": role, "content": text})
    if request.response_schema is not None:
        block = schema_block(request.response_schema)
        if out[-1]["role"] == "user":
            out[-1]["content"] += "\n\n" + block
        else:
            out.append({"role": "user", "content": block})
    return out


def parse_candidate_output(text: str, *, turn_key: int, usage: Usage | None = None,
                           ) -> tuple[str | None, list[ToolCall]]:
    """``(speech, tool calls)`` from a constrained candidate answer.

    Call ids are ``call_<turn_key>_<i>`` (``turn_key`` is the number of messages in the request,
    so ids are unique within a conversation and the same on every replay). Every call is kept, in
    order (the grammar allows :data:`MAX_TOOL_CALLS`). Arguments are kept as JSON text. Raises
    ModelOutputError with the raw text when ``text`` is not such an object; of kind
    ``truncated_call`` when it was cut off inside its ``tool_calls`` list (generation stopped at
    the token limit in the middle of a call: nothing of it is executed or spoken).
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        calls_part = text.partition('"tool_calls"')[2]
        if calls_part and "{" in calls_part:
            raise ModelOutputError(
                "truncated_call: the local model's answer was cut off inside its tool_calls list (it hit "
                "the token limit in the middle of a call); nothing of it was executed or spoken",
                raw=text, usage=usage, kind="truncated_call") from None
        raise ModelOutputError(f"local model output is not valid JSON ({exc.msg} at column {exc.colno}); "
                               "it may have hit the token limit", raw=text, usage=usage) from None
    if not isinstance(value, dict):
        raise ModelOutputError("local model output is not a JSON object", raw=text, usage=usage)
    speech = value.get("speech")
    if speech is not None and not isinstance(speech, str):
        raise ModelOutputError("local model output: 'speech' is not a string or null", raw=text, usage=usage)
    raw_calls = value.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise ModelOutputError("local model output: 'tool_calls' is not a list", raw=text, usage=usage)
    calls: list[ToolCall] = []
    for i, item in enumerate(raw_calls):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ModelOutputError(f"local model output: tool_calls[{i}] has no name", raw=text, usage=usage)
        args = item.get("arguments", {})
        calls.append(ToolCall(id=f"call_{turn_key}_{i}", name=item["name"],
                              arguments=json.dumps(args, ensure_ascii=False)))
    speech = speech.strip() if isinstance(speech, str) else None
    return (speech or None), calls
