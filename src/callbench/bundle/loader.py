"""Load a bundle folder into typed objects and hash the content (rendering: :mod:`callbench.bundle.render`).

Layout (DESIGN.md "Bundle on disk")::

    bundle.yaml                                  name, version, description
    agents/<agent_id>/agent.yaml                 AgentConfig
    agents/<agent_id>/prompt.md                  operating document (jinja2 template)
    agents/<agent_id>/scenarios/<scenario>.yaml  Scenario

Every file may be ``.yaml``, ``.yml`` or ``.json``. YAML is read with ``yaml.safe_load`` only.
Loading collects :class:`Problem` records instead of raising, so every problem is reported at
once. Loading runs no audit: :func:`callbench.bundle.validate.audits.load_bundle` (re-exported as
``callbench.bundle.load_bundle``) loads, runs every audit and raises :class:`BundleError` carrying
all the problems when the bundle is unusable. This module imports nothing of the validator, which
sits above it.
"""

from __future__ import annotations

import errno
import hashlib
import json
import unicodedata
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from callbench.bundle.models import AgentConfig, Bundle, BundleMeta, LoadedAgent, Scenario
from callbench.bundle.normalize import is_nfc
from callbench.bundle.state.store import tables_sha256
from callbench.bundle.yaml_data import load_yaml

MAX_FILE_BYTES = 2_000_000
"""Largest bundle file read (bytes); larger files are a ``size.file`` problem, never read whole."""
MAX_PROMPT_CHARS = 200_000
"""Longest operating document accepted (characters, after rendering)."""
MAX_FILES = 5_000
"""Most agent folders plus scenario files read from one bundle (``size.files``)."""
MAX_TOTAL_BYTES = 100_000_000
"""Most bytes read from one bundle over all files (``size.bundle``)."""
MAX_NODES = 1_000_000
"""Most values in one data file, counting every use of a YAML alias (``size.expansion``)."""
MAX_DEPTH = 64
"""Deepest nesting of lists and objects in one data file (``size.depth``)."""
DATA_SUFFIXES = (".yaml", ".yml", ".json")


def _is_json_data(obj: Any) -> bool:
    """True when :func:`json_data_problem` finds no problem: the same checks (every value counted,
    depth, key and value types) without building the dotted path of every value, which only a
    problem's message needs (a third of the check's time)."""
    nodes = 0
    stack: list[tuple[Any, int]] = [(obj, 0)]
    while stack:
        v, depth = stack.pop()
        nodes += 1
        if depth > MAX_DEPTH:
            return False
        if isinstance(v, dict):
            for k in v:
                if not isinstance(k, str):
                    return False
            children: Any = v.values()
        elif isinstance(v, list):
            children = v
        elif v is None or isinstance(v, str | int | float):
            continue
        else:
            return False
        inner = depth + 1
        for x in children:
            if x.__class__ is str:  # a string leaf: counted here, not stacked
                nodes += 1
                if inner > MAX_DEPTH:
                    return False
            else:
                stack.append((x, inner))
        if nodes > MAX_NODES:
            return False
    return nodes <= MAX_NODES


def json_data_problem(obj: Any) -> tuple[str, str] | None:
    """Check that ``obj`` is JSON data within the size limits; returns (code, message) or None.

    JSON data: dict with string keys, list, str, int, float, bool, None. Counts every value
    reached (a YAML alias counts each time it is used, which stops "billion laughs" expansion) and
    the nesting depth, iteratively (no recursion). Codes: ``parse`` (not JSON data),
    ``size.expansion`` (over :data:`MAX_NODES`), ``size.depth`` (over :data:`MAX_DEPTH`).
    The walk that finds where a problem is runs only when :func:`_is_json_data` finds one.
    """
    return None if _is_json_data(obj) else _json_data_walk(obj)


def _json_data_walk(obj: Any) -> tuple[str, str] | None:
    """:func:`json_data_problem`'s walk, with the dotted path of every value for the message."""
    stack: list[tuple[Any, int, str]] = [(obj, 0, "")]
    nodes = 0
    while stack:
        v, depth, where = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            return "size.expansion", f"more than {MAX_NODES} values (each use of a YAML alias counts)"
        if depth > MAX_DEPTH:
            return "size.depth", f"nested deeper than {MAX_DEPTH} levels at {where or 'the top'}"
        if isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(k, str):
                    at = where or "the top"
                    return "parse", f"key {k!r} at {at} is a {type(k).__name__}, not a string; quote it"
                stack.append((x, depth + 1, f"{where}.{k}".strip(".")))
        elif isinstance(v, list):
            stack.extend((x, depth + 1, f"{where}.{i}".strip(".")) for i, x in enumerate(v))
        elif not (v is None or isinstance(v, str | int | float)):
            at = where or "the top"
            return "parse", f"value at {at} is a {type(v).__name__}, not JSON data; quote it"
    return None


