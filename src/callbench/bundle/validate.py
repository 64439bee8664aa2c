"""Static audits of a bundle: every problem at once, before a single model call is paid for.

Issue 2 item 5 and the paper ("Validation runs before any scoring. References must resolve, matcher
types must agree with the tool schemas, excerpts must match the prompt hash, and call-ending tools
must declare success conditions."). Each finding is a :class:`~callbench.bundle.loader.Problem`
(``file`` relative to the bundle root, dotted field ``path`` with list indices, stable ``code``,
plain ``message``). Codes are stable: tools and CI may match on them.

Loading (:mod:`callbench.bundle.loader`)
    ``missing`` a required file or folder is absent · ``read`` a file or folder cannot be read or
    is not UTF-8 · ``parse`` invalid YAML/JSON, or data that is not JSON (a non-string key, a YAML
    tag such as ``!!binary``, an impossible value) · ``schema`` a field fails the typed model
    (includes matchers RE2 cannot compile: the message says "RE2 cannot compile") ·
    ``size.file`` / ``size.files`` / ``size.bundle`` / ``size.expansion`` / ``size.depth`` size
    limits · ``path.escape`` a file, symlink or ``instructions_file`` resolves outside the bundle ·
    ``ref.agent_folder`` agent id differs from its folder · ``ref.scenario_file`` scenario id
    differs from its file name.
Bundle
    ``size.agents`` / ``size.scenarios`` more than :data:`MAX_AGENTS` / :data:`MAX_SCENARIOS` ·
    ``scenario.duplicate_id`` a scenario id used twice in the bundle.
Agent (``agents/<id>/agent.yaml``, ``prompt.md``)
    ``tool.duplicate`` · ``tool.schema_invalid`` · ``tool.schema_not_object`` ·
    ``tool.schema_remote_ref`` · ``tool.required_unknown`` · ``ending.undeclared`` ·
    ``ending.no_success`` · ``ending.duplicate`` · ``language.tag`` · ``prompt.hash_mismatch`` ·
    ``prompt.empty`` · ``prompt.render`` · ``size.prompt``
    (see :mod:`callbench.bundle.validate_tools`, :mod:`callbench.bundle.validate_content`).
Scenario (``agents/<id>/scenarios/<scenario>.yaml``)
    ``ref.agent`` ``agent`` is not the agent owning the folder · ``ref.check_tool`` /
    ``ref.fixture_tool`` a check or fixture names a tool the agent lacks · ``ref.after`` an
    ``after`` id that is no check of the scenario · ``ref.after_cycle`` checks ordered in a cycle ·
    ``ref.unresolved`` a ``${caller.x}``/``${state.x}`` reference that does not resolve (fixtures,
    check arguments, the agent's ``default_response``) · ``ref.misplaced`` a reference where none
    resolves · ``check.count_bounds`` count min above max · ``id.duplicate`` a check or criterion id
    used twice in one scenario (they share the grade's item namespace) · ``plan.duplicate_step`` ·
    ``channel.turn_or_step`` an ASR event or VAD split without exactly one of ``turn``/``step`` ·
    ``channel.step`` a ``step`` that names no plan step · ``channel.replacement`` a substitute
    without replacement, or a replacement on drop/double · ``channel.anchor`` an empty VAD anchor ·
    ``matcher.type`` / ``matcher.enum`` / ``matcher.param_unknown`` matchers that disagree with the
    tool's JSON Schema · ``brief.datetime`` · ``prompt.render`` · ``excerpt.not_verbatim`` ·
    ``language.tag`` / ``language.agent`` / ``language.brief_mismatch`` · ``isolation.leak`` ·
    ``reference.unknown_tool`` / ``reference.args_invalid`` / ``reference.length`` /
    ``reference.after_end`` / ``reference.check_unmet`` (see
    :mod:`callbench.bundle.validate_replay`).
Any
    ``internal`` an audit itself failed on this input (a bug in callbench: please report it); the
    other audits still run.
"""

from __future__ import annotations

