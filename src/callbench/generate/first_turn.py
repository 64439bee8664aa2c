"""Who speaks first in a call: read from a voice platform's agent export for ``callbench new-agent``.

An agent built on a voice platform either greets the caller as soon as the call connects or
waits for the caller to speak. callbench's episode loop always asks the candidate first (DESIGN.md,
"Episode loop"); an agent that waits for the caller gets a user turn before that first answer,
the agent's ``first_user_message`` convention in ``agent.yaml`` (the default of the candidate's
role setting of the same name, docs/decisions.md "First user message"):

* the agent speaks first: ``none`` (no user turn before its greeting);
* the user speaks first: ``empty`` (an empty user turn: the caller has not said anything the
  simulator can voice yet; the paper's accommodation, section 3, "Models whose templates require
  a user message before the first assistant turn get an empty one").

Platform rules (from each platform's API reference):

* **Vapi** assistant (``GET /assistant/{id}``, or the dashboard's JSON): ``firstMessageMode``,
  default ``assistant-speaks-first``; ``assistant-waits-for-user`` is the user first;
  ``assistant-speaks-first-with-model-generated-message`` the agent first. With
  ``assistant-speaks-first``, ``firstMessage`` is what the assistant says, and "if unspecified,
  assistant will wait for user to speak" (Vapi API, ``Assistant.firstMessage``): an absent or empty
  ``firstMessage`` is the user first.
* **Retell** LLM (``GET /get-retell-llm/{id}``) or agent export holding it under ``retellLlmData``
  (or ``conversationFlow``): ``start_speaker`` (``agent`` or ``user``) when given; else
  ``begin_message``: "If not set, LLM will dynamically generate a message. If set to "", agent
  will wait for user to speak first" (Retell API, ``begin_message``).

What the agent says in a fixed ``firstMessage`` / ``begin_message`` is not imported: the
candidate writes its own greeting from the prompt, as the paper's candidates do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from callbench.generate.json_file import read_json_file

FirstUserMessage = Literal["none", "empty", "text"]

VAPI_MODES = ("assistant-speaks-first", "assistant-speaks-first-with-model-generated-message",
              "assistant-waits-for-user")
"""Vapi's ``firstMessageMode`` values (Vapi API, ``Assistant.firstMessageMode``)."""
RETELL_SPEAKERS = ("agent", "user")
"""Retell's ``start_speaker`` values."""
_VAPI_KEYS = ("firstMessageMode", "firstMessage")
_RETELL_KEYS = ("begin_message", "start_speaker")


class FirstTurnError(ValueError):
    """The export cannot be read or says nothing recognisable about who speaks first; the message
    is one line naming the file and the field."""


class FirstTurn(BaseModel):
    """The agent's first-turn convention: ``first_user_message`` (``none``, ``empty`` or ``text``
    with ``text``) and ``source``, what it was read from (for ``agent.yaml``'s comment and the
    command's notes), e.g. ``Vapi firstMessageMode: assistant-waits-for-user``."""

    first_user_message: FirstUserMessage
    text: str | None = None
    source: str


def parse_option(value: str) -> FirstTurn:
    """``--first-user-message``: ``none``, ``empty`` or ``text:THE TEXT``. Raises
    :class:`FirstTurnError` for anything else (or a blank text)."""
    raw = value.strip()
    if raw in ("none", "empty"):
        return FirstTurn(first_user_message=raw, source="--first-user-message")
    kind, colon, text = value.partition(":")
    if kind.strip() == "text" and colon and text.strip():
        return FirstTurn(first_user_message="text", text=text.strip(), source="--first-user-message")
    raise FirstTurnError(
        f"--first-user-message {value!r}: use none (the agent speaks first), empty (an empty user "
        "turn first) or text:WORDS (that user turn first)"
    )


def _speaker(first: str, source: str) -> FirstTurn:
    return FirstTurn(first_user_message="none" if first == "agent" else "empty", source=source)


