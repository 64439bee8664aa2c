"""``callbench import tau2 PATH --out BUNDLE``: write tau2-bench's retail domain as a bundle.

``PATH`` is a tau2-bench checkout (the domain's files are in ``data/tau2/domains/<domain>/``, as in
the sierra-research/tau2-bench repository), a data folder holding ``<domain>/``, or the domain
folder itself (:func:`find_domain_dir`). Reads the domain's tasks.json, split_tasks.json,
policy.md and db.json, its tools.json when present (tau2-bench itself has none: its tools are
Python code, so the retail tool facts read from that code ship with callbench as
``retail_tools.json``), and tau2-bench's ``LICENSE``; writes one agent (``tau2_<domain>``:
policy.md as its operating document, the tools with descriptions written here, a state of the
domain's tables) and one scenario per task
(:func:`callbench.importers.tau2.tasks.convert_task`), with a provenance file marking every
scenario ``imported`` with the source commit and task id. The folder is written next to ``out``
and renamed into place, so a failed import leaves nothing half-written.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from callbench.bundle.provenance import file_sha256
from callbench.bundle.state.engine import StateStore
from callbench.bundle.state.models import StateSpec
from callbench.importers.tau2.paths import PathNotes
from callbench.importers.tau2.tasks import TaskError, convert_task
from callbench.importers.tau2.tools import STATE_OPS, TRANSFERRED, tool_specs

SOURCE_REPO = "sierra-research/tau2-bench"
SOURCE_COMMIT = "a2c0247"
"""The tau2-bench commit whose data this importer was written and measured against; recorded in
provenance."""
DOMAINS = ("retail",)
"""Domains this importer can convert: those whose tools
have descriptions and state operations here (airline has neither yet)."""


class Tau2ImportError(Exception):
    """The source cannot be imported; the one-line message names the file and field."""


@dataclass
class ImportSummary:
    """What an import wrote: the bundle folder, scenario count, per-difficulty counts, and the
    reference paths' ``lookups`` (:class:`~callbench.importers.tau2.paths.PathNotes`: lookups
    inserted, values told, values no lookup reveals, located)."""

    out: Path
    scenarios: int
    hard: int
    medium: int
    lookups: PathNotes


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise Tau2ImportError(f"{path}: not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise Tau2ImportError(f"{path}: cannot read: {e}") from None
    except json.JSONDecodeError as e:
        raise Tau2ImportError(f"{path}: invalid JSON at line {e.lineno}: {e.msg}") from None


def _dump(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    else:
        path.write_text(
            yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100), encoding="utf-8"
        )


CHECKOUT_DATA = Path("data", "tau2", "domains")
"""Where a tau2-bench checkout keeps each domain's data files."""
PACKAGED_TOOLS = Path(__file__).with_name("retail_tools.json")
"""The retail tool facts (names, kinds, parameters, return types) read from tau2-bench's
``src/tau2/domains/retail/tools.py`` at the same commit; used when the domain folder has no
tools.json."""


def find_domain_dir(src: Path, domain: str) -> Path:
    """The folder holding ``domain``'s tasks.json under ``src``: ``src/data/tau2/domains/<domain>``
    (a tau2-bench checkout), ``src/<domain>`` (a data folder) or ``src`` itself (the domain folder).

    Raises :class:`Tau2ImportError` naming the places looked at when none holds tasks.json."""
    places = [src / CHECKOUT_DATA / domain, src / domain, src]
    for place in places:
        if (place / "tasks.json").is_file():
            return place
    if not src.is_dir():
        raise Tau2ImportError(f"{src}: no such folder (expected a tau2-bench checkout or its data folder)")
    looked = ", ".join(str(p / "tasks.json") for p in places)
    raise Tau2ImportError(
        f"{src}: no tau2-bench {domain} data here (looked for {looked}); give a checkout of "
        "sierra-research/tau2-bench or its data/tau2/domains folder"
    )


def _find_licence(src: Path, ddir: Path) -> Path | None:
    """tau2-bench's LICENSE: in the domain folder ``ddir`` or in ``src`` (the checkout's root or
    the data folder), never further up, where it would be another project's."""
    return next((f / "LICENSE" for f in (ddir, src) if (f / "LICENSE").is_file()), None)