import errno
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from callbench.bundle.loader import DATA_SUFFIXES, MAX_FILES, Problem, load_bundle_collect, read_data_file
from callbench.bundle.matchers import Matcher
from callbench.bundle.models import AsrEvent, Bundle, LoadedAgent, Scenario, VadSplit
from callbench.bundle.references import REF, ReferenceError_, find_references, resolve
from callbench.bundle.validate_content import (
    audit_isolation,
    audit_languages,
    audit_prompt,
    audit_rendered,
    bcp47_ok,
)
from callbench.bundle.validate_replay import audit_reference_path, audit_reference_refs
from callbench.bundle.validate_tools import (
    Report,
    SchemaView,
    arguments_schema,
    audit_fields,
    audit_tool_schemas,
    schema_usable,
)

MAX_AGENTS = 1_000
"""Most agents in one bundle (``size.agents``)."""
MAX_SCENARIOS = 5_000
"""Most scenarios in one bundle (``size.scenarios``). Tools per agent are capped at 64 by the model."""

_MATCHER: TypeAdapter[Any] = TypeAdapter(Matcher)

PROBLEM_CODES: frozenset[str] = frozenset({
    # loading
    "missing", "read", "parse", "schema", "size.file", "size.files", "size.bundle", "size.expansion",
    "size.depth", "path.escape", "ref.agent_folder", "ref.scenario_file",
    # bundle
    "size.agents", "size.scenarios", "scenario.duplicate_id",
    # agent
    "tool.duplicate", "tool.schema_invalid", "tool.schema_not_object", "tool.schema_remote_ref",
    "tool.required_unknown", "ending.undeclared", "ending.no_success", "ending.duplicate", "language.tag",
    "prompt.hash_mismatch", "prompt.empty", "prompt.render", "size.prompt",
    # scenario
    "ref.agent", "ref.check_tool", "ref.fixture_tool", "ref.after", "ref.after_cycle", "ref.unresolved",
    "ref.misplaced", "check.count_bounds", "id.duplicate", "plan.duplicate_step", "channel.turn_or_step",
    "channel.step", "channel.replacement", "channel.anchor", "matcher.type", "matcher.enum",
    "matcher.param_unknown", "brief.datetime", "excerpt.not_verbatim", "language.agent",
    "language.brief_mismatch", "isolation.leak", "reference.unknown_tool", "reference.args_invalid",
    "reference.length", "reference.after_end", "reference.check_unmet",
    # a bug in an audit (reported, never raised)
    "internal",
})
"""Every problem code the loader and validator emit (documented in this module's docstring)."""


def validate_path(path: str | Path) -> tuple[Bundle | None, list[Problem]]:
    """Load the bundle at ``path`` and run every audit; returns (bundle or None, all problems).

    ``path`` may be the bundle folder or its ``bundle.yaml``/``bundle.json``. Never raises on bad
    content; raises ``FileNotFoundError`` when ``path`` is not a folder, or another ``OSError``
    when it cannot be listed (the CLI's exit code 2).
    """
    root = Path(path)
    if root.is_file() and root.stem == "bundle" and root.suffix in DATA_SUFFIXES:
        root = root.parent
    if not root.exists():
        raise FileNotFoundError(errno.ENOENT, "no such folder", str(root))
    if not root.is_dir():  # FileNotFoundError (errno ENOTDIR), as load_bundle_collect documents
        raise FileNotFoundError(errno.ENOTDIR, "not a folder", str(root))
    next(root.iterdir(), None)  # raises PermissionError now when the folder cannot be listed
    bundle, problems = load_bundle_collect(root)
    problems = problems + _guard("symlinks", "", lambda: audit_symlinks(root))
    if bundle is not None:
        problems += validate_loaded(bundle)
    return bundle, dedupe(problems)


class Outcome(BaseModel):
    """Result of :func:`validate_safely`: whether the path could be read, the bundle (None when
    unusable) and every problem. ``exit_code``: 0 clean, 1 problems, 2 unreadable path."""

    readable: bool
    bundle: Bundle | None = None
    problems: list[Problem] = Field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 2 if not self.readable else (1 if self.problems else 0)


def validate_safely(path: str | Path) -> Outcome:
    """:func:`validate_path` that never raises: an unreadable path gives ``readable=False`` with a
    ``read`` problem; any unexpected failure is an ``internal`` problem (the CLI's boundary)."""
    try:
        bundle, problems = validate_path(path)
    except OSError as e:
        why = getattr(e, "strerror", None) or str(e)
        problem = Problem(file=str(path), code="read", message=f"cannot read: {why}")
        return Outcome(readable=False, problems=[problem])
    except Exception as e:  # never a traceback, whatever the input
        problem = Problem(file=str(path), code="internal",
                          message=f"validation failed: {type(e).__name__}: {str(e)[:300]}")
        return Outcome(readable=True, problems=[problem])
    return Outcome(readable=True, bundle=bundle, problems=problems)