class _Budget:
    """Running total of bytes read from one bundle (:data:`MAX_TOTAL_BYTES`)."""

    def __init__(self) -> None:
        self.used = 0
        self.exceeded = False

    def take(self, n: int) -> bool:
        self.used += n
        if self.used > MAX_TOTAL_BYTES:
            self.exceeded = True
        return not self.exceeded


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


def read_data_file(root: Path, path: Path, problems: list[Problem], budget: _Budget | None = None) -> Any:
    """Read one YAML/JSON file under ``root`` safely; on failure append a problem and return None.

    YAML is read with a safe loader only (no tags beyond the YAML core schema; timestamps stay
    strings). The result must be JSON data within :data:`MAX_NODES` / :data:`MAX_DEPTH`
    (see :func:`json_data_problem`). Codes: ``path.escape``, ``size.file``, ``size.bundle``,
    ``read``, ``parse``, ``empty`` (no data: an empty file, only comments, or ``null``),
    ``size.expansion``, ``size.depth``.
    """
    rel = _rel(root, path)
    try:
        real = path.resolve()
        if not real.is_relative_to(root.resolve()):
            problems.append(Problem(file=rel, code="path.escape",
                                    message="file resolves outside the bundle folder"))
            return None
        size = real.stat().st_size
        if size > MAX_FILE_BYTES:
            problems.append(Problem(file=rel, code="size.file",
                                    message=f"{size} bytes is over the {MAX_FILE_BYTES}-byte limit"))
            return None
        if budget is not None and not budget.take(size):
            problems.append(Problem(file=rel, code="size.bundle",
                                    message=f"the bundle is over {MAX_TOTAL_BYTES} bytes in all; not read"))
            return None
        text = real.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        problems.append(Problem(file=rel, code="read",
                                message=f"not UTF-8 text: {e.reason} at byte {e.start}"))
        return None
    except (OSError, RuntimeError) as e:  # RuntimeError: symlink loop (Python 3.11 pathlib)
        why = getattr(e, "strerror", None) or e
        problems.append(Problem(file=rel, code="read", message=f"cannot read: {why}"))
        return None
    try:
        # load_yaml: yaml.load with YAML_LOADER, a SafeLoader subclass (a safe load), made faster
        data = json.loads(text) if path.suffix == ".json" else load_yaml(text)
    except json.JSONDecodeError as e:
        problems.append(Problem(file=rel, code="parse", message=f"invalid JSON at line {e.lineno}: {e.msg}"))
        return None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = getattr(e, "problem", e)
        problems.append(Problem(file=rel, code="parse", message=f"invalid YAML{at}: {what}"))
        return None
    except RecursionError:
        problems.append(Problem(file=rel, code="parse", message="nesting too deep"))
        return None
    except (ValueError, OverflowError) as e:  # e.g. an impossible date or an integer over 4300 digits
        problems.append(Problem(file=rel, code="parse", message=f"invalid value: {str(e)[:300]}"))
        return None
    if data is None:
        problems.append(
            Problem(file=rel, code="empty", message="the file holds no data (empty, only comments, or null)")
        )
        return None
    bad = json_data_problem(data)
    if bad is not None:
        problems.append(Problem(file=rel, code=bad[0], message=bad[1]))
        return None
    return data


