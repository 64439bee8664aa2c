"""The audit step of the repair loop: a candidate scenario checked exactly as a bundle file would
be.

:func:`audit_candidate` writes the candidate, as the very text :func:`scenario_text` would write
into the bundle, into a temporary copy of the bundle that holds the agent and this one scenario
(the other agents and scenarios are left out: the agent's own files were validated before the batch
started, and id clashes are checked by the generator), then runs ``callbench validate`` on the copy
(static audits and the reference replay, :func:`callbench.bundle.validate.audits.validate_path`) and returns
every problem located in the bundle's own file names. A candidate that passes validate then goes
through the run audit of ``callbench audit`` (:func:`callbench.audit.core.audit_bundle`, scoped to
this scenario: null floor, leak audit, channel events that never apply).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from callbench.audit.core import GENERATION_FLOOR, audit_bundle
from callbench.bundle.loader import Problem
from callbench.bundle.models import ID_PATTERN
from callbench.bundle.provenance import GENERATED_HEADER
from callbench.bundle.validate.audits import validate_path

ROOT_SKIP = frozenset({"provenance.yaml", "provenance.yml", "provenance.json", "generation.yaml"})


def scenario_text(data: dict[str, Any]) -> str:
    """The YAML text of a generated scenario: :data:`GENERATED_HEADER`, then ``data`` in the
    model's key order (``yaml.safe_dump``, UTF-8 kept, width 100). Deterministic for equal data."""
    return GENERATED_HEADER + yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=100)


def candidate_file_name(data: dict[str, Any]) -> str:
    """``<id>.yaml`` for a valid id, else ``candidate.yaml`` (the schema audit reports the id)."""
    import re

    sid = data.get("id")
    return f"{sid}.yaml" if isinstance(sid, str) and re.fullmatch(ID_PATTERN, sid) else "candidate.yaml"


def _copy_bundle(src: Path, dst: Path, agent_id: str) -> None:
    for entry in src.iterdir():
        if entry.name in ROOT_SKIP or entry.name.startswith("."):
            continue
        if entry.name == "agents" and entry.is_dir():
            continue
        if entry.is_dir():
            shutil.copytree(entry, dst / entry.name, symlinks=True)
        else:
            shutil.copy2(entry, dst / entry.name)
    agent_src = src / "agents" / agent_id
    agent_dst = dst / "agents" / agent_id
    shutil.copytree(
        agent_src,
        agent_dst,
        symlinks=True,
        ignore=lambda d, names: ["scenarios"] if Path(d) == agent_src else [],
    )
    (agent_dst / "scenarios").mkdir()
    prompt = (agent_src / _instructions_file(agent_src)).resolve()
    try:  # an operating document kept in another agent's folder comes along too
        rel = prompt.relative_to(src.resolve())
    except ValueError:
        return  # outside the bundle: validate reports path.escape on the copy as on the bundle
    if rel.parts[:1] == ("agents",) and prompt.is_file() and not (dst / rel).exists():
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(prompt, dst / rel)


def _instructions_file(agent_dir: Path) -> str:
    for name in ("agent.yaml", "agent.yml", "agent.json"):
        if (agent_dir / name).is_file():
            try:
                data = yaml.safe_load((agent_dir / name).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, yaml.YAMLError):
                return "prompt.md"
            value = data.get("instructions_file") if isinstance(data, dict) else None
            return value if isinstance(value, str) and value else "prompt.md"
    return "prompt.md"


async def audit_candidate(bundle_dir: Path, agent_id: str, scenario: dict[str, Any]) -> list[Problem]:
    """Every problem of ``scenario`` (parsed JSON of one scenario file) as a file of agent
    ``agent_id`` in the bundle at ``bundle_dir``. Problems are located as in ``callbench validate``
    (``agents/<agent>/scenarios/<id>.yaml``, dotted field path, code, message). Raises ``OSError``
    when the bundle cannot be copied to a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="callbench-generate-") as tmp:
        root = Path(tmp) / "bundle"
        root.mkdir()
        _copy_bundle(bundle_dir, root, agent_id)
        target = root / "agents" / agent_id / "scenarios" / candidate_file_name(scenario)
        target.write_text(scenario_text(scenario), encoding="utf-8")
        bundle, problems = validate_path(root)
        if bundle is not None and not problems and isinstance(scenario.get("id"), str):
            # the run audit (audit/core.py): null floor, leak audit, channel events that never
            # apply; validate's problems are already known (none), so it does not validate again
            report = await audit_bundle(bundle, scenario_ids=[scenario["id"]], static_problems=[],
                                        floor_candidates=GENERATION_FLOOR)
            problems += report.problems
        return problems
