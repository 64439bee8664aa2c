"""Validator audits of content: rendered instructions, excerpts and the prompt hash, caller
isolation, languages and the call's date and time (paper sections on the bundle and
on who sees what).
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime

from callbench.bundle.excerpts import excerpt_cut, locate_excerpt
from callbench.bundle.loader import MAX_PROMPT_CHARS, sha256_text
from callbench.bundle.models import LoadedAgent, Scenario
from callbench.bundle.normalize import norm_text as norm_text  # re-exported
from callbench.bundle.render import render_instructions
from callbench.bundle.validate.isolation import audit_caller_isolation
from callbench.bundle.validate.tools import Report

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
            elif locate_excerpt(rendered, exn, rendered_is_nfc=True) is None:
                hint = ""
                if "{{" in exn or "{%" in exn:
                    hint = "; it holds template syntax, quote the rendered text instead"
                short = exn if len(exn) <= 80 else exn[:77] + "..."
                report(path, "excerpt.not_verbatim",
                       f"excerpt {short!r} of criterion {crit.id!r} is not verbatim in the rendered "
                       f"instructions of {agent.config.id!r}{hint}")
            elif (why := excerpt_cut(rendered, exn, rendered_is_nfc=True)) is not None:
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

def audit_isolation(scen: Scenario, report: Report, *, strict_known_facts: bool = False) -> None:
    """Caller isolation (paper, Table 1: the caller never sees the backend state): hidden-state and
    fixture values in anything the caller reads, in normalised forms, and (``strict_known_facts``,
    for machine-written scenarios) known facts that copy them (codes ``isolation.leak``,
    ``isolation.known_fact``, ``isolation.caller_known``; rules in
    :mod:`callbench.bundle.validate.isolation`)."""
    audit_caller_isolation(scen, report, strict_known_facts=strict_known_facts)


