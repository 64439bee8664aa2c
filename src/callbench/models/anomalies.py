"""Provider responses that are not usable completions (issue 16 item 1).

An HTTP 200 is not yet a completion. :func:`checked_body` reads a raw response and raises an
:class:`InfrastructureError` (retryable, with its fault ``kind``) for a body that is not JSON
(``html_body`` for a non-JSON content type, ``not_utf8``, ``malformed_body`` for truncated or
otherwise undecodable JSON, or JSON that is not an object); :func:`openai_choices` and
:func:`anthropic_content` check the one field each adapter needs (``missing_choices`` /
``empty_choices``; ``missing_content``). These are the provider's faults, never the candidate's:
they are retried with backoff and, when they persist, the episode is skipped with a reason naming
the provider, the role and the kind.
"""

from __future__ import annotations

import json
from typing import Any

from callbench.models.base import InfrastructureError

_SHOWN = 80


def _anomaly(who: str, kind: str, detail: str) -> InfrastructureError:
    return InfrastructureError(f"{who}: {kind}: {detail}", retryable=True, kind=kind)


def checked_body(content: bytes, content_type: str, who: str) -> dict[str, Any]:
    """The decoded JSON object of a 200 response body.

    ``who`` names provider and role for the message (e.g. ``"openai candidate"``). Raises
    InfrastructureError of kind ``html_body`` (content type neither JSON nor empty; the first
    80 characters are quoted), ``not_utf8``, ``malformed_body`` (not JSON, e.g. truncated, or
    not a JSON object).
    """
    ctype = content_type.split(";")[0].strip().lower()
    if ctype and "json" not in ctype:
        shown = content[:_SHOWN].decode("utf-8", errors="replace")
        raise _anomaly(who, "html_body", f"HTTP 200 with content type {ctype!r}, not JSON: {shown!r}")
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _anomaly(who, "not_utf8", f"the response body is not UTF-8 (byte {e.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise _anomaly(who, "malformed_body", f"the response body is not JSON ({e.msg} at line {e.lineno} "
                       f"column {e.colno}; {len(content)} bytes)") from None
    if not isinstance(data, dict):
        raise _anomaly(who, "malformed_body", f"the response body is a JSON {type(data).__name__}, "
                       "not an object")
    return data


def openai_choices(data: dict[str, Any], who: str) -> None:
    """Raise InfrastructureError ``missing_choices`` / ``empty_choices`` unless ``data`` has a
    non-empty ``choices`` list whose first item holds a ``message`` object."""
    choices = data.get("choices")
    if choices is None:
        raise _anomaly(who, "missing_choices", "the response has no 'choices'")
    if not isinstance(choices, list) or not choices:
        raise _anomaly(who, "empty_choices", f"the response's 'choices' is {json.dumps(choices)[:_SHOWN]}")
    first = choices[0]
    if not isinstance(first, dict) or not isinstance(first.get("message"), dict):
        raise _anomaly(who, "malformed_body", "the first choice has no 'message' object")


def anthropic_content(data: dict[str, Any], who: str) -> None:
    """Raise InfrastructureError ``missing_content`` unless ``data['content']`` is a list."""
    if not isinstance(data.get("content"), list):
        raise _anomaly(who, "missing_content", "the response has no 'content' list")
