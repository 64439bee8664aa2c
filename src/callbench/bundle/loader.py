"""Load a bundle folder into typed objects, render instructions, and hash the content.

Layout (DESIGN.md "Bundle on disk")::

    bundle.yaml                                  name, version, description
    agents/<agent_id>/agent.yaml                 AgentConfig
    agents/<agent_id>/prompt.md                  operating document (jinja2 template)
    agents/<agent_id>/scenarios/<scenario>.yaml  Scenario

Every file may be ``.yaml``, ``.yml`` or ``.json``. YAML is read with ``yaml.safe_load`` only.
Loading collects :class:`Problem` records instead of raising, so every problem is reported at
once; :func:`load_bundle` raises :class:`BundleError` carrying them all when the bundle is unusable.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment
from pydantic import BaseModel, ValidationError

from callbench.bundle.models import AgentConfig, Bundle, BundleMeta, LoadedAgent, Scenario

MAX_FILE_BYTES = 2_000_000
"""Largest bundle file read (bytes); larger files are a ``size.file`` problem, never read whole."""
MAX_PROMPT_CHARS = 200_000
"""Longest operating document accepted (characters, after rendering)."""
MAX_FILES = 5_000
DATA_SUFFIXES = (".yaml", ".yml", ".json")


class Problem(BaseModel):
    """One validation finding: ``file`` (relative to the bundle root), ``path`` (dotted field path,
    e.g. ``fixtures.log_zero_supply_reason.queue.0.args.category``), stable ``code``, ``message``."""

    file: str
    path: str = ""
    code: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.path}" if self.path else self.file
        return f"{where}: [{self.code}] {self.message}"


class BundleError(Exception):
    """Raised when a bundle cannot be loaded; ``problems`` lists every finding."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems[:20]))


def _loc(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(x) for x in loc)


def pydantic_problems(file: str, err: ValidationError, prefix: str = "") -> list[Problem]:
    """Turn a pydantic ValidationError into problems with dotted field paths."""
    out = []
    for e in err.errors(include_url=False):
        loc = _loc(tuple(x for x in e["loc"] if not (isinstance(x, str) and x.startswith("function-"))))
        path = f"{prefix}.{loc}".strip(".") if prefix else loc
        out.append(Problem(file=file, path=path, code="schema", message=str(e["msg"])[:500]))
    return out


def read_data_file(root: Path, path: Path, problems: list[Problem]) -> Any:
    """Read one YAML/JSON file under ``root`` safely; on failure append a problem and return None."""
    rel = _rel(root, path)
    try:
        real = path.resolve()
        if not real.is_relative_to(root.resolve()):
            problems.append(Problem(file=rel, code="path.escape", message="file resolves outside the bundle folder"))
            return None
        size = real.stat().st_size
        if size > MAX_FILE_BYTES:
            problems.append(
                Problem(file=rel, code="size.file", message=f"{size} bytes is over the {MAX_FILE_BYTES}-byte limit")
            )
            return None
        text = real.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        problems.append(Problem(file=rel, code="read", message=f"not UTF-8 text: {e.reason} at byte {e.start}"))
        return None
    except OSError as e:
        problems.append(Problem(file=rel, code="read", message=f"cannot read: {e.strerror or e}"))
        return None
    try:
        if path.suffix == ".json":
            return json.loads(text)
        return yaml.safe_load(text)
    except json.JSONDecodeError as e:
        problems.append(Problem(file=rel, code="parse", message=f"invalid JSON at line {e.lineno}: {e.msg}"))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problems.append(Problem(file=rel, code="parse", message=f"invalid YAML{at}: {getattr(e, 'problem', e)}"))
    except RecursionError:
        problems.append(Problem(file=rel, code="parse", message="nesting too deep"))
    return None