def import_tau2(
    src: str | Path, out: str | Path, *, domain: str = "retail", force: bool = False
) -> ImportSummary:
    """Import ``domain`` of the tau2-bench checkout, data folder or domain folder ``src``
    (:func:`find_domain_dir`) as a bundle at ``out``.

    Raises :class:`Tau2ImportError` for an unknown domain, a missing or malformed source file, a task
    that cannot be converted, or an ``out`` that exists (unless ``force``: it is then replaced)."""
    src, out = Path(src), Path(out)
    if domain not in DOMAINS:
        raise Tau2ImportError(
            f"domain {domain!r}: only {', '.join(DOMAINS)} can be imported (its database "
            "is in the data folder and its tools are described here)"
        )
    ddir = find_domain_dir(src, domain)
    if out.exists() and not force:
        raise Tau2ImportError(f"{out}: already exists; choose another --out or pass --force to replace it")
    tasks = _read_json(ddir / "tasks.json")
    splits = _read_json(ddir / "split_tasks.json") if (ddir / "split_tasks.json").is_file() else {}
    tools_path = ddir / "tools.json" if (ddir / "tools.json").is_file() else PACKAGED_TOOLS
    tools_facts = _read_json(tools_path)
    db = _read_json(ddir / "db.json")
    if not isinstance(tasks, list):
        raise Tau2ImportError(f"{ddir / 'tasks.json'}: expected a list of tasks")
    if not isinstance(db, dict) or not all(
        isinstance(db.get(t), dict) for t in ("orders", "users", "products")
    ):
        raise Tau2ImportError(f"{ddir / 'db.json'}: expected objects 'orders', 'users' and 'products'")
    try:
        policy = (ddir / "policy.md").read_text(encoding="utf-8")
    except OSError as e:
        raise Tau2ImportError(f"{ddir / 'policy.md'}: cannot read: {e}") from None
    try:
        tools = tool_specs(
            tools_facts.get("tools", []) if isinstance(tools_facts, dict) else [], str(tools_path)
        )
    except ValueError as e:
        raise Tau2ImportError(str(e)) from None
    agent_id = f"tau2_{domain}"
    tables = {t: f"state/{t}.json" for t in ("orders", "products", "users")}
    spec = StateSpec.model_validate(
        {"tables": tables, "tools": {t["name"]: STATE_OPS[t["name"]] for t in tools}}
    )
    base = {t: db[t] for t in tables}
    split_of: dict[str, list[str]] = {}
    for name, ids in splits.items() if isinstance(splits, dict) else []:
        if name != "base":
            for i in ids:
                split_of.setdefault(str(i), []).append(name)
    scenarios = []
    notes = PathNotes()
    for task in tasks:
        try:
            scenarios.append(
                convert_task(
                    task,
                    StateStore(base, spec),
                    agent_id=agent_id,
                    splits=sorted(split_of.get(str(task.get("id")), [])),
                    source=str(ddir / "tasks.json"),
                    notes=notes,
                )
            )
        except TaskError as e:
            raise Tau2ImportError(str(e)) from None
    agent = {
        "id": agent_id,
        "name": f"tau2-bench {domain} customer service agent",
        "domain": domain,
        "languages": ["en-US"],
        "direction": "inbound",
        "description": f"The {domain} domain of tau2-bench ({SOURCE_REPO} {SOURCE_COMMIT}, MIT), imported by "
        "callbench import tau2: the source policy as the operating document, its tools "
        "answered from a stateful backend over the source database.",
        "tools": tools,
        "call_ending_tools": [
            {"tool": "transfer_to_human_agents", "success": {"status": {"eq": TRANSFERRED["status"]}}}
        ],
        "state": {"tables": tables, "tools": {t["name"]: STATE_OPS[t["name"]] for t in tools}},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        _dump(
            tmp / "bundle.yaml",
            {
                "name": f"tau2-{domain}",
                "version": f"{SOURCE_COMMIT}-1",
                "description": f"tau2-bench {domain} ({len(scenarios)} tasks), imported from "
                f"{SOURCE_REPO} at "
                f"commit {SOURCE_COMMIT} (MIT licence, see LICENSE-tau2-bench).",
            },
        )
        if (licence := _find_licence(src, ddir)) is not None:
            shutil.copyfile(licence, tmp / "LICENSE-tau2-bench")
        adir = tmp / "agents" / agent_id
        _dump(adir / "agent.yaml", agent)
        (adir / "prompt.md").write_text(policy, encoding="utf-8")
        for t, rel in tables.items():
            _dump(adir / rel, base[t])
        entries = {}
        for s in scenarios:
            rel = f"agents/{agent_id}/scenarios/{s['id']}.yaml"
            _dump(tmp / rel, s)
            entries[s["id"]] = {
                "file": rel,
                "sha256": file_sha256(tmp / rel),
                "made": "imported",
                "authors": [f"{SOURCE_REPO} contributors (task)", "callbench import tau2 (conversion)"],
                "source": {
                    "benchmark": SOURCE_REPO,
                    "commit": SOURCE_COMMIT,
                    "domain": domain,
                    "task_id": s["title"].rsplit(" ", 1)[-1],
                    "licence": "MIT",
                },
                "review": {"status": "unreviewed", "notes": "Converted mechanically; see docs/peers.md."},
            }
        _dump(tmp / "provenance.yaml", {"scenarios": entries})
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    hard = sum(s["difficulty"] == "hard" for s in scenarios)
    return ImportSummary(
        out=out, scenarios=len(scenarios), hard=hard, medium=len(scenarios) - hard, lookups=notes
    )
