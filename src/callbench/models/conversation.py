"""Provider-neutral clean-up of a conversation before it is translated for a provider.

Both adapters (and the local model) start from :func:`normalize_messages`, which guarantees:

- every system text is merged into one leading system text (joined by a blank line, in order);
- every tool-call id in the conversation is unique and non-empty: a repeated or empty id is
  renamed deterministically (``<id>__2``, ``call_<message>_<k>``), and the tool results that
  answer it are renamed with it (the n-th result for an id answers the n-th call with that id);
- the results of an assistant message's tool calls come right after it, in the order of the
  calls (results that arrived in a different order are reordered);
- ids use only ``[A-Za-z0-9_-]`` (Anthropic's ``tool_use.id`` pattern).

A tool result that answers no earlier call, or a call that never gets a result before the
conversation moves on, is a harness bug: ValueError names the message index. A call whose
result has not arrived yet at the very end of the conversation is also an error (providers
reject it).
"""

from __future__ import annotations

import re
from collections import defaultdict

from pydantic import BaseModel, Field

from callbench.models.base import ChatMessage, ToolCall

_ID_BAD = re.compile(r"[^A-Za-z0-9_-]")


class Conversation(BaseModel):
    """A normalized conversation: one system text and the other messages in provider order."""

    system: str | None = None
    messages: list[ChatMessage] = Field(default_factory=list)


def _safe_id(raw: str) -> str:
    return _ID_BAD.sub("_", raw)[:64]


def normalize_messages(messages: list[ChatMessage]) -> Conversation:
    """Normalize ``messages`` as described in the module docstring. The input is not modified."""
    system_parts = [m.content for m in messages if m.role == "system" and m.content]
    rest = [(i, m) for i, m in enumerate(messages) if m.role != "system"]

    # 1. unique ids: rename calls, remembering per original id the queue of new ids.
    used: set[str] = set()
    pending: dict[str, list[str]] = defaultdict(list)  # original id -> new ids awaiting a result
    renamed: list[ChatMessage] = []
    for index, msg in rest:
        if msg.role == "assistant" and msg.tool_calls:
            calls = []
            for k, call in enumerate(msg.tool_calls):
                base = _safe_id(call.id) or f"call_{index}_{k}"
                new = base
                n = 2
                while new in used:
                    new = f"{base}__{n}"
                    n += 1
                used.add(new)
                pending[call.id].append(new)
                calls.append(ToolCall(id=new, name=call.name, arguments=call.arguments))
            renamed.append(msg.model_copy(update={"tool_calls": calls}))
        elif msg.role == "tool":
            queue = pending.get(msg.tool_call_id or "")
            if not queue:
                raise ValueError(
                    f"message {index}: tool result for call id "
                    f"{msg.tool_call_id!r} answers no earlier tool call")
            renamed.append(msg.model_copy(update={"tool_call_id": queue.pop(0)}))
        else:
            renamed.append(msg)

    # 2. results right after their calls, in call order.
    ordered: list[ChatMessage] = []
    i = 0
    while i < len(renamed):
        msg = renamed[i]
        ordered.append(msg)
        i += 1
        if msg.role != "assistant" or not msg.tool_calls:
            continue
        results: dict[str, ChatMessage] = {}
        while i < len(renamed) and renamed[i].role == "tool":
            results[renamed[i].tool_call_id or ""] = renamed[i]
            i += 1
        for call in msg.tool_calls:
            if call.id not in results:
                raise ValueError(
                    f"tool call {call.name!r} (id {call.id!r}) has no tool result right after its "
                    "assistant message; every tool call must be answered before the conversation goes on")
            ordered.append(results.pop(call.id))
        if results:  # pragma: no cover - ids are unique and each result matched a call
            raise ValueError(f"stray tool results {sorted(results)}")
    return Conversation(system="\n\n".join(system_parts) if system_parts else None, messages=ordered)
