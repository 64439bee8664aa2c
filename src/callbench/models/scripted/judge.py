"""Scripted judges for tests and offline smoke runs (no model, no network).

Specs:

- ``scripted:met`` / ``scripted:partial`` / ``scripted:not_met``: label every criterion the request
  asks for with that label and give every rating 5 / 3 / 1, citing the last message index the
  request's schema allows. The items are read from ``request.response_schema`` (the judge schema
  of :func:`callbench.grade.prompts.response_schema`), so the reply always fits the request.
- ``scripted:file:<path>``: replies read from a JSON or YAML file: either a list of replies used for
  every role, or a mapping from role (``task_judge``, ``conversation_judge``) to such a list. Each
  reply is a string (sent verbatim, so malformed replies can be scripted) or a JSON value (sent as
  JSON). Each episode takes the replies from the start of the list, one per request (a retry takes
  the next); past the end the last reply repeats. Per-episode positions keep concurrent grading
  deterministic.
- ``scripted:garbage``: always replies with text that is not JSON (exercises judge-error handling).
- ``scripted:infra-error``: always raises :class:`InfrastructureError` (a judge outage).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from callbench.models.base import (
    InfrastructureError,
    ModelOutputError,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    Usage,
)

SCRIPTED_JUDGE_PREFIXES = (
    "scripted:met",
    "scripted:partial",
    "scripted:not_met",
    "scripted:file:",
    "scripted:garbage",
    "scripted:infra-error",
)
SCRIPTED_JUDGE_SPECS = (
    "scripted:met", "scripted:partial", "scripted:not_met", "scripted:file:<path>", "scripted:garbage",
    "scripted:infra-error",
)
"""Every scripted judge spec, as error messages list them."""
_FIXED = {"scripted:met": ("met", 5), "scripted:partial": ("partial", 3), "scripted:not_met": ("not_met", 1)}


def _required(schema: dict[str, Any], kind: str) -> list[str]:
    box = schema.get("properties", {}).get(kind)
    return list(box.get("required", [])) if isinstance(box, dict) else []


class ScriptedJudge:
    """A :class:`~callbench.models.base.ModelClient` that answers judge requests from a fixed label
    or a reply file (see the module docstring)."""

    embedded_smoke_test_model = False

    def __init__(
        self, spec: str, settings: ModelSettings | None = None, replies: dict[str, list[Any]] | None = None
    ) -> None:
        self.spec = spec
        self.settings = settings or ModelSettings()
        self._replies = replies
        self._pos: dict[tuple[str, str], int] = {}

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self.spec == "scripted:infra-error":
            raise InfrastructureError("scripted judge outage", retryable=False)
        if self.spec == "scripted:garbage":
            return ModelResponse(
                content="I think the agent did fine overall.",
                usage=Usage(calls=1),
                model=self.spec,
                finish_reason="stop",
            )
        if self._replies is not None:
            return ModelResponse(
                content=self._next(request), usage=Usage(calls=1), model=self.spec, finish_reason="stop"
            )
        schema = request.response_schema
        if not isinstance(schema, dict):
            raise ModelOutputError(f"{self.spec}: a scripted judge needs a response_schema")
        label, rating = _FIXED[self.spec]
        index = schema.get("$defs", {}).get("message_index", {})
        allowed = index.get("enum") or ([index["maximum"]] if "maximum" in index else [])
        cite = [max(allowed)] if allowed else []
        reply: dict[str, Any] = {}
        crit = _required(schema, "criteria")
        if crit:
            reply["criteria"] = {
                i: {"reason": f"scripted judge: {label}", "cited_messages": cite, "label": label}
                for i in crit
            }
        rats = _required(schema, "ratings")
        if rats:
            reply["ratings"] = {
                i: {"reason": f"scripted judge: {rating}", "cited_messages": cite, "rating": rating}
                for i in rats
            }
        return ModelResponse(
            content=json.dumps(reply, sort_keys=True),
            usage=Usage(calls=1),
            model=self.spec,
            finish_reason="stop",
        )

    def _next(self, request: ModelRequest) -> str:
        assert self._replies is not None
        role = request.context.role
        seq = self._replies.get(role) or self._replies.get("*") or []
        if not seq:
            raise ModelOutputError(f"{self.spec}: no scripted replies for role {role}")
        key = (role, request.context.episode_id)
        i = self._pos.get(key, 0)
        self._pos[key] = i + 1
        reply = seq[min(i, len(seq) - 1)]
        return reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)

    async def aclose(self) -> None:
        return None


def _load_replies(path: str) -> dict[str, list[Any]]:
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ValueError(f"scripted judge file {p}: cannot read: {e}") from None
    if isinstance(raw, list):
        return {"*": raw}
    if isinstance(raw, dict) and all(isinstance(v, list) for v in raw.values()):
        bad = set(raw) - {"task_judge", "conversation_judge"}
        if bad:
            raise ValueError(
                f"scripted judge file {p}: unknown role(s) {sorted(bad)} "
                "(use task_judge and conversation_judge)"
            )
        return {str(k): v for k, v in raw.items()}
    raise ValueError(f"scripted judge file {p}: expected a list of replies or a mapping from role to a list")


def create_scripted_judge(spec: str, settings: ModelSettings | None = None) -> ScriptedJudge:
    """Create a scripted judge for ``spec`` (see the module docstring); raises ``ValueError`` for an
    unknown scripted judge spec or an unreadable reply file."""
    if spec in _FIXED or spec in ("scripted:garbage", "scripted:infra-error"):
        return ScriptedJudge(spec, settings)
    if spec.startswith("scripted:file:"):
        return ScriptedJudge(spec, settings, _load_replies(spec.removeprefix("scripted:file:")))
    raise ValueError(
        f"unknown scripted judge {spec!r}; use one of scripted:met, scripted:partial, "
        "scripted:not_met, scripted:file:<path>, scripted:garbage, scripted:infra-error"
    )
