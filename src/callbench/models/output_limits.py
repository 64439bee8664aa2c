"""Limits on parsed model output, and text that can always be stored.

Every JSON value a model produces (candidate tool arguments, caller replies, judge replies,
generator replies) is parsed here, by :func:`loads_limited`, before anything else reads it. Valid
JSON can still break a harness: nesting a few thousand levels deep makes Python's parser (and every
recursive reader after it: jsonschema, pydantic, the JSON encoder) raise ``RecursionError``; a
lone surrogate (``"\\ud800"``) parses to a Python string that UTF-8 cannot encode, so the trace
holding it could not be saved. The limits turn the first kind into a located
:class:`OutputLimitError` (a ``ValueError``), which each role's parser charges as that role's
output error; :func:`safe_text` turns the second kind into text that can be stored.

Storage rule (docs/decisions.md, "Hostile model output"): text is kept exactly where UTF-8 can
hold it (control characters and NUL included: JSON escapes them losslessly). A lone surrogate is
the one thing UTF-8 cannot hold; it is replaced by the six visible characters of its escape
(``\\ud800``), so the stored text says what the model sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from callbench.models.base import ModelResponse


@dataclass(frozen=True)
class OutputLimits:
    """Limits on one parsed model output: ``max_depth`` (nesting of arrays and objects, the top
    level being 1), ``max_chars`` (the JSON text's length in characters) and ``max_string_chars``
    (any one string or object key, in characters, after decoding)."""

    max_depth: int = 64
    max_chars: int = 1_000_000
    max_string_chars: int = 200_000


TOOL_ARGUMENT_LIMITS = OutputLimits(max_depth=32, max_chars=200_000, max_string_chars=50_000)
"""A candidate's tool arguments: a real tool schema nests a few levels; 32 leaves room for any
schema a bundle declares while staying far below Python's recursion limit."""
REPLY_LIMITS = OutputLimits()
"""Caller, judge and generator replies (a generator's scenario is the largest, a few 10 kB)."""
MAX_CALLER_SPEECH_CHARS = 600
"""The longest caller turn the harness accepts, in characters (Unicode code points of its NFC
form, ends trimmed: what the channel hands on): about 100 English words, six times the paper's
longest routine turn ("usually 2 to 15 words"), room for a caller who reads out an address and a
reference number. A longer one is rejected as ``too_long`` (``sim/caller_rules.py`` says why)."""


class OutputLimitError(ValueError):
    """Parsed model output exceeds an :class:`OutputLimits` bound; the message says which bound,
    and where (a character offset in the text, or the JSON pointer of the value)."""


_SURROGATE = re.compile("[\ud800-\udfff]")
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)


def _escape(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"


def safe_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by its six-character escape (``\\ud800``);
    the same string when UTF-8 can encode it (the usual case, checked first)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(_escape, text)


def safe_json_text(text: str) -> str:
    """JSON text (as ``json.dumps(..., ensure_ascii=False)`` writes it) made encodable: a lone
    surrogate inside a string becomes the JSON text of :func:`safe_text`'s escape, so the stored
    file reads back as the value :func:`safe_value` gives."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(lambda m: "\\" + _escape(m), text)


def safe_value(value: Any) -> Any:
    """``value`` (parsed JSON) with :func:`safe_text` applied to every string and key. Iterative,
    so any depth is safe; the same object when nothing needed escaping."""
    if isinstance(value, str):
        return safe_text(value)
    if not isinstance(value, dict | list):
        return value
    text = json.dumps(value, ensure_ascii=False, check_circular=False)
    fixed = safe_json_text(text)
    return value if fixed is text else json.loads(fixed)


def _pointer(parts: list[str | int]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def check_depth(text: str, limit: int) -> None:
    """Raise :class:`OutputLimitError` when the JSON ``text`` nests arrays and objects deeper than
    ``limit`` (strings skipped); linear in the text, no recursion."""
    depth = 0
    for m in _TOKENS.finditer(text):
        tok = m.group()
        if tok in "[{":
            depth += 1
            if depth > limit:
                raise OutputLimitError(f"nested deeper than {limit} levels (at character {m.start()})")
        elif tok in "]}":
            depth -= 1


def check_strings(value: Any, limit: int) -> None:
    """Raise :class:`OutputLimitError` naming the JSON pointer of the first string or key of
    ``value`` longer than ``limit`` characters (iterative)."""
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        v, path = stack.pop()
        if isinstance(v, str):
            if len(v) > limit:
                raise OutputLimitError(f"a string of {len(v)} characters at {_pointer(path) or '/'} "
                                       f"(at most {limit})")
        elif isinstance(v, dict):
            for k, x in v.items():
                if len(k) > limit:
                    raise OutputLimitError(f"a key of {len(k)} characters at {_pointer(path) or '/'} "
                                           f"(at most {limit})")
                stack.append((x, [*path, k]))
        elif isinstance(v, list):
            stack.extend((x, [*path, i]) for i, x in enumerate(v))


def loads_limited(text: str, limits: OutputLimits = REPLY_LIMITS, *,
                  loads: Callable[[str], Any] = json.loads) -> Any:
    """Parse model output ``text`` as JSON within ``limits``; strings come back through
    :func:`safe_text`. ``loads`` is the parser (default ``json.loads``; callers pass their own
    hooks). Raises :class:`OutputLimitError` for a bound exceeded and ``ValueError``
    (``json.JSONDecodeError`` or the parser's own) for invalid JSON; never ``RecursionError``."""
    if len(text) > limits.max_chars:
        raise OutputLimitError(f"{len(text)} characters of JSON (at most {limits.max_chars})")
    check_depth(text, limits.max_depth)
    try:
        value = loads(text)
    except RecursionError:  # the scan bounds depth; kept so no parser can raise it past here
        raise OutputLimitError(f"nested too deep to parse (limit {limits.max_depth})") from None
    check_strings(value, limits.max_string_chars)
    return safe_value(value)


def safe_response(response: ModelResponse) -> ModelResponse:
    """``response`` with :func:`safe_text` applied to its speech, finish reason, model name and each
    tool call's id, name and raw arguments; the same object when nothing needed escaping."""
    texts = [response.content or "", response.finish_reason or "", response.model]
    texts += [x for c in response.tool_calls for x in (c.id, c.name, c.arguments)]
    if all(safe_text(t) is t for t in texts):
        return response
    calls = [c.model_copy(update={"id": safe_text(c.id), "name": safe_text(c.name),
                                  "arguments": safe_text(c.arguments)}) for c in response.tool_calls]
    return response.model_copy(update={
        "content": None if response.content is None else safe_text(response.content),
        "finish_reason": None if response.finish_reason is None else safe_text(response.finish_reason),
        "model": safe_text(response.model), "tool_calls": calls})


def safe_error_text(text: str | None) -> str | None:
    """:func:`safe_text` of an output error's message or raw text (None stays None)."""
    return None if text is None else safe_text(text)
