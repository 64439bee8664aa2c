"""Validator audits of content: rendered instructions, excerpts and the prompt hash, caller
isolation, languages and the call's date and time (issue 2 item 5; paper sections on the bundle and
on who sees what).
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime
from typing import Any

from callbench.bundle.excerpts import excerpt_cut, locate_excerpt
from callbench.bundle.loader import MAX_PROMPT_CHARS, render_instructions, sha256_text
from callbench.bundle.models import LoadedAgent, Scenario
from callbench.bundle.validate_tools import Report

# ---------------------------------------------------------------- instructions


def audit_prompt(agent: LoadedAgent, report_agent: Report, report_prompt: Report) -> bool:
    """Agent-level instruction audits; returns True when the template renders.

    Codes: ``prompt.hash_mismatch`` (``prompt_sha256`` is recorded and differs from the SHA-256 of
    the template's UTF-8 text, or is not 64 hex digits), ``prompt.empty``, ``prompt.render`` (the
    template fails with neutral values: an undefined variable or a jinja2 syntax error).
    """
    text = agent.instructions_template
    rec = agent.config.prompt_sha256
    if rec is not None:
        actual = sha256_text(text)
        if not re.fullmatch(r"[0-9a-fA-F]{64}", rec):
            report_agent("prompt_sha256", "prompt.hash_mismatch",
                         f"{rec!r} is not a hex SHA-256 (64 hex digits)")
        elif rec.lower() != actual:
            report_agent("prompt_sha256", "prompt.hash_mismatch",
                         f"recorded {rec[:12]}... but {agent.config.instructions_file} hashes to "
                         f"{actual[:12]}...; "
                         "the instructions changed after the scenarios were written against them")
    if not text.strip():
        report_prompt("", "prompt.empty", "the operating instructions are empty")
        return False
    try:
        render_instructions(agent)
    except ValueError as e:
        report_prompt("", "prompt.render", str(e)[:400])
        return False
    return True


def _nfc(s: str) -> str:
    return unicodedata.normalize("NFC", s)


def audit_rendered(agent: LoadedAgent, scen: Scenario, report: Report,
                   report_prompt: Report, prompt_ok: bool, seen_sizes: set[str]) -> None:
    """Render the instructions for one scenario and check its criteria excerpts against them.

    Codes: ``brief.datetime`` (not ISO 8601, or no UTC offset), ``prompt.render`` (rendering fails
    with this scenario's variables), ``size.prompt`` (rendered text over
    :data:`~callbench.bundle.loader.MAX_PROMPT_CHARS`; reported once per agent on the prompt file),
    ``excerpt.not_verbatim`` (an excerpt is empty or not in the rendered text, a line break
    reading as a space; paper: "a criterion cannot hold the agent to a rule it was never given"),
    ``excerpt.partial`` (an excerpt starts or ends mid-sentence; see :mod:`callbench.bundle.excerpts`).
    """
    try:
        when = datetime.fromisoformat(scen.brief.datetime)
    except ValueError:
        report("brief.datetime", "brief.datetime",
               f"{scen.brief.datetime!r} is not ISO 8601 (e.g. 2026-03-14T17:20:00+05:30)")
        return
    if when.tzinfo is None:
        report("brief.datetime", "brief.datetime",
               f"{scen.brief.datetime!r} has no UTC offset (e.g. +05:30); the call's local time is ambiguous")
    if not prompt_ok:
        return
    try:
        rendered = render_instructions(agent, scen)
    except ValueError as e:
        report("variables", "prompt.render", f"instructions of {agent.config.id!r} fail to render: {e}"[:400])
        return
    if len(rendered) > MAX_PROMPT_CHARS and agent.config.id not in seen_sizes:
        seen_sizes.add(agent.config.id)
        report_prompt("", "size.prompt",
                      f"rendered instructions are {len(rendered)} characters, "
                      f"over the {MAX_PROMPT_CHARS} limit")
    for ci, crit in enumerate(scen.criteria):
        for ei, ex in enumerate(crit.excerpts):
            path = f"criteria.{ci}.excerpts.{ei}"
            exn = _nfc(ex)
            if not exn.strip():
                report(path, "excerpt.not_verbatim", "the excerpt is empty")
            elif locate_excerpt(rendered, exn) is None:
                hint = ""
                if "{{" in exn or "{%" in exn:
                    hint = "; it holds template syntax, quote the rendered text instead"
                short = exn if len(exn) <= 80 else exn[:77] + "..."
                report(path, "excerpt.not_verbatim",
                       f"excerpt {short!r} of criterion {crit.id!r} is not verbatim in the rendered "
                       f"instructions of {agent.config.id!r}{hint}")
            elif (why := excerpt_cut(rendered, exn)) is not None:
                short = exn if len(exn) <= 80 else exn[:38] + " ... " + exn[-38:]
                report(path, "excerpt.partial",
                       f"excerpt {short!r} of criterion {crit.id!r} {why} in the instructions of "
                       f"{agent.config.id!r}: quote the whole sentence or clause, so the judge reads "
                       "the rule as the agent was given it")


# ---------------------------------------------------------------- languages

_BCP47 = re.compile(
    r"^[A-Za-z]{2,3}(-[A-Za-z]{3}){0,3}(-[A-Za-z]{4})?(-([A-Za-z]{2}|[0-9]{3}))?"
    r"(-([A-Za-z0-9]{5,8}|[0-9][A-Za-z0-9]{3}))*(-[0-9A-WY-Za-wy-z](-[A-Za-z0-9]{2,8})+)*"
    r"(-[xX](-[A-Za-z0-9]{1,8})+)?$"
)


def bcp47_ok(tag: str) -> bool:
    """Well-formed BCP 47 language tag (RFC 5646 section 2.1, without grandfathered tags)."""
    return bool(_BCP47.match(tag))


def language_covered(tag: str, languages: list[str]) -> bool:
    """True when ``tag`` equals one of ``languages`` (case-insensitive), or one of them is the bare
    primary language of ``tag`` (``gu`` covers ``gu-IN``)."""
    t = tag.lower()
    primary = t.split("-")[0]
    return any(lang.lower() in (t, primary) for lang in languages)


def audit_languages(agent: LoadedAgent, scen: Scenario, report: Report) -> None:
    """Codes: ``language.tag`` (not a well-formed BCP 47 tag), ``language.agent`` (the scenario's
    language is not one the agent declares; a warning in spirit, but reported like every problem),
    ``language.brief_mismatch`` (``brief.language`` differs from the scenario's ``language``)."""
    for path, tag in (("language", scen.language), ("brief.language", scen.brief.language)):
        if not bcp47_ok(tag):
            report(path, "language.tag", f"{tag!r} is not a well-formed BCP 47 tag (e.g. gu-IN)")
    if not language_covered(scen.language, agent.config.languages):
        report("language", "language.agent",
               f"{scen.language!r} is not among agent {agent.config.id!r}'s languages "
               f"{agent.config.languages}")
    if scen.brief.language.lower() != scen.language.lower():
        report("brief.language", "language.brief_mismatch",
               f"brief language {scen.brief.language!r} differs from the scenario language {scen.language!r}")


# ---------------------------------------------------------------- caller isolation

_NON_ASCII_DIGIT = re.compile(r"(?![0-9])\d")
_DIGIT_SEP = re.compile(r"(?<=[0-9])[ ,_\u00a0\u202f\u2009.-](?=[0-9])")


def norm_text(s: str) -> str:
    """NFC, casefold, every Unicode decimal digit (e.g. Gujarati ૧૨૩) as ASCII."""
    s = unicodedata.normalize("NFC", s).casefold()
    return _NON_ASCII_DIGIT.sub(lambda m: str(unicodedata.decimal(m.group(), 0)), s)


def _collapse(s: str) -> str:
    """Digits grouped for reading (``98765 43210``, ``1,20,000``) joined up."""
    return _DIGIT_SEP.sub("", s)


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
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v) if isinstance(v, int) else repr(v)