def _rel(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _find(folder: Path, stem: str) -> Path | None:
    for suf in DATA_SUFFIXES:
        p = folder / f"{stem}{suf}"
        if p.exists():
            return p
    return None


def canonical(obj: Any) -> str:
    """Canonical JSON for hashing: sorted keys, no whitespace, NFC strings, UTF-8."""

    def norm(v: Any) -> Any:
        if isinstance(v, str):
            return unicodedata.normalize("NFC", v)
        if isinstance(v, dict):
            return {norm(k): norm(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [norm(x) for x in v]
        return v

    return json.dumps(norm(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_text(text: str) -> str:
    """Hex SHA-256 of UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def render_instructions(agent: LoadedAgent, scenario: Scenario | None = None) -> str:
    """Render the agent's operating document for a scenario (or with neutral defaults).

    Variables: ``date`` (YYYY-MM-DD), ``time`` (HH:MM), ``weekday`` (English name), ``agent_name``,
    then the agent's ``variables`` and the scenario's ``variables`` (scenario wins). Date and time
    come from the scenario brief's ISO 8601 ``datetime``. Raises ``ValueError`` on an undefined
    variable or template error.
    """
    when = None
    if scenario is not None:
        try:
            when = datetime.fromisoformat(scenario.brief.datetime)
        except ValueError:
            raise ValueError(f"brief.datetime {scenario.brief.datetime!r} is not ISO 8601") from None
    vars_: dict[str, str] = {
        "date": when.strftime("%Y-%m-%d") if when else "{{date}}",
        "time": when.strftime("%H:%M") if when else "{{time}}",
        "weekday": when.strftime("%A") if when else "{{weekday}}",
        "agent_name": agent.config.name,
    }
    vars_.update(agent.config.variables)
    if scenario is not None:
        vars_.update(scenario.variables)
    env = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    try:
        text = env.from_string(agent.instructions_template).render(**vars_)
    except TemplateError as e:
        raise ValueError(f"instructions template: {e}") from None
    return unicodedata.normalize("NFC", text)


def load_bundle_collect(path: str | Path) -> tuple[Bundle | None, list[Problem]]:
    """Load a bundle, returning (bundle or None, problems). Never raises on bad content.

    Schema problems drop only the offending file; the rest still loads so the validator can report
    everything at once. Returns None for the bundle when ``bundle.yaml`` itself is unusable.
    """
    root = Path(path)
    problems: list[Problem] = []
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: not a bundle folder")
    meta_path = _find(root, "bundle")
    if meta_path is None:
        return None, [Problem(file="bundle.yaml", code="missing", message="no bundle.yaml (or bundle.json) at the root")]
    raw_meta = read_data_file(root, meta_path, problems)
    meta = None
    try:
        meta = BundleMeta.model_validate(raw_meta)
    except ValidationError as e:
        if raw_meta is not None:
            problems.extend(pydantic_problems(_rel(root, meta_path), e))
    hashed: dict[str, Any] = {"bundle": raw_meta, "agents": {}}
    agents: dict[str, LoadedAgent] = {}
    agents_dir = root / "agents"
    folders = sorted(p for p in agents_dir.iterdir() if p.is_dir()) if agents_dir.is_dir() else []
    if not folders:
        problems.append(Problem(file="agents", code="missing", message="no agent folders under agents/"))
    n_files = 0
    for folder in folders:
        agent_file = _find(folder, "agent")
        if agent_file is None:
            problems.append(Problem(file=_rel(root, folder), code="missing", message="no agent.yaml in this agent folder"))
            continue
        raw = read_data_file(root, agent_file, problems)
        if raw is None:
            continue
        try:
            cfg = AgentConfig.model_validate(raw)
        except ValidationError as e:
            problems.extend(pydantic_problems(_rel(root, agent_file), e))
            continue
        if cfg.id != folder.name:
            problems.append(
                Problem(file=_rel(root, agent_file), path="id", code="ref.agent_folder",
                        message=f"agent id {cfg.id!r} differs from its folder name {folder.name!r}")
            )
        prompt_path = folder / cfg.instructions_file
        template = ""
        prompt_problems: list[Problem] = []
        if not prompt_path.resolve().is_relative_to(root.resolve()):
            prompt_problems.append(Problem(file=_rel(root, agent_file), path="instructions_file", code="path.escape",
                                           message=f"{cfg.instructions_file!r} points outside the bundle folder"))
        elif not prompt_path.is_file():
            prompt_problems.append(Problem(file=_rel(root, agent_file), path="instructions_file", code="missing",
                                           message=f"instructions file {cfg.instructions_file!r} not found"))
        else:
            size = prompt_path.stat().st_size
            if size > MAX_FILE_BYTES:
                prompt_problems.append(Problem(file=_rel(root, prompt_path), code="size.file",
                                               message=f"{size} bytes is over the {MAX_FILE_BYTES}-byte limit"))
            else:
                try:
                    template = prompt_path.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as e:
                    prompt_problems.append(Problem(file=_rel(root, prompt_path), code="read", message=str(e)[:300]))
        problems.extend(prompt_problems)
        loaded = LoadedAgent(config=cfg, instructions_template=template)
        scen_dir = folder / "scenarios"
        scen_files = sorted(p for p in scen_dir.iterdir() if p.suffix in DATA_SUFFIXES) if scen_dir.is_dir() else []
        raw_scens: dict[str, Any] = {}
        for sf in scen_files:
            n_files += 1
            if n_files > MAX_FILES:
                problems.append(Problem(file=_rel(root, sf), code="size.files", message=f"more than {MAX_FILES} files"))
                break
            sraw = read_data_file(root, sf, problems)
            if sraw is None:
                continue
            try:
                scen = Scenario.model_validate(sraw)
            except ValidationError as e:
                problems.extend(pydantic_problems(_rel(root, sf), e))
                continue
            if scen.id != sf.stem:
                problems.append(Problem(file=_rel(root, sf), path="id", code="ref.scenario_file",
                                        message=f"scenario id {scen.id!r} differs from its file name {sf.stem!r}"))
            loaded.scenarios.append(scen)
            raw_scens[scen.id] = sraw
        loaded.scenarios.sort(key=lambda s: s.id)
        agents[cfg.id] = loaded
        hashed["agents"][cfg.id] = {"agent": raw, "instructions": template, "scenarios": raw_scens}
    if meta is None:
        return None, problems
    bundle = Bundle(meta=meta, agents=agents, content_hash=sha256_text(canonical(hashed)), root=str(root.resolve()))
    return bundle, problems


def load_bundle(path: str | Path) -> Bundle:
    """Load a bundle and run every validation audit; raises :class:`BundleError` listing all
    problems when any is found, ``FileNotFoundError`` when ``path`` is not a folder."""
    from callbench.bundle.validate import validate_loaded

    bundle, problems = load_bundle_collect(path)
    if bundle is not None:
        problems = problems + validate_loaded(bundle)
    if bundle is None or problems:
        raise BundleError(problems)
    return bundle
