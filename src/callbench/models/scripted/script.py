"""``scripted:file:<path>``: a model that replays replies written in a YAML or JSON file, for
arbitrary test dialogues (any role).

File format (a superset of the judge reply files of :mod:`callbench.models.scripted.judge`)::

    candidate:                     # a mapping from role to a list of replies,
      - content: "Hello, dairy cooperative."           # or a bare list used for every role
      - content: "Let me record that."
        tool_calls:
          - {name: log_zero_supply_reason, arguments: {category: cattle_health}}
          - {id: c7, name: end_call, arguments: '{"reason": '}   # a string is sent raw (may be malformed)
      - raise: output              # raise ModelOutputError (message, raw optional)
        message: "unparseable tool call"
    caller:
      - {speech: "Hello?", expressed_step: null, done: false}   # any other JSON value is sent as JSON text
      - 'not json at all'          # a string is sent verbatim

A reply is one of: a string (the content, verbatim); a mapping with any of the keys ``content``,
``tool_calls``, ``json`` (a value sent as JSON content), ``raise`` (``output`` or
``infrastructure``), ``message``, ``raw`` (a response spec); any other JSON value (sent as JSON
content). Tool calls without ``id`` get ``script_<reply position>_<k>``; ``arguments`` that is not
a string is JSON-encoded.

Each (role, episode id) consumes the role's list from the start, one reply per request (a retry or
a rerun takes the next); past the end the last reply repeats. Keyed positions keep concurrent
episodes deterministic.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from callbench.models.base import (
    InfrastructureError,
    ModelOutputError,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ToolCall,
    Usage,
)

ROLES = ("candidate", "caller", "task_judge", "conversation_judge")
SPEC_KEYS = {"content", "tool_calls", "json", "raise", "message", "raw"}


class ScriptToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str | None = None
    name: str
    arguments: Any = Field(default_factory=dict)


class ScriptReply(BaseModel):
    """One scripted reply (the response-spec form)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    content: str | None = None
    tool_calls: list[ScriptToolCall] = Field(default_factory=list)
    json_value: Any = Field(default=None, alias="json")
    raise_: Literal["output", "infrastructure"] | None = Field(default=None, alias="raise")
    message: str = "scripted error"
    raw: str | None = None


def parse_reply(value: Any, where: str) -> ScriptReply:
    """Normalise one reply of a script file; raises ``ValueError`` naming ``where`` when invalid."""
    if isinstance(value, str):
        return ScriptReply(content=value)
    if isinstance(value, dict) and SPEC_KEYS & set(value):
        try:
            reply = ScriptReply.model_validate(value)
        except ValidationError as e:
            first = e.errors(include_url=False)[0]
            loc = ".".join(str(x) for x in first["loc"])
            raise ValueError(f"{where}.{loc}: {first['msg']}") from None
        if "json" in value:
            reply.content = json.dumps(reply.json_value, ensure_ascii=False)
        return reply
    return ScriptReply(content=json.dumps(value, ensure_ascii=False))


def load_script(data: Any, source: str = "script") -> dict[str, list[ScriptReply]]:
    """Parse script data (already loaded from YAML/JSON) into replies by role ("*" for every role)."""
    if isinstance(data, list):
        raw = {"*": data}
    elif isinstance(data, dict) and data and all(isinstance(v, list) for v in data.values()):
        bad = sorted(set(data) - set(ROLES))
        if bad:
            raise ValueError(f"{source}: unknown role(s) {bad}; use {', '.join(ROLES)}")
        raw = {str(k): v for k, v in data.items()}
    else:
        raise ValueError(f"{source}: expected a list of replies or a mapping from role to a list of replies")
    out: dict[str, list[ScriptReply]] = {}
    for role, items in raw.items():
        if not items:
            raise ValueError(f"{source}: role {role!r} has no replies")
        out[role] = [parse_reply(v, f"{source}:{role}.{i}") for i, v in enumerate(items)]
    return out


class ScriptedFileModel:
    """A :class:`~callbench.models.base.ModelClient` replaying a script (see the module docstring)."""

    embedded_smoke_test_model = False

    def __init__(
        self, spec: str, settings: ModelSettings | None, replies: dict[str, list[ScriptReply]]
    ) -> None:
        self.spec = spec
        self.settings = settings or ModelSettings()
        self.replies = replies
        self._pos: dict[tuple[str, str], int] = {}

    @classmethod
    def from_file(cls, path: str | Path, settings: ModelSettings | None = None) -> ScriptedFileModel:
        """Load ``path`` (YAML or JSON); raises ``ValueError`` naming the file on any problem."""
        p = Path(path)
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
            raise ValueError(f"script file {p}: cannot read: {e}") from None
        return cls(f"scripted:file:{path}", settings, load_script(data, str(p)))

    @classmethod
    def from_data(
        cls, data: Any, settings: ModelSettings | None = None, name: str = "inline"
    ) -> ScriptedFileModel:
        """Build from in-memory script data (tests)."""
        return cls(f"scripted:file:{name}", settings, load_script(data, name))

    async def complete(self, request: ModelRequest) -> ModelResponse:
        role = request.context.role
        seq = self.replies.get(role) or self.replies.get("*")
        if not seq:
            raise InfrastructureError(f"{self.spec}: no scripted replies for role {role}", retryable=False)
        key = (role, request.context.episode_id)
        pos = self._pos.get(key, 0)
        self._pos[key] = pos + 1
        reply = seq[min(pos, len(seq) - 1)]
        if reply.raise_ == "output":
            raise ModelOutputError(reply.message, raw=reply.raw, usage=Usage(calls=1))
        if reply.raise_ == "infrastructure":
            raise InfrastructureError(reply.message, retryable=False)
        calls = [
            ToolCall(
                id=tc.id if tc.id is not None else f"script_{pos}_{k}",
                name=tc.name,
                arguments=tc.arguments
                if isinstance(tc.arguments, str)
                else json.dumps(tc.arguments, ensure_ascii=False),
            )
            for k, tc in enumerate(reply.tool_calls)
        ]
        return ModelResponse(
            content=reply.content,
            tool_calls=calls,
            usage=Usage(calls=1),
            model=self.spec,
            finish_reason="tool_calls" if calls else "stop",
        )

    async def aclose(self) -> None:
        return None