def _rel(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _find(
    folder: Path, stem: str, root: Path | None = None, problems: list[Problem] | None = None
) -> Path | None:
    """``folder/<stem>.yaml``, ``.yml`` or ``.json``, in that order of preference. When several
    exist, the others are reported (``read``: not loaded) to ``problems``."""
    found = [folder / f"{stem}{suf}" for suf in DATA_SUFFIXES if (folder / f"{stem}{suf}").exists()]
    if len(found) > 1 and root is not None and problems is not None:
        for extra in found[1:]:
            message = f"{found[0].name} is also here; this file is not loaded (keep one)"
            problems.append(Problem(file=_rel(root, extra), code="read", message=message))
    return found[0] if found else None


def canonical(obj: Any) -> str:
    """Canonical JSON for hashing: sorted keys, no whitespace, NFC strings, UTF-8."""
    fast = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # When the whole text is NFC, every string in it is (a JSON quote never composes with its
    # neighbours), so normalising each string first would change nothing: same text, same hash.
    if is_nfc(fast):
        return fast

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


def _list_dir(root: Path, folder: Path, problems: list[Problem]) -> list[Path]:
    """Sorted entries of ``folder`` (empty when it is not a folder); a listing error is a problem."""
    try:
        if not folder.is_dir():
            return []
        return sorted(folder.iterdir())
    except (OSError, RuntimeError) as e:
        problems.append(Problem(file=_rel(root, folder), code="read", message=f"cannot list: {e}"))
        return []


def _read_prompt(root: Path, agent_file: Path, prompt_path: Path, name: str, budget: _Budget,
                 problems: list[Problem]) -> str:
    """Read the instructions template; problems: ``path.escape``, ``missing``, ``size.*``, ``read``."""
    afile = _rel(root, agent_file)
    try:
        if not prompt_path.resolve().is_relative_to(root.resolve()):
            problems.append(Problem(file=afile, path="instructions_file", code="path.escape",
                                    message=f"{name!r} points outside the bundle folder"))
            return ""
        if not prompt_path.is_file():
            problems.append(Problem(file=afile, path="instructions_file", code="missing",
                                    message=f"instructions file {name!r} not found"))
            return ""
        size = prompt_path.stat().st_size
        if size > MAX_FILE_BYTES:
            problems.append(Problem(file=_rel(root, prompt_path), code="size.file",
                                    message=f"{size} bytes is over the {MAX_FILE_BYTES}-byte limit"))
            return ""
        if not budget.take(size):
            problems.append(Problem(file=_rel(root, prompt_path), code="size.bundle",
                                    message=f"the bundle is over {MAX_TOTAL_BYTES} bytes in all; not read"))
            return ""
        return prompt_path.read_text(encoding="utf-8")
    except (OSError, RuntimeError, UnicodeDecodeError, ValueError) as e:
        problems.append(Problem(file=_rel(root, prompt_path), code="read", message=str(e)[:300]))
        return ""


def _read_state(root: Path, agent_file: Path, cfg: AgentConfig, budget: _Budget,
                problems: list[Problem]) -> tuple[dict[str, Any] | None, str | None]:
    """The agent's state tables (``state.tables``: table -> data file relative to the agent folder),
    each a JSON/YAML object of records by key, and their SHA-256 (part of the content hash).
    Code ``state.table`` for a table file that is not an object of objects; the reader's codes
    otherwise. (None, None) when the agent has no state or a table did not load."""
    if cfg.state is None:
        return None, None
    tables: dict[str, Any] = {}
    ok = True
    for name, rel in cfg.state.tables.items():
        data = read_data_file(root, agent_file.parent / rel, problems, budget)
        if data is None:
            ok = False
        elif not isinstance(data, dict) or not all(isinstance(r, dict) for r in data.values()):
            problems.append(Problem(
                file=_rel(root, agent_file), path=f"state.tables.{name}", code="state.table",
                message=f"{rel} must be an object mapping each record key to a record object"))
            ok = False
        else:
            tables[name] = data
    return (tables, tables_sha256(tables)) if ok else (None, None)


def load_bundle_collect(path: str | Path) -> tuple[Bundle | None, list[Problem]]:
    """Load a bundle, returning (bundle or None, problems). Never raises on bad content.

    Schema problems drop only the offending file; the rest still loads so the validator can report
    everything at once (scenario files of an agent whose ``agent.yaml`` is broken are still read and
    checked, then dropped). Returns None for the bundle when ``bundle.yaml`` itself is unusable.
    Raises ``FileNotFoundError`` when ``path`` is not a folder.
    """
    root = Path(path)
    problems: list[Problem] = []
    if not root.is_dir():
        raise FileNotFoundError(errno.ENOENT if not root.exists() else errno.ENOTDIR,
                                "not a bundle folder (one holding bundle.yaml)", str(root))
    budget = _Budget()
    meta_path = _find(root, "bundle", root, problems)
    if meta_path is None:
        return None, [Problem(file="bundle.yaml", code="missing",
                              message="no bundle.yaml (or bundle.json) at the root")]
    raw_meta = read_data_file(root, meta_path, problems, budget)
    meta = None
    try:
        meta = BundleMeta.model_validate(raw_meta)
    except ValidationError as e:
        if raw_meta is not None:
            problems.extend(pydantic_problems(_rel(root, meta_path), e))
    hashed: dict[str, Any] = {"bundle": raw_meta, "agents": {}}
    agents: dict[str, LoadedAgent] = {}
    agents_dir = root / "agents"
    folders = [p for p in _list_dir(root, agents_dir, problems) if p.is_dir()]
    if not folders:
        problems.append(Problem(file="agents", code="missing", message="no agent folders under agents/"))
    n_files = 0
    for folder in folders:
        n_files += 1
        if n_files > MAX_FILES:
            problems.append(Problem(file=_rel(root, folder), code="size.files",
                                    message=f"more than {MAX_FILES} files"))
            break
        agent_file = _find(folder, "agent", root, problems)
        if agent_file is None:
            problems.append(Problem(file=_rel(root, folder), code="missing",
                                    message="no agent.yaml in this agent folder"))
            continue
        raw = read_data_file(root, agent_file, problems, budget)
        cfg: AgentConfig | None = None
        if raw is not None:
            try:
                cfg = AgentConfig.model_validate(raw)
            except ValidationError as e:
                problems.extend(pydantic_problems(_rel(root, agent_file), e))
        if cfg is not None and cfg.id != folder.name:
            problems.append(
                Problem(file=_rel(root, agent_file), path="id", code="ref.agent_folder",
                        message=f"agent id {cfg.id!r} differs from its folder name {folder.name!r}")
            )
        template = ""
        if cfg is not None:
            template = _read_prompt(root, agent_file, folder / cfg.instructions_file, cfg.instructions_file,
                                    budget, problems)
        scenarios: list[Scenario] = []
        raw_scens: dict[str, Any] = {}
        scen_dir = folder / "scenarios"
        if scen_dir.exists() and not scen_dir.is_dir():
            problems.append(Problem(file=_rel(root, scen_dir), code="read",
                                    message="scenarios must be a folder of scenario files"))
        scen_files = [p for p in _list_dir(root, scen_dir, problems) if p.suffix in DATA_SUFFIXES]
        stems: dict[str, Path] = {}
        for sf in scen_files:
            if sf.stem in stems:
                problems.append(Problem(
                    file=_rel(root, sf), code="scenario.duplicate_id",
                    message=f"{sf.name} and {stems[sf.stem].name} both define scenario {sf.stem!r}; "
                    "keep one (this one is not loaded)"))
                continue
            stems[sf.stem] = sf
            n_files += 1
            if n_files > MAX_FILES:
                problems.append(Problem(file=_rel(root, sf), code="size.files",
                                        message=f"more than {MAX_FILES} files"))
                break
            sraw = read_data_file(root, sf, problems, budget)
            if sraw is None:
                continue
            try:
                scen = Scenario.model_validate(sraw)
            except ValidationError as e:
                problems.extend(pydantic_problems(_rel(root, sf), e))
                continue
            if scen.id != sf.stem:
                problems.append(Problem(
                    file=_rel(root, sf), path="id", code="ref.scenario_file",
                    message=f"scenario id {scen.id!r} differs from its file name {sf.stem!r}"))
            scenarios.append(scen)
            raw_scens[scen.id] = sraw
        if cfg is None:
            continue
        scenarios.sort(key=lambda s: s.id)
        tables, tables_hash = _read_state(root, agent_file, cfg, budget, problems)
        agents[cfg.id] = LoadedAgent(config=cfg, instructions_template=template, scenarios=scenarios,
                                     state_tables=tables, state_sha256=tables_hash)
        hashed["agents"][cfg.id] = {"agent": raw, "instructions": template, "scenarios": raw_scens}
        if tables_hash is not None:
            hashed["agents"][cfg.id]["state_sha256"] = tables_hash
    if meta is None:
        return None, problems
    content_hash = sha256_text(canonical(hashed))
    bundle = Bundle(meta=meta, agents=agents, content_hash=content_hash, root=str(root.resolve()))
    return bundle, problems
