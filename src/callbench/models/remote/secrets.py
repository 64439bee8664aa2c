"""Credentials from the environment, and their redaction from anything we keep.

Keys come from environment variables only (DESIGN.md; issue #5): ``OPENAI_API_KEY``,
``ANTHROPIC_API_KEY``, and any ``env:VAR`` header value of ``ModelSettings.extra_headers``.
Every adapter registers the secrets it read with a :class:`Redactor`, and every error message it
raises passes through :meth:`Redactor.clean`, so a key never reaches a trace, cache row or log.
"""

from __future__ import annotations

import os

from callbench.models.base import ENV_REF_RE, HEADER_VALUE_MARKER

MIN_SECRET_LEN = 4


class Redactor:
    """Replaces registered secret strings with ``[redacted]`` in text."""

    def __init__(self) -> None:
        self._secrets: set[str] = set()

    def add(self, secret: str | None) -> None:
        """Register ``secret`` (ignored when None or shorter than 4 characters)."""
        if secret and len(secret) >= MIN_SECRET_LEN:
            self._secrets.add(secret)

    def clean(self, text: str) -> str:
        """``text`` with every registered secret replaced (longest first)."""
        for secret in sorted(self._secrets, key=len, reverse=True):
            text = text.replace(secret, "[redacted]")
        return text


def resolve_headers(headers: dict[str, str], redactor: Redactor) -> dict[str, str]:
    """Resolve ``env:VAR`` header values from the environment; register every value (literal or
    resolved) as a secret, so no header value reaches an error message either.

    Raises ValueError naming the header and variable when the variable is unset, and naming the
    header when its value is the marker of a saved file (``HEADER_VALUE_MARKER``: settings read
    back from a manifest, whose header values were never saved).
    """
    out: dict[str, str] = {}
    for name, value in headers.items():
        if value == HEADER_VALUE_MARKER:
            raise ValueError(f"extra_headers[{name!r}]: its value was not saved with the run; give the "
                             "role's settings again (--settings) with the header's value or env:VAR")
        if ENV_REF_RE.fullmatch(value):
            var = value[4:]
            resolved = os.environ.get(var)
            if resolved is None:
                raise ValueError(f"extra_headers[{name!r}] reads environment variable {var}, "
                                 "which is not set")
            redactor.add(resolved)
            out[name] = resolved
        else:
            redactor.add(value)
            out[name] = value
    return out