def dedupe(problems: list[Problem]) -> list[Problem]:
    """Drop repeated problems and order them by file, keeping discovery order within a file."""
    seen: set[tuple[str, str, str, str]] = set()
    out = []
    for p in problems:
        key = (p.file, p.path, p.code, p.message)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return sorted(out, key=lambda p: p.file)


def _guard(what: str, file: str, fn: Callable[[], list[Problem]]) -> list[Problem]:
    """Run one audit; an unexpected exception becomes an ``internal`` problem, not a traceback."""
    try:
        return fn()
    except Exception as e:  # the validator must never crash on input, whatever the bug
        return [Problem(file=file or ".", code="internal",
                        message=f"the {what} audit failed: {type(e).__name__}: {str(e)[:300]}")]


def audit_symlinks(root: Path) -> list[Problem]:
    """Code ``path.escape`` for every symlink under ``root`` that resolves outside it (the loader
    reports the files it reads; this catches the rest). Stops after ``MAX_FILES`` entries."""
    out: list[Problem] = []
    real_root = root.resolve()
    stack, n = [root], 0
    while stack and n < MAX_FILES:
        folder = stack.pop()
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue
        for e in entries:
            n += 1
            rel = e.relative_to(root).as_posix()
            if e.is_symlink():
                try:
                    escapes = not e.resolve().is_relative_to(real_root)
                except (OSError, RuntimeError):
                    out.append(Problem(file=rel, code="path.escape", message="symlink loop"))
                    continue
                if escapes:
                    out.append(Problem(file=rel, code="path.escape",
                                       message="symlink points outside the bundle folder"))
            elif e.is_dir():
                stack.append(e)
    return out


class _Files:
    """Bundle-relative file names of agents and scenarios, for problem reports."""

    def __init__(self, bundle: Bundle) -> None:
        self.root = Path(bundle.root)
        self._folders: dict[str, Path] = {}
        self._scen: dict[tuple[str, str], str] = {}
        agents_dir = self.root / "agents"
        for aid in bundle.agents:
            if (agents_dir / aid).is_dir():
                self._folders[aid] = agents_dir / aid
        missing = [a for a in bundle.agents if a not in self._folders]
        if missing and agents_dir.is_dir():
            for folder in sorted(p for p in agents_dir.iterdir() if p.is_dir()):
                peek = self._peek_id(folder, "agent")
                if peek is not None and peek in missing and peek not in self._folders:
                    self._folders[peek] = folder

    def _peek_id(self, folder: Path, stem: str) -> str | None:
        for suf in DATA_SUFFIXES:
            f = folder / f"{stem}{suf}"
            if f.is_file():
                raw = read_data_file(self.root, f, [])
                return str(raw.get("id")) if isinstance(raw, dict) else None
        return None

    def folder(self, aid: str) -> str:
        f = self._folders.get(aid)
        return f.relative_to(self.root).as_posix() if f else f"agents/{aid}"

    def agent(self, a: LoadedAgent) -> str:
        folder = self._folders.get(a.config.id)
        if folder is not None:
            for suf in DATA_SUFFIXES:
                if (folder / f"agent{suf}").is_file():
                    return f"{self.folder(a.config.id)}/agent{suf}"
        return f"{self.folder(a.config.id)}/agent.yaml"

    def prompt(self, a: LoadedAgent) -> str:
        return f"{self.folder(a.config.id)}/{a.config.instructions_file}"

    def scenario(self, a: LoadedAgent, s: Scenario) -> str:
        key = (a.config.id, s.id)
        if key not in self._scen:
            self._index(a)
        return self._scen.get(key, f"{self.folder(a.config.id)}/scenarios/{s.id}.yaml")

    def _index(self, a: LoadedAgent) -> None:
        folder = self._folders.get(a.config.id)
        if folder is None or not (folder / "scenarios").is_dir():
            return
        files = sorted(p for p in (folder / "scenarios").iterdir() if p.suffix in DATA_SUFFIXES)
        ids = {s.id for s in a.scenarios}
        for f in files:
            rel = f.relative_to(self.root).as_posix()
            sid: str | None = f.stem if f.stem in ids else None
            if sid is None:
                raw = read_data_file(self.root, f, [])
                sid = str(raw.get("id")) if isinstance(raw, dict) else None
            if sid is not None:
                self._scen.setdefault((a.config.id, sid), rel)


