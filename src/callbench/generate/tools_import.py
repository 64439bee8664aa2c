"""Reading an agent's tool list from the OpenAI or Anthropic function-tools JSON format.

Accepted shapes (a list, or an object with a ``tools`` list):

* OpenAI Chat Completions: ``{"type": "function", "function": {"name", "description",
  "parameters"}}``;
* OpenAI Responses API (flat): ``{"type": "function", "name", "description", "parameters"}``;
* Anthropic Messages API: ``{"name", "description", "input_schema"}``.

Each becomes a :class:`~callbench.bundle.models.ToolSpec`. A missing ``parameters`` is the empty
object schema. A tool whose ``type`` is neither ``function`` nor ``custom`` (a platform's built-in
tool, e.g. Vapi's ``sms``, ``transferCall``, ``endCall``; a provider's hosted ``web_search``) is
refused with a located reason: the benchmark's backend answers function calls only. Errors name
the file and the index of the tool (``tools[3].function.name``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from callbench.bundle.models import ToolSpec
from callbench.generate.json_file import read_json_file


class ToolsFileError(ValueError):
    """The tools file cannot be read or a tool in it has the wrong shape (message is located)."""


FUNCTION_TYPES = frozenset({"function", "custom"})
"""``type`` values of a function tool: OpenAI's ``function``, Anthropic's ``custom`` (or none)."""


def _one(item: Any, where: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise ToolsFileError(f"{where}: expected an object, got {type(item).__name__}")
    kind = item.get("type")
    if kind is not None and kind not in FUNCTION_TYPES:
        raise ToolsFileError(
            f"{where}.type: {kind!r} is not a function tool (a platform's built-in tool, such as a "
            "Vapi sms, transferCall or endCall tool, or a provider's hosted tool); callbench offers the "
            "candidate function tools only: describe it as a function (name, description, JSON Schema "
            "parameters) or leave it out"
        )
    if isinstance(item.get("function"), dict):  # Chat Completions
        fn = item["function"]
        return {
            "name": fn.get("name"),
            "description": fn.get("description") or "",
            "parameters": fn.get("parameters"),
            "_where": f"{where}.function",
        }
    if "input_schema" in item:  # Anthropic
        return {
            "name": item.get("name"),
            "description": item.get("description") or "",
            "parameters": item.get("input_schema"),
            "_where": where,
        }
    if "name" in item:  # Responses API (flat)
        return {
            "name": item.get("name"),
            "description": item.get("description") or "",
            "parameters": item.get("parameters"),
            "_where": where,
        }
    raise ToolsFileError(f"{where}: not a function tool (expected 'function', 'input_schema' or 'name')")


def parse_tools(data: Any, source: str = "tools") -> list[ToolSpec]:
    """Tool specs from parsed JSON ``data`` (shapes in the module docstring).

    Raises :class:`ToolsFileError` naming ``source`` and the tool index for a wrong shape, an
    invalid name, an empty description (the agent's model needs one) or a duplicate name."""
    items = data.get("tools") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise ToolsFileError(f"{source}: expected a non-empty list of tools (or an object with 'tools')")
    out: list[ToolSpec] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        raw = _one(item, f"{source}: tools[{i}]")
        where = raw.pop("_where")
        if raw["parameters"] is None:
            raw["parameters"] = {"type": "object", "properties": {}}
        if not str(raw["description"]).strip():
            raise ToolsFileError(f"{where}.description: empty; describe what the tool does and returns")
        try:
            spec = ToolSpec.model_validate(raw)
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(str(x) for x in first["loc"])
            raise ToolsFileError(f"{where}.{loc}: {first['msg']}") from None
        if spec.name in seen:
            raise ToolsFileError(f"{where}.name: tool {spec.name!r} is listed twice")
        seen.add(spec.name)
        out.append(spec)
    return out


def read_tools_file(path: Path) -> list[ToolSpec]:
    """:func:`parse_tools` over a JSON file. Raises :class:`ToolsFileError` (unreadable file,
    invalid JSON with line and column, or a bad tool)."""
    return parse_tools(read_json_file(path, str(path), ToolsFileError), str(path))
