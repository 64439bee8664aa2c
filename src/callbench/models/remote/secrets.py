"""Credentials from the environment, and their redaction from anything we keep.

Keys come from environment variables only (DESIGN.md): ``OPENAI_API_KEY``,
``ANTHROPIC_API_KEY``, and any ``env:VAR`` header value of ``ModelSettings.extra_headers``.
Every adapter registers the secrets it read with a :class:`Redactor`, and every error message it
raises passes through :meth:`Redactor.clean`, so a key never reaches a trace, cache row or log.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from callbench.models.base import ENV_REF_RE, HEADER_VALUE_MARKER, URL_PART_MARKER

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


def resolve_base_url(url: str | None, redactor: Redactor) -> tuple[str | None, dict[str, str] | None]:
    """Split an endpoint URL into (the URL without its query, the query as a dict for the SDK's
    ``default_query``, or None) and register its userinfo and query values as secrets, so an error
    message never shows them (the saved form of a ``base_url`` never holds them either:
    :func:`callbench.models.base.saved_url`). The SDKs join a request path after a base URL's query
    (``/v1/?key=...chat/completions``), so the query is passed apart.

    Raises ValueError when the URL holds the marker of a saved file (settings read back from a
    manifest, whose URL credentials were never saved), or does not parse as a URL."""
    if url is None:
        return None, None
    try:
        parts = urlsplit(url)
        _ = parts.port
    except ValueError as e:
        raise ValueError(f"base_url: not a URL ({e})") from None
    query = parse_qsl(parts.query, keep_blank_values=True)
    if URL_PART_MARKER in (parts.username, parts.password) or any(v == URL_PART_MARKER for _, v in query):
        raise ValueError("base_url: its credentials (userinfo or query values) were not saved with the "
                         "run; give the role's settings again (--settings) with the full base_url")
    for part in (parts.username, parts.password):
        if part:
            redactor.add(part)
            redactor.add(unquote(part))
    if "@" in parts.netloc:
        redactor.add(parts.netloc.rsplit("@", 1)[0])
    for _, value in query:
        redactor.add(value)
    if parts.query:
        redactor.add(parts.query)
    bare = urlunsplit((parts.scheme, parts.netloc, parts.path, "", parts.fragment))
    return bare, (dict(query) or None)
