"""What a tool result and a reference turn say about success.

The reference replay (:mod:`callbench.bundle.validate.replay`) must tell a failed tool result from a
successful one, and a reference turn that reports success from one that reports the failure. Both
are heuristics over data the bundle author wrote, so both are deliberately narrow (a false alarm
sends a generated scenario back for repair; a miss is what the review is for):

- :func:`failed_result`: a result object that says it failed in one of the conventional ways of
  tool APIs (``success``/``ok``: false, a non-empty ``error``/``errors`` field, or a ``status``
  naming a failure). The no-record default of a tool without fixtures counts as failed.
- :func:`claims_success`: a sentence that announces the action as done ("you're booked",
  "confirmed", "successfully", "all set", "your confirmation number is") with no negation in the
  same sentence. English only: other languages are not checked (docs/decisions.md).
"""

from __future__ import annotations

import re
from typing import Any

FAILURE_STATUSES = frozenset({
    "error", "failed", "failure", "fail", "rejected", "declined", "denied", "unavailable", "not_found",
    "notfound", "invalid", "conflict", "busy", "refused", "expired", "cancelled_error", "timeout",
})
"""``status`` / ``result`` / ``outcome`` values that mean the call failed (compared lower-case,
spaces and hyphens as underscores)."""

_SUCCESS = re.compile(
    r"\b(?:you(?:'re| are) (?:all )?(?:booked|scheduled|confirmed|set|registered|enrolled)"
    r"|(?:is|are|has been|have been|was|were) (?:now )?(?:booked|scheduled|confirmed|reserved|placed|"
    r"cancelled|canceled|processed|completed|done|updated|submitted|created)"
    r"|i(?:'ve| have) (?:booked|scheduled|confirmed|reserved|placed|cancelled|canceled|processed|"
    r"updated|submitted|created)"
    r"|successfully|all set|confirmation (?:number|code|id) is|booking is confirmed)\b",
    re.IGNORECASE,
)
_NEGATION = re.compile(
    r"\b(?:not|no|never|couldn't|could not|can't|cannot|unable|wasn't|weren't|isn't|aren't|hasn't|"
    r"haven't|didn't|did not|failed|unfortunately|sorry)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def _norm(value: Any) -> str:
    return re.sub(r"[\s\-]+", "_", str(value).strip().lower())


def failed_result(result: Any) -> str | None:
    """Why ``result`` (a tool's returned value) reports a failure, or None when it does not.

    Failure: an object with ``success`` or ``ok`` false, a non-empty ``error`` / ``errors`` /
    ``error_code`` field, or a ``status`` / ``result`` / ``outcome`` in :data:`FAILURE_STATUSES`.
    Anything else (including non-objects) is not a failure."""
    if not isinstance(result, dict):
        return None
    for key in ("success", "ok"):
        if result.get(key) is False:
            return f"{key}: false"
    for key in ("error", "errors", "error_code"):
        if result.get(key) not in (None, "", [], {}, False):
            return f"{key}: {str(result[key])[:60]}"
    for key in ("status", "result", "outcome"):
        value = result.get(key)
        if isinstance(value, str) and _norm(value) in FAILURE_STATUSES:
            return f"{key}: {value}"
    return None


def claims_success(text: str) -> str | None:
    """The phrase of ``text`` that announces an action as done, or None. A sentence with a
    negation or an apology ("not", "couldn't", "unfortunately", "sorry") claims nothing."""
    for sentence in _SENTENCE.split(text):
        m = _SUCCESS.search(sentence)
        if m is not None and _NEGATION.search(sentence) is None:
            return m.group(0)
    return None