def _reporter(out: list[Problem], file: str) -> Report:
    def report(path: str, code: str, message: str) -> None:
        out.append(Problem(file=file, path=path, code=code, message=message))

    return report


def validate_loaded(bundle: Bundle) -> list[Problem]:
    """Run every audit over a loaded bundle and return all problems found (see the module
    docstring for the codes). Never raises: an audit that fails is an ``internal`` problem."""
    files = _Files(bundle)
    out: list[Problem] = []
    bfile = next((f"bundle{x}" for x in DATA_SUFFIXES if (files.root / f"bundle{x}").is_file()),
                 "bundle.yaml")
    pairs = bundle.scenarios()
    if len(bundle.agents) > MAX_AGENTS:
        out.append(Problem(file=bfile, code="size.agents",
                           message=f"{len(bundle.agents)} agents, over {MAX_AGENTS}"))
    if len(pairs) > MAX_SCENARIOS:
        out.append(Problem(file=bfile, code="size.scenarios",
                           message=f"{len(pairs)} scenarios, over {MAX_SCENARIOS}"))
        return out
    owners: dict[str, str] = {}
    for a, s in pairs:
        sfile = files.scenario(a, s)
        if s.id in owners:
            out.append(Problem(file=sfile, path="id", code="scenario.duplicate_id",
                               message=f"scenario id {s.id!r} is also used by {owners[s.id]}"))
        else:
            owners[s.id] = sfile
    for aid, agent in sorted(bundle.agents.items()):
        afile, pfile = files.agent(agent), files.prompt(agent)
        found: list[Problem] = []
        prompt_ok = False
        try:
            prompt_ok = _agent_audits(agent, _reporter(found, afile), _reporter(found, pfile))
        except Exception as e:  # never a traceback on input; see _guard
            found.append(Problem(file=afile, code="internal",
                                 message=f"the agent {aid} audit failed: {type(e).__name__}: {str(e)[:300]}"))
        out += found
        sizes: set[str] = set()
        for s in agent.scenarios:
            sfile = files.scenario(agent, s)
            out += _guard(f"scenario {s.id}", sfile, functools.partial(
                _scenario_audits, agent, s, sfile, pfile, prompt_ok, sizes))
    return out


def _agent_audits(agent: LoadedAgent, rep: Report, rep_prompt: Report) -> bool:
    """Agent-level audits; returns whether the instructions render (scenario audits need it)."""
    audit_tool_schemas(agent.config, rep)
    for i, lang in enumerate(agent.config.languages):
        if not bcp47_ok(lang):
            rep(f"languages.{i}", "language.tag", f"{lang!r} is not a well-formed BCP 47 tag (e.g. gu-IN)")
    return audit_prompt(agent, rep, rep_prompt)


def _scenario_audits(agent: LoadedAgent, s: Scenario, sfile: str, pfile: str, prompt_ok: bool,
                     sizes: set[str]) -> list[Problem]:
    found: list[Problem] = []
    rep = _reporter(found, sfile)
    audit_structure(agent, s, rep)
    audit_references(agent, s, rep)
    audit_scenario_matchers(agent, s, rep)
    audit_rendered(agent, s, rep, _reporter(found, pfile), prompt_ok, sizes)
    audit_languages(agent, s, rep)
    audit_isolation(s, rep)
    audit_reference_refs(s, rep)
    audit_reference_path(agent, s, rep)
    return found


