"""Caller isolation as a kind (paper, Table 1: the caller never sees the backend).

Everything the caller simulator reads of a scenario (its brief: context, reason, persona, unknown
facts, plan triggers and meanings, and the values of its known facts) is searched for every
*secret* value of the scenario: each leaf of ``hidden_state`` (strings of at least 4 letters and
digits, numbers of at least 3 digits) and each identifying leaf of the fixtures' responses,
mismatch responses and defaults (a value holding a digit with at least 4 letters and digits, or a
number of at least 3 digits, not a clock time; ``${...}`` references are skipped: a caller
reference is the caller's own by construction, a state reference is a hidden value already).
Values are compared in normalised forms (:mod:`callbench.bundle.normalize`: case, Unicode
composition, digits of any script, any separators inside identifiers).

Codes: ``isolation.caller_known`` (a ``caller_known`` key that is no known fact),
``isolation.leak`` (a secret in the brief's free text that no known fact holds: the caller would
say what only the backend knows) and ``isolation.known_fact`` (a known fact holding a secret:
copying a hidden value into ``known_facts`` would make any leak legal; checked for machine-written
scenarios, see :func:`audit_caller_isolation`). A known fact the caller
really knows although the backend holds it too (their own name, their own account number) is
declared in the scenario's ``caller_known`` (fact -> reason); its value may then appear anywhere
in the brief.
"""

from __future__ import annotations

import re
from typing import Any

from callbench.bundle.models import Scenario
from callbench.bundle.normalize import TextSet
from callbench.bundle.validate.tools import Report

_CLOCK = re.compile(r"[0-9]{1,2}:[0-9]{2}(\s*-\s*[0-9]{1,2}:[0-9]{2})?")


def _leaves(v: Any, where: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    stack: list[tuple[Any, str]] = [(v, where)]
    while stack:
        x, w = stack.pop()
        if isinstance(x, dict):
            stack.extend((y, f"{w}.{k}") for k, y in x.items())
        elif isinstance(x, list):
            stack.extend((y, f"{w}.{i}") for i, y in enumerate(x))
        else:
            out.append((w, x))
    return sorted(out, key=lambda t: t[0])


def _number_text(v: int | float) -> str:
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def _secret(v: Any, identifying_only: bool) -> tuple[str, int] | None:
    """(text, minimum letters-and-digits) of a value worth searching for, or None."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float):
        return (_number_text(v), 3)
    if not isinstance(v, str) or "${" in v:
        return None
    s = v.strip()
    if identifying_only and (not any(c.isdigit() for c in s) or _CLOCK.fullmatch(s)):
        return None
    return (s, 4)


def secret_values(scen: Scenario) -> list[tuple[str, str, int]]:
    """(path, text, minimum letters and digits) of every secret value of ``scen`` (module
    docstring), hidden state first, in path order."""
    out: list[tuple[str, str, int]] = []
    for path, v in _leaves(scen.hidden_state, "hidden_state"):
        got = _secret(v, identifying_only=False)
        if got is not None:
            out.append((path, *got))
    for name, fx in sorted(scen.fixtures.items()):
        parts: list[tuple[str, Any]] = []
        for i, e in enumerate(fx.queue):
            parts += [(f"fixtures.{name}.queue.{i}.response", e.response),
                      (f"fixtures.{name}.queue.{i}.mismatch_response", e.mismatch_response)]
        parts.append((f"fixtures.{name}.default", fx.default))
        for where, value in parts:
            for path, v in _leaves(value, where):
                got = _secret(v, identifying_only=True)
                if got is not None:
                    out.append((path, *got))
    return out


def caller_texts(scen: Scenario) -> list[tuple[str, str]]:
    """(path, text) of every free-text field of the brief the caller reads (known facts apart)."""
    b = scen.brief
    out = [("brief.context", b.context), ("brief.reason", b.reason), ("brief.persona", b.persona)]
    out += [(f"brief.unknown_facts.{i}", t) for i, t in enumerate(b.unknown_facts)]
    for i, st in enumerate(b.plan):
        out += [(f"brief.plan.{i}.trigger", st.trigger), (f"brief.plan.{i}.meaning", st.meaning)]
    return out


def _what(path: str) -> str:
    return "hidden-state value" if path.startswith("hidden_state") else "fixture value"


def audit_caller_isolation(scen: Scenario, report: Report, *, strict_known_facts: bool = True) -> None:
    """Report every secret value of ``scen`` the caller would read (codes in the module docstring).
    A secret is reported once, at its own path, naming the first brief field that holds it.

    ``strict_known_facts`` (the default, and what ``callbench generate`` and ``callbench validate``
    apply to machine-written scenarios) reports undeclared known facts that hold a secret. Off, for
    hand-authored scenarios, a known fact is trusted to be the caller's own, as its author wrote
    it (docs/decisions.md, "Caller isolation as a kind"); the free-text search is the same."""
    for key in sorted(set(scen.caller_known) - set(scen.brief.known_facts)):
        report(f"caller_known.{key}", "isolation.caller_known",
               f"{key!r} is not a key of brief.known_facts; caller_known declares known facts only")
    secrets = secret_values(scen)
    if not secrets:
        return
    facts = [(f"brief.known_facts.{p.lstrip('.')}", p.lstrip(".").split(".")[0],
              _number_text(v) if isinstance(v, int | float) else str(v))
             for p, v in _leaves(scen.brief.known_facts, "") if v is not None and not isinstance(v, bool)]
    texts = caller_texts(scen)
    fact_set, text_set = TextSet([fv for _, _, fv in facts]), TextSet([t for _, t in texts])
    for path, value, min_chars in secrets:
        in_facts = [facts[i][:2] for i in fact_set.holding(value, min_chars)]
        unmarked = [(p, key) for p, key in in_facts if key not in scen.caller_known and strict_known_facts]
        short = value if len(value) <= 60 else value[:57] + "..."
        if unmarked:
            p, key = unmarked[0]
            report(path, "isolation.known_fact",
                   f"{_what(path)} {short!r} is the caller's known fact {p}: a value the backend holds is "
                   f"not the caller's to know unless it is theirs; remove it, or declare "
                   f"caller_known.{key} with the reason the caller knows it")
            continue
        if in_facts:
            continue  # declared caller-known: it may appear anywhere in the brief
        hits = text_set.holding(value, min_chars)
        if hits:
            hit = texts[hits[0]][0]
            report(path, "isolation.leak",
                   f"{_what(path)} {short!r} appears in {hit} but is not one of the caller's known facts")