def _word_in(needle: str, hay: str) -> bool:
    """``needle`` occurs in ``hay`` with no letter, digit or combining mark glued to either side."""
    start = hay.find(needle)
    while start >= 0:
        end = start + len(needle)
        before = hay[start - 1] if start else " "
        after = hay[end] if end < len(hay) else " "
        if not _glued(before) and not _glued(after):
            return True
        start = hay.find(needle, start + 1)
    return False


def _glued(c: str) -> bool:
    return c.isalnum() or unicodedata.category(c).startswith("M")


def _number_in(num: str, hay: str) -> bool:
    return re.search(rf"(?<![0-9]){re.escape(num)}(?![0-9])", hay) is not None


def brief_texts(scen: Scenario) -> list[tuple[str, str]]:
    """(path, text) of every free-text field of the brief the caller reads (known facts excluded)."""
    b = scen.brief
    out = [("brief.context", b.context), ("brief.reason", b.reason), ("brief.persona", b.persona)]
    out += [(f"brief.unknown_facts.{i}", t) for i, t in enumerate(b.unknown_facts)]
    for i, st in enumerate(b.plan):
        out += [(f"brief.plan.{i}.trigger", st.trigger), (f"brief.plan.{i}.meaning", st.meaning)]
    return out


def audit_isolation(scen: Scenario, report: Report) -> None:
    """Caller isolation (paper, Table 1: the caller never sees the backend state).

    Code ``isolation.leak``: a hidden-state leaf value appears in the brief's text (context, reason,
    persona, unknown facts, plan triggers and meanings) and is not equal to or contained in one of
    the caller's known-fact values. Considered leaves: strings of at least 4 characters after NFC
    and casefolding (matched as whole words; digit strings also with reading separators removed)
    and numbers with at least 3 digits (matched with no digit on either side, also against digit
    groups such as ``1,20,000``). Booleans, nulls and short values are too common to judge.
    """
    leaves = [(p, v) for p, v in _leaves(scen.hidden_state, "hidden_state")
              if isinstance(v, str) or (_is_num(v) and sum(c.isdigit() for c in _number_text(v)) >= 3)]
    if not leaves:
        return
    texts = [(p, norm_text(t)) for p, t in brief_texts(scen)]
    texts += [(p, _collapse(t)) for p, t in texts]
    sep = "\n\x00\n"  # cannot occur inside a value searched for, so a match never spans two texts
    brief_all = sep.join(t for _, t in texts)
    known_vals = [norm_text(_number_text(v) if _is_num(v) else str(v))
                  for _, v in _leaves(scen.brief.known_facts, "")
                  if v is not None and not isinstance(v, bool)]
    known_all = sep.join(known_vals + [_collapse(k) for k in known_vals])
    for path, v in leaves:
        if _is_num(v):
            num = _number_text(v)
            if _number_in(num, brief_all) and not _number_in(num, known_all):
                hit = next(p for p, t in texts if _number_in(num, t))
                report(path, "isolation.leak", f"hidden-state value {num} appears in {hit} "
                                               "but is not one of the caller's known facts")
            continue
        s = norm_text(v).strip()
        if len(s) < 4 or "\x00" in s:
            continue
        digits_only = _collapse(s) if re.fullmatch(r"[0-9 ,_.\-\u00a0\u202f\u2009]+", s) else None

        def found(t: str, s: str = s, digits_only: str | None = digits_only) -> bool:
            return _word_in(s, t) or bool(digits_only and _number_in(digits_only, t))

        if found(brief_all) and s not in known_all and not (digits_only and digits_only in known_all):
            hit = next(p for p, t in texts if found(t))
            short = v if len(v) <= 60 else v[:57] + "..."
            report(path, "isolation.leak", f"hidden-state value {short!r} appears in {hit} "
                                           "but is not one of the caller's known facts")


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)