def audit_structure(agent: LoadedAgent, s: Scenario, report: Report) -> None:
    """Ids, tool names, ``after`` order, plan steps and the channel program of one scenario."""
    cfg = agent.config
    tools = {t.name for t in cfg.tools}
    if s.agent != cfg.id:
        report("agent", "ref.agent",
               f"agent {s.agent!r} is not {cfg.id!r}, the agent whose folder holds this scenario")
    ids: dict[str, str] = {}
    items = [(f"action_checks.{i}", c.id) for i, c in enumerate(s.action_checks)]
    items += [(f"criteria.{i}", c.id) for i, c in enumerate(s.criteria)]
    for where, item_id in items:
        if item_id in ids:
            report(f"{where}.id", "id.duplicate", f"id {item_id!r} is already used by {ids[item_id]}")
        else:
            ids[item_id] = where
    for name in s.fixtures:
        if name not in tools:
            report(f"fixtures.{name}", "ref.fixture_tool",
                   f"fixtures for {name!r}, which is not a tool of {cfg.id!r}")
    check_ids = {c.id for c in s.action_checks}
    for i, c in enumerate(s.action_checks):
        if c.tool not in tools:
            report(f"action_checks.{i}.tool", "ref.check_tool",
                   f"check {c.id!r} names tool {c.tool!r}, which is not a tool of {cfg.id!r}")
        for k, dep in enumerate(c.after):
            if dep not in check_ids:
                report(f"action_checks.{i}.after.{k}", "ref.after",
                       f"{dep!r} is not an action check of this scenario")
        if c.count.max is not None and c.count.min > c.count.max:
            report(f"action_checks.{i}.count", "check.count_bounds",
                   f"count min {c.count.min} is greater than max {c.count.max}")
    for cycle_at, cycle in _after_cycles(s):
        report(f"action_checks.{cycle_at}.after", "ref.after_cycle",
               "checks ordered in a cycle: " + " -> ".join(cycle))
    steps: set[str] = set()
    for i, st in enumerate(s.brief.plan):
        if st.id in steps:
            report(f"brief.plan.{i}.id", "plan.duplicate_step", f"plan step id {st.id!r} is used twice")
        steps.add(st.id)
    events: list[tuple[str, AsrEvent | VadSplit]] = [
        *((f"channel.asr_events.{i}", e) for i, e in enumerate(s.channel.asr_events)),
        *((f"channel.vad_splits.{i}", e) for i, e in enumerate(s.channel.vad_splits)),
    ]
    for where, ev in events:
        if (ev.turn is None) == (ev.step is None):
            report(where, "channel.turn_or_step",
                   "give exactly one of turn (1-based caller turn) or step (plan step id)")
        if ev.step is not None and ev.step not in steps:
            report(f"{where}.step", "channel.step", f"{ev.step!r} is not a plan step id ({sorted(steps)})")
    for i, asr in enumerate(s.channel.asr_events):
        if asr.kind == "substitute" and not asr.replacement:
            report(f"channel.asr_events.{i}.replacement", "channel.replacement",
                   "a substitute event needs a replacement")
        elif asr.kind != "substitute" and asr.replacement is not None:
            report(f"channel.asr_events.{i}.replacement", "channel.replacement",
                   f"a {asr.kind} event takes no replacement (only substitute does)")
    for i, sp in enumerate(s.channel.vad_splits):
        for k, anchor in enumerate(sp.after):
            if not anchor.strip():
                report(f"channel.vad_splits.{i}.after.{k}", "channel.anchor",
                       "an empty VAD anchor splits nothing")


def _after_cycles(s: Scenario) -> list[tuple[int, list[str]]]:
    """Each ``after`` cycle once, as (index of the check where it was found, ids around the cycle)."""
    deps = {c.id: [d for d in c.after] for c in s.action_checks}
    index = {c.id: i for i, c in enumerate(s.action_checks)}
    state: dict[str, int] = {}
    cycles: list[tuple[int, list[str]]] = []
    for start in deps:
        if state.get(start):
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        trail: list[str] = []
        while stack:
            node, k = stack.pop()
            if k == 0:
                state[node] = 1
                trail.append(node)
            nxt = deps.get(node, [])
            if k < len(nxt):
                stack.append((node, k + 1))
                dep = nxt[k]
                if state.get(dep) == 1:
                    cyc = [*trail[trail.index(dep):], dep]
                    cycles.append((index[dep], cyc))
                elif not state.get(dep) and dep in deps:
                    stack.append((dep, 0))
            else:
                state[node] = 2
                trail.pop()
    return cycles


