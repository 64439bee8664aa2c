"""``callbench review``: reading generated scenarios and recording accept / reject.

A decision is written to both files that carry review state, each for its own reader
(docs/decisions.md, "Generation manifest"): the generation manifest's ``review`` (``accepted`` or
``rejected``, the reviewer, the time in ISO 8601 UTC) and the provenance entry (``reviewed`` with the
reviewer and the date, pinned to the SHA-256 of the file as read). A rejected scenario's file and
provenance entry are removed, so it is never run; the manifest keeps its record and output hash.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from callbench.bundle.loader import Problem, load_bundle_collect
from callbench.bundle.models import ActionCheck, Scenario
from callbench.bundle.provenance import Review, file_sha256, load_provenance, provenance_path, save_provenance
from callbench.generate.manifest import ReviewRecord, ScenarioRecord, load_manifest, save_manifest
from callbench.generate.request import disk_matcher


class ReviewError(ValueError):
    """A review that cannot be recorded (unknown id, no reviewer, an unreadable manifest)."""


class PendingScenario(BaseModel):
    """A generated scenario waiting for review: its id, record and the loaded scenario (None when
    the file no longer loads)."""

    scenario_id: str
    record: ScenarioRecord
    scenario: Scenario | None = None


class ReviewResult(BaseModel):
    """The ids accepted and rejected by :func:`record_review`."""

    accepted: list[str] = Field(default_factory=list)
    rejected: list[str] = Field(default_factory=list)


def pending(root: Path, agent: str | None = None, *, include_reviewed: bool = False) -> list[PendingScenario]:
    """Generated scenarios of the bundle at ``root`` (of ``agent`` when given) whose review is
    ``unreviewed`` (all generated ones with ``include_reviewed``), by id."""
    manifest = load_manifest(root)
    bundle, _ = load_bundle_collect(root)
    loaded: dict[str, Scenario] = {}
    if bundle is not None:
        loaded = {s.id: s for _, s in bundle.scenarios()}
    out = []
    for sid, rec in sorted(manifest.scenarios.items()):
        if agent is not None and not rec.file.startswith(f"agents/{agent}/"):
            continue
        if rec.review.status != "unreviewed" and not include_reviewed:
            continue
        out.append(PendingScenario(scenario_id=sid, record=rec, scenario=loaded.get(sid)))
    return out


def _yaml(value: Any) -> str:
    return yaml.safe_dump(value, allow_unicode=True, sort_keys=False, width=96).rstrip()


def _indent(text: str, n: int = 4) -> str:
    return "\n".join(" " * n + line for line in text.splitlines())


def _check_line(c: ActionCheck) -> str:
    args = {k: disk_matcher(m.model_dump(mode="json")) for k, m in c.args.items()}
    count = (
        "never"
        if c.count.max == 0
        else (f"{c.count.min}..{c.count.max if c.count.max is not None else 'any'} times")
    )
    extra = "".join(
        [
            f"; after {', '.join(c.after)}" if c.after else "",
            f"; applies after {', '.join(c.applies_after)}" if c.applies_after else "",
        ]
    )
    shown = f" {_yaml(args).replace(chr(10), '; ')}" if args else ""
    return (
        f"- {c.id} [{c.diagnostic.value}, importance {c.importance}]: {c.tool}{shown} -- {count}{extra}"
        + (f"\n    {c.description}" if c.description else "")
    )


def render_scenario(s: Scenario) -> str:
    """A readable plain-text view of a scenario for a reviewer: goal, brief (facts, plan as trigger
    -> meaning), hidden state, channel, fixtures, action checks, criteria and the reference path."""
    b = s.brief
    parts = [
        f"{s.id}: {s.title}",
        f"agent {s.agent} · {s.language} · {s.difficulty} · tags {', '.join(s.tags) or '-'}",
        f"\nGOAL (graders only)\n{_indent(s.goal)}",
        f"\nBRIEF (the caller's private knowledge)\n    context: {b.context}\n    reason: {b.reason}",
        f"    persona: {b.persona or '-'}\n    language {b.language}, script {b.script}, at {b.datetime}",
        "    known facts:\n" + (_indent(_yaml(b.known_facts), 6) if b.known_facts else "      -"),
        "    unknown facts: " + ("; ".join(b.unknown_facts) or "-"),
        "    plan:",
        *[f"      {i + 1}. {p.id}: when {p.trigger}\n         -> {p.meaning}" for i, p in enumerate(b.plan)],
        "\nHIDDEN STATE (backend only)\n" + (_indent(_yaml(s.hidden_state)) if s.hidden_state else "    -"),
        "\nCHANNEL\n"
        + (
            _indent(_yaml(ch))
            if (ch := s.channel.model_dump(mode="json", exclude_defaults=True))
            else "    clean (no events)"
        ),
        "\nFIXTURES",
    ]
    for tool, fx in s.fixtures.items():
        parts.append(f"  {tool}:")
        for j, e in enumerate(fx.queue):
            args = {k: disk_matcher(m.model_dump(mode="json")) for k, m in e.args.items()}
            parts.append(
                f"    call {j + 1} if {_yaml(args).replace(chr(10), '; ') if args else 'any arguments'}"
            )
            parts.append(f"      -> {_yaml(e.response).replace(chr(10), '; ')}")
            parts.append(f"      else {_yaml(e.mismatch_response).replace(chr(10), '; ')}")
        if fx.default is not None:
            parts.append(f"    later calls -> {_yaml(fx.default).replace(chr(10), '; ')}")
    parts.append("\nACTION CHECKS")
    parts += [_check_line(c) for c in s.action_checks] or ["  -"]
    parts.append("\nCRITERIA")
    for c in s.criteria:
        parts.append(
            f"- {c.id} [{c.pillar.value}, {c.diagnostic.value}, importance {c.importance}]: {c.statement}"
        )
        parts.append(
            f"    met: {c.anchors.met}\n    partial: {c.anchors.partial}\n    not met: {c.anchors.not_met}"
        )
        parts += [f'    excerpt: "{e}"' for e in c.excerpts]
    parts.append("\nREFERENCE PATH (one correct call)")
    for k, t in enumerate(s.reference_path or []):
        caller = (
            "opening"
            if k == 0
            else f"after caller turn {k} ({b.plan[k - 1].id})"
            if k <= len(b.plan)
            else f"turn {k}"
        )
        parts.append(f"  {k}. {caller}:")
        if t.before_tools:
            parts.append(f"     says: {t.before_tools}")
        for call in t.tool_calls:
            shown = ", ".join(f"{a}={v!r}" for a, v in call.arguments.items())
            parts.append(f"     calls {call.name}({shown})")
        if t.speech:
            parts.append(f"     says: {t.speech}")
    return "\n".join(parts)


def render_pending(p: PendingScenario) -> str:
    """:func:`render_scenario` with the generation record (batch, attempts, file) and, when the
    manifest recorded them, the sections its plan item asked it to test and the sections it tests
    (a criterion quoting them or a check only they name, :mod:`callbench.bundle.section_tests`):
    the reviewer judges whether those checks and criteria really test what the sections say."""
    head = (
        f"[{p.record.review.status}] generated in batch {p.record.batch}, item {p.record.item + 1}, "
        f"{p.record.attempts} attempt(s); {p.record.file}"
    )
    planned, written = p.record.planned, p.record.written
    if planned is not None and planned.sections:
        tested = "; ".join(written.sections) if written is not None and written.sections else "-"
        head += f"\nsections to test: {'; '.join(planned.sections)}\nsections tested: {tested}"
    body = (
        render_scenario(p.scenario)
        if p.scenario is not None
        else "(the file does not load: callbench validate)"
    )
    return f"{head}\n{body}"


def now_utc() -> str:
    """The current time, ISO 8601 UTC to the second."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def record_review(
    root: Path, *, accept: list[str], reject: list[str], reviewer: str, notes: str = "", at: str | None = None
) -> ReviewResult:
    """Record ``accept`` and ``reject`` decisions by ``reviewer`` (see the module docstring).

    Raises :class:`ReviewError` when ``reviewer`` is blank, an id is in both lists, or an id is no
    generated scenario of the manifest; nothing is written then. Raises ``OSError`` when a file
    cannot be written."""
    if not reviewer.strip():
        raise ReviewError("--reviewer: give the reviewer's name (it is recorded with each decision)")
    both = sorted(set(accept) & set(reject))
    if both:
        raise ReviewError(f"both accepted and rejected: {', '.join(both)}")
    try:
        manifest = load_manifest(root)
    except ValueError as e:
        raise ReviewError(str(e)) from None
    unknown = sorted(s for s in [*accept, *reject] if s not in manifest.scenarios)
    if unknown:
        raise ReviewError(
            f"not generated scenarios of this bundle (no record in generation.yaml): {', '.join(unknown)}"
        )
    when = at or now_utc()
    problems: list[Problem] = []
    prov = load_provenance(root, problems)
    ppath = provenance_path(root)
    result = ReviewResult()
    for sid in accept:
        rec = manifest.scenarios[sid]
        rec.review = ReviewRecord(status="accepted", by=reviewer, at=when, notes=notes)
        if prov is not None and sid in prov.scenarios and (root / rec.file).is_file():
            entry = prov.scenarios[sid]
            prov.scenarios[sid] = entry.model_copy(
                update={
                    "sha256": file_sha256(root / rec.file),
                    "review": Review(status="reviewed", by=[reviewer], date=when[:10], notes=notes),
                }
            )
        result.accepted.append(sid)
    for sid in reject:
        rec = manifest.scenarios[sid]
        rec.review = ReviewRecord(status="rejected", by=reviewer, at=when, notes=notes)
        (root / rec.file).unlink(missing_ok=True)
        if prov is not None:
            prov.scenarios.pop(sid, None)
        result.rejected.append(sid)
    save_manifest(root, manifest)
    if prov is not None and ppath is not None:
        save_provenance(ppath, prov)
    return result
