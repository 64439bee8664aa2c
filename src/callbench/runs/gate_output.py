"""What the CI gate writes: JUnit XML, a Markdown summary for a pull-request comment, and JSON.

JUnit mapping (docs/ci.md): one ``<testsuite name="callbench scenarios">`` with one ``<testcase>``
per scenario and candidate (``classname`` = candidate, ``name`` = ``agent/scenario``). It fails
when any repeat did not pass (outcome not met, or overall under the cutoff); the failure text
lists, per failing repeat, its scores and every unmet or partly met action check, criterion and
low rating with the judge's reason. Every repeat skipped or ungraded makes it ``<skipped>``. A
second ``<testsuite name="callbench gate">`` holds one test case per gate decision (threshold,
regression, comparable baseline), failed or skipped as decided. Written with xml.etree and
atomically.
"""

from __future__ import annotations

import os
import tempfile
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from callbench.runs.gate import GateResult
from callbench.stats.summary import EpisodeRecord

LOW_RATING = 3
"""A conversation rating at or below this is listed in the failure text."""


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _episode_failure(rec: EpisodeRecord) -> str | None:
    """The failure text of one scored repeat, or None when it passed."""
    g = rec.grade
    if g is None or g.passed is not False:
        return None
    overall = "undefined" if g.overall is None else f"{g.overall:.1f}"
    lines = [f"repeat {rec.repeat}: overall {overall} (cutoff {g.cutoff:g}), end: {g.end_reason}"]
    for item in g.items:
        low_rating = item.rating is not None and item.rating <= LOW_RATING
        if item.label in ("not_met", "partial", "judge_error") or low_rating:
            mark = f"rating {item.rating}" if item.rating is not None else str(item.label)
            reason = f": {item.reason}" if item.reason else ""
            lines.append(f"  - {item.source} {item.id} [{mark}, {item.diagnostic}]{reason}")
    return "\n".join(lines)


def junit_xml(result: GateResult, records: list[EpisodeRecord]) -> str:
    """The JUnit XML text (mapping in the module docstring)."""
    root = ET.Element("testsuites", name="callbench")
    suite = ET.SubElement(root, "testsuite", name="callbench scenarios")
    cells: dict[tuple[str, str, str], list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        cells[(r.candidate, r.agent_id, r.scenario_id)].append(r)
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    for (cand, agent, scen), recs in sorted(cells.items()):
        case = ET.SubElement(suite, "testcase", classname=cand, name=f"{agent}/{scen}")
        counts["tests"] += 1
        scored = [r for r in recs if r.status == "scored" and r.grade is not None]
        if not scored:
            why = "; ".join(sorted({r.skip_reason or r.not_graded_reason or r.status for r in recs}))
            ET.SubElement(case, "skipped", message=f"no scored repeat ({why})")
            counts["skipped"] += 1
            continue
        fails = [t for t in (_episode_failure(r) for r in sorted(scored, key=lambda x: x.repeat)) if t]
        if fails:
            failure = ET.SubElement(case, "failure",
                                    message=f"{len(fails)} of {len(scored)} repeat(s) did not pass",
                                    type="callbench.scenario")
            failure.text = "\n".join(fails)
            counts["failures"] += 1
    for k, v in counts.items():
        suite.set(k, str(v))
    gate = ET.SubElement(root, "testsuite", name="callbench gate")
    gcounts = {"tests": 0, "failures": 0, "skipped": 0}
    for d in result.decisions:
        case = ET.SubElement(gate, "testcase", classname=f"gate.{d.candidate}", name=d.name)
        gcounts["tests"] += 1
        if d.status == "failed":
            ET.SubElement(case, "failure", message=d.detail, type="callbench.gate").text = d.detail
            gcounts["failures"] += 1
        elif d.status == "skipped":
            ET.SubElement(case, "skipped", message=d.detail)
            gcounts["skipped"] += 1
        else:
            ET.SubElement(case, "system-out").text = d.detail
    for k, v in gcounts.items():
        gate.set(k, str(v))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def markdown_summary(result: GateResult, report_candidates: list[dict[str, object]]) -> str:
    """A Markdown summary for a pull-request comment: the verdict, each decision, the candidates'
    overall scores with intervals, and the differences from the baseline."""
    verdict = {0: "passed", 1: "FAILED", 3: "REFUSED (runs not comparable)"}.get(result.exit_code, "error")
    icon = {"passed": "✅", "failed": "❌", "skipped": "⏭️"}
    lines = [f"## callbench gate: {verdict}", ""]
    if result.baseline:
        lines += [f"Run `{result.run}` against baseline `{result.baseline}` "
                  f"(allowed drop {result.max_drop:g} points{', strict' if result.strict else ''}).", ""]
    lines += ["| | check | candidate | detail |", "|---|---|---|---|"]
    for d in result.decisions:
        lines.append(f"| {icon[d.status]} | {d.name} | `{d.candidate}` | {d.detail.replace('|', '/')} |")
    lines += ["", "| candidate | overall | task | conversation | pass rate |", "|---|---|---|---|---|"]
    for c in report_candidates:
        cells = []
        for key in ("overall", "task", "conversation", "pass_rate"):
            v = c.get(key)
            if isinstance(v, dict) and v.get("estimate") is not None:
                cells.append(f"{v['estimate']:.1f} [{v.get('low') or 0:.1f}, {v.get('high') or 0:.1f}]")
            else:
                cells.append("-")
        lines.append(f"| `{c.get('candidate')}` | " + " | ".join(cells) + " |")
    if result.differences:
        lines += ["", "Differences from the baseline:", *[f"- {x}" for x in result.differences]]
    return "\n".join(lines) + "\n"


def write_outputs(result: GateResult, records: list[EpisodeRecord], report_json: dict[str, object], *,
                  junit: Path | None, markdown: Path | None, json_path: Path | None) -> None:
    """Write whichever outputs are asked for, each atomically. Raises ``OSError``."""
    import json

    if junit is not None:
        _atomic_write(junit, junit_xml(result, records))
    cands = report_json.get("candidates")
    if markdown is not None:
        _atomic_write(markdown, markdown_summary(result, cands if isinstance(cands, list) else []))
    if json_path is not None:
        body = {"gate": result.model_dump(mode="json"), "report": report_json}
        _atomic_write(json_path, json.dumps(body, indent=2, ensure_ascii=False) + "\n")