def _vapi(data: dict[str, Any], source: str) -> FirstTurn:
    mode = data.get("firstMessageMode")
    message = data.get("firstMessage")
    if mode is not None and mode not in VAPI_MODES:
        raise FirstTurnError(f"{source}: firstMessageMode: {mode!r} is not a Vapi first-message mode "
                             f"({', '.join(VAPI_MODES)})")
    if message is not None and not isinstance(message, str):
        raise FirstTurnError(f"{source}: firstMessage: expected text, got {type(message).__name__}")
    if mode == "assistant-waits-for-user":
        return _speaker("user", "Vapi firstMessageMode: assistant-waits-for-user")
    if mode == "assistant-speaks-first-with-model-generated-message":
        return _speaker("agent", f"Vapi firstMessageMode: {mode}")
    said = f"Vapi firstMessageMode: {mode or 'assistant-speaks-first (the default)'}"
    if message and message.strip():
        return _speaker("agent", f"{said} with a firstMessage")
    return _speaker("user", f"{said} without a firstMessage (the assistant waits for the user)")


def _retell(llm: dict[str, Any], source: str, at: str) -> FirstTurn:
    speaker = llm.get("start_speaker")
    message = llm.get("begin_message")
    if speaker is not None:
        if speaker not in RETELL_SPEAKERS:
            raise FirstTurnError(f"{source}: {at}start_speaker: {speaker!r} is not a Retell start speaker "
                                 "(agent or user)")
        return _speaker(speaker, f"Retell start_speaker: {speaker}")
    if message is not None and not isinstance(message, str):
        raise FirstTurnError(f"{source}: {at}begin_message: expected text, got {type(message).__name__}")
    if message == "":
        return _speaker("user", 'Retell begin_message: "" (the agent waits for the user)')
    if message is None:
        return _speaker("agent", "Retell begin_message not set (the agent greets first)")
    return _speaker("agent", "Retell begin_message (the agent greets first)")


def _retell_llm(data: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """The object holding Retell's first-turn fields: the export itself (a Retell LLM) or its
    ``retellLlmData`` / ``conversationFlow``, with its field path prefix; None when neither is
    Retell-shaped."""
    for key in ("retellLlmData", "conversationFlow"):
        inner = data.get(key)
        if isinstance(inner, dict):
            return inner, f"{key}."
    if any(k in data for k in (*_RETELL_KEYS, "general_prompt", "llm_id")):
        return data, ""
    return None


def read_first_turn(data: Any, source: str) -> FirstTurn:
    """Who speaks first according to the parsed export ``data`` (rules in the module docstring);
    ``source`` names the file in errors. Raises :class:`FirstTurnError` for an export that is
    no object, names an unknown mode, or is neither a Vapi assistant nor a Retell LLM or agent
    (with its LLM)."""
    if not isinstance(data, dict):
        raise FirstTurnError(f"{source}: expected a JSON object (a Vapi assistant or a Retell agent "
                             f"or LLM), got {type(data).__name__}")
    if any(k in data for k in _VAPI_KEYS):
        return _vapi(data, source)
    retell = _retell_llm(data)
    if retell is not None:
        return _retell(retell[0], source, retell[1])
    if isinstance(data.get("model"), dict) and ("voice" in data or "transcriber" in data):
        return _vapi(data, source)  # a Vapi assistant at its defaults: the fields left out
    if "response_engine" in data or "agent_id" in data:
        raise FirstTurnError(
            f"{source}: a Retell agent without its LLM (no retellLlmData): export the agent from the "
            "dashboard, or give the Retell LLM object (GET /get-retell-llm), which holds begin_message"
        )
    raise FirstTurnError(
        f"{source}: not a Vapi assistant or a Retell agent or LLM export: found none of "
        "firstMessageMode, firstMessage, begin_message, start_speaker, retellLlmData"
    )


def read_export_file(path: Path) -> FirstTurn:
    """:func:`read_first_turn` over a JSON file. Raises :class:`FirstTurnError` for an unreadable
    file or invalid JSON (with line and column)."""
    where = f"--platform-export {path}"
    return read_first_turn(read_json_file(path, where, FirstTurnError), where)