def audit_references(agent: LoadedAgent, s: Scenario, report: Report) -> None:
    """Code ``ref.unresolved`` for each ``${...}`` that does not resolve against the scenario's
    known facts and hidden state, in fixtures, check arguments and the agent's default responses.

    Fast path: every distinct reference in the JSON text is resolved once; only when one fails are
    the values walked to report each place it occurs.
    """
    facts, state = s.brief.known_facts, s.hidden_state
    places: list[tuple[str, Any]] = [(f"fixtures.{k}", v) for k, v in s.fixtures.items()]
    places += [(f"action_checks.{i}.args", c.args) for i, c in enumerate(s.action_checks)]
    texts = [_SCENARIO_PARTS.dump_json(v).decode("utf-8") for _, v in places]
    if not _all_resolve({m.group(0) for t in texts for m in REF.finditer(t)}, facts, state):
        for (where0, value), text in zip(places, texts, strict=True):
            if "${" not in text:
                continue
            dumped = _SCENARIO_PARTS.dump_python(value, by_alias=True)
            for where, ref in find_references(dumped, where0):
                try:
                    resolve(ref, facts, state)
                except ReferenceError_:
                    report(where, "ref.unresolved", _unresolved(ref, facts, state))
    for t in agent.config.tools:
        for where, ref in find_references(t.default_response, f"default_response of tool {t.name}"):
            try:
                resolve(ref, facts, state)
            except ReferenceError_:
                report("", "ref.unresolved", f"{where}: " + _unresolved(ref, facts, state))


_SCENARIO_PARTS: TypeAdapter[Any] = TypeAdapter(Any)


def _all_resolve(refs: set[str], facts: dict[str, Any], state: dict[str, Any]) -> bool:
    for ref in refs:
        try:
            resolve(ref, facts, state)
        except ReferenceError_:
            return False
    return True


def _unresolved(ref: str, facts: dict[str, Any], state: dict[str, Any]) -> str:
    src = "known facts" if ref.startswith("${caller.") else "hidden state"
    keys = sorted(facts if src == "known facts" else state)
    return f"{ref} does not resolve: no such path in the caller's {src} (top-level keys: {keys[:12]})"


def audit_scenario_matchers(agent: LoadedAgent, s: Scenario, report: Report) -> None:
    """Matchers of fixtures and action checks (references resolved) against each tool's schema;
    codes ``matcher.type``, ``matcher.enum``, ``matcher.param_unknown``."""
    tools = {t.name: t for t in agent.config.tools}
    facts, state = s.brief.known_facts, s.hidden_state
    groups: list[tuple[str, str, dict[str, Any]]] = []
    for name, fx in s.fixtures.items():
        groups += [(name, f"fixtures.{name}.queue.{i}.args", e.args) for i, e in enumerate(fx.queue)]
    groups += [(c.tool, f"action_checks.{i}.args", c.args) for i, c in enumerate(s.action_checks)]
    for tool_name, where, matchers in groups:
        tool = tools.get(tool_name)
        if tool is None:
            continue
        schema = _usable_schema(tool, agent.config)
        if schema is None:
            continue
        resolved: dict[str, Any] = {}
        for k, m in matchers.items():
            if not _mentions_ref(m):
                resolved[k] = m
                continue
            try:
                resolved[k] = _MATCHER.validate_python(resolve(m, facts, state))
            except (ReferenceError_, ValidationError):
                continue  # reported as ref.unresolved
        audit_fields(resolved, SchemaView(schema, schema), where, report)


def _mentions_ref(m: Any) -> bool:
    """Whether a typed matcher holds a ``${...}`` reference anywhere (a fast JSON dump in
    pydantic-core; much cheaper than resolving every matcher)."""
    return b"${" in _MATCHER.dump_json(m)


_SCHEMA_CACHE: dict[int, tuple[Any, Any, dict[str, Any] | None]] = {}


def _usable_schema(tool: Any, config: Any) -> dict[str, Any] | None:
    """The tool's arguments schema when usable (see ``schema_usable``), cached per tool object
    (checked by identity, so a reused ``id`` never returns a stale entry)."""
    hit = _SCHEMA_CACHE.get(id(tool))
    if hit is not None and hit[0] is tool and hit[1] is config:
        return hit[2]
    schema = arguments_schema(tool, config)
    result = schema if schema_usable(schema) else None
    if len(_SCHEMA_CACHE) > 4096:
        _SCHEMA_CACHE.clear()
    _SCHEMA_CACHE[id(tool)] = (tool, config, result)
    return result
