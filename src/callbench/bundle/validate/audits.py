"""Static audits of a bundle: every problem at once, before a single model call is paid for.

The paper ("Validation runs before any scoring. References must resolve, matcher
types must agree with the tool schemas, excerpts must match the prompt hash, and call-ending tools
must declare success conditions."). Each finding is a :class:`~callbench.bundle.loader.Problem`
(``file`` relative to the bundle root, dotted field ``path`` with list indices, stable ``code``,
plain ``message``). Codes are stable: tools and CI may match on them.

Loading (:mod:`callbench.bundle.loader`)
    ``missing`` a required file or folder is absent · ``read`` a file or folder cannot be read or
    is not UTF-8 · ``parse`` invalid YAML/JSON, or data that is not JSON (a non-string key, a YAML
    tag such as ``!!binary``, an impossible value) · ``empty`` a file with no data (empty, only
    comments, or ``null``) · ``schema`` a field fails the typed model
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
    ``tool.schema_remote_ref`` · ``tool.schema_ref_unresolved`` · ``tool.required_unknown`` ·
    ``ending.undeclared`` ·
    ``ending.no_success`` · ``ending.duplicate`` · ``language.tag`` · ``prompt.hash_mismatch`` ·
    ``prompt.empty`` · ``prompt.render`` · ``size.prompt``
    (see :mod:`callbench.bundle.validate.tools`, :mod:`callbench.bundle.validate.content`).
Scenario (``agents/<id>/scenarios/<scenario>.yaml``; :mod:`callbench.bundle.validate.refs`,
:mod:`callbench.bundle.validate.matchers`)
    ``ref.agent`` ``agent`` is not the agent owning the folder · ``ref.check_tool`` /
    ``ref.fixture_tool`` a check or fixture names a tool the agent lacks · ``ref.after`` an
    ``after`` id that is no check of the scenario · ``ref.applies_after`` an ``applies_after`` guard
    that is no check of the scenario · ``ref.after_cycle`` checks ordered in a cycle (through
    ``after`` and ``applies_after``) ·
    ``ref.unresolved`` a ``${caller.x}``/``${state.x}`` reference that does not resolve (fixtures,
    check arguments, the agent's ``default_response``) · ``ref.misplaced`` a reference where none
    resolves · ``check.count_bounds`` count min above max · ``id.duplicate`` a check or criterion id
    used twice in one scenario (they share the grade's item namespace) · ``plan.duplicate_step`` ·
    ``channel.turn_or_step`` an ASR event or VAD split without exactly one of ``turn``/``step`` ·
    ``channel.audio_file`` a voice-channel noise file that is missing or not a PCM WAV
    (:mod:`callbench.bundle.validate.audio`) · ``channel.step`` a ``step`` that names no plan step ·
    ``channel.replacement`` a substitute without replacement, or a replacement on drop/double ·
    ``channel.anchor`` an empty VAD anchor ·
    ``matcher.type`` / ``matcher.enum`` / ``matcher.param_unknown`` matchers that disagree with the
    tool's JSON Schema · ``brief.datetime`` · ``prompt.render`` · ``excerpt.not_verbatim`` ·
    ``excerpt.partial`` ·
    ``language.tag`` / ``language.agent`` / ``language.brief_mismatch`` · ``isolation.leak`` /
    ``isolation.known_fact`` / ``isolation.caller_known`` (:mod:`callbench.bundle.validate.isolation`) ·
    ``reference.unknown_tool`` / ``reference.args_invalid`` / ``reference.length`` /
    ``reference.after_end`` / ``reference.check_unmet`` / ``reference.fixture_mismatch`` /
    ``reference.fixture_default`` / ``reference.end_unmet`` / ``reference.success_after_failure`` (see
    :mod:`callbench.bundle.validate.replay`).
Provenance (``provenance.yaml`` at the root, when present; :mod:`callbench.bundle.provenance`)
    ``provenance.missing_entry`` · ``provenance.hash_mismatch`` · ``provenance.unknown_scenario`` ·
    ``provenance.file`` · ``provenance.generation``, and ``parse`` / ``schema`` for the file itself.
Any
    ``internal`` an audit itself failed on this input (a bug in callbench: please report it); the
    other audits still run.
"""

from __future__ import annotations

import errno
import functools
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from callbench.bundle.loader import (
    DATA_SUFFIXES,
    MAX_FILES,
    BundleError,
    Problem,
    load_bundle_collect,
    read_data_file,
)
from callbench.bundle.models import Bundle, LoadedAgent, Scenario
from callbench.bundle.provenance import audit_provenance, machine_written
from callbench.bundle.validate.audio import audit_audio
from callbench.bundle.validate.content import (
    audit_isolation,
    audit_languages,
    audit_prompt,
    audit_rendered,
    bcp47_ok,
)
from callbench.bundle.validate.refs import audit_references, audit_scenario_matchers, audit_structure
from callbench.bundle.validate.replay import audit_reference_path, audit_reference_refs
from callbench.bundle.validate.state import audit_state_checks, audit_state_spec
from callbench.bundle.validate.tools import Report, audit_tool_schemas

MAX_AGENTS = 1_000
"""Most agents in one bundle (``size.agents``)."""
MAX_SCENARIOS = 5_000
"""Most scenarios in one bundle (``size.scenarios``). Tools per agent are capped at 64 by the model."""

PROBLEM_CODES: frozenset[str] = frozenset({
    # loading
    "missing", "read", "parse", "empty", "schema", "size.file", "size.files", "size.bundle", "size.expansion",
    "size.depth", "path.escape", "ref.agent_folder", "ref.scenario_file",
    # bundle
    "size.agents", "size.scenarios", "scenario.duplicate_id",
    # agent
    "tool.duplicate", "tool.schema_invalid", "tool.schema_not_object", "tool.schema_remote_ref",
    "tool.schema_ref_unresolved",
    "tool.required_unknown", "ending.undeclared", "ending.no_success", "ending.duplicate", "language.tag",
    "prompt.hash_mismatch", "prompt.empty", "prompt.render", "size.prompt",
    # scenario
    "ref.agent", "ref.check_tool", "ref.fixture_tool", "ref.after", "ref.applies_after", "ref.after_cycle",
    "ref.unresolved",
    "ref.misplaced", "check.count_bounds", "id.duplicate", "plan.duplicate_step", "channel.turn_or_step",
    "channel.step", "channel.replacement", "channel.anchor", "matcher.type", "matcher.enum",
    "matcher.param_unknown", "brief.datetime", "excerpt.not_verbatim", "excerpt.partial", "language.agent",
    "language.brief_mismatch", "isolation.leak", "isolation.known_fact", "isolation.caller_known",
    "reference.unknown_tool", "reference.args_invalid",
    "reference.length", "reference.after_end", "reference.check_unmet", "reference.fixture_mismatch",
    "reference.fixture_default", "reference.end_unmet", "reference.success_after_failure",
    # provenance file (callbench.bundle.provenance)
    "provenance.missing_entry", "provenance.hash_mismatch", "provenance.unknown_scenario",
    "provenance.file", "provenance.generation",
    # a bug in an audit (reported, never raised)
    "internal",
})
"""Every problem code the loader and validator emit (documented in this module's docstring)."""


BUNDLE_FOLDER = "a bundle folder (one holding bundle.yaml)"


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
        raise FileNotFoundError(errno.ENOENT, f"does not exist; give the path of {BUNDLE_FOLDER}",
                                str(root))
    if not root.is_dir():  # FileNotFoundError (errno ENOTDIR), as load_bundle_collect documents
        raise FileNotFoundError(errno.ENOTDIR, f"is not a folder; give the path of {BUNDLE_FOLDER}",
                                str(root))
    next(root.iterdir(), None)  # raises PermissionError now when the folder cannot be listed
    bundle, problems = load_bundle_collect(root)
    problems = problems + _guard("symlinks", "", lambda: audit_symlinks(root))
    if bundle is not None:
        problems += validate_loaded(bundle)
    return bundle, dedupe(problems)


def load_bundle(path: str | Path) -> Bundle:
    """Load a bundle and run every validation audit (as ``callbench validate``); raises
    :class:`BundleError` listing all problems when any is found, ``FileNotFoundError`` when ``path``
    is not a folder (or its ``bundle.yaml``)."""
    bundle, problems = validate_path(path)
    if bundle is None or problems:
        raise BundleError(problems)
    return bundle


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

    @property
    def bundle_file(self) -> str:
        return next((f"bundle{x}" for x in DATA_SUFFIXES if (self.root / f"bundle{x}").is_file()),
                    "bundle.yaml")

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


def bundle_files(bundle: Bundle) -> _Files:
    """Bundle-relative file names of ``bundle``'s agents (``.agent(a)``), prompts (``.prompt(a)``),
    scenarios (``.scenario(a, s)``) and root file (``.bundle_file``), as problems name them."""
    return _Files(bundle)


def scenario_files(bundle: Bundle) -> dict[str, str]:
    """Scenario id -> its file relative to the bundle root (as problems name it)."""
    files = _Files(bundle)
    return {s.id: files.scenario(a, s) for a, s in bundle.scenarios()}


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
    out += _guard("provenance", bfile, lambda: audit_provenance(
        files.root, {s.id: files.scenario(a, s) for a, s in pairs}))
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
            machine = bool(machine_written(files.root, {s.id: sfile}))
            out += _guard(f"scenario {s.id}", sfile, functools.partial(
                _scenario_audits, agent, s, sfile, pfile, prompt_ok, sizes, machine))
            out += _guard(f"scenario {s.id} audio", sfile, functools.partial(
                _audio_audit, files.root, s, sfile))
    return out


def _audio_audit(root: Path, s: Scenario, sfile: str) -> list[Problem]:
    found: list[Problem] = []
    audit_audio(root, s, _reporter(found, sfile))
    return found


def _agent_audits(agent: LoadedAgent, rep: Report, rep_prompt: Report) -> bool:
    """Agent-level audits; returns whether the instructions render (scenario audits need it)."""
    audit_tool_schemas(agent.config, rep)
    audit_state_spec(agent, rep)
    for i, lang in enumerate(agent.config.languages):
        if not bcp47_ok(lang):
            rep(f"languages.{i}", "language.tag", f"{lang!r} is not a well-formed BCP 47 tag (e.g. gu-IN)")
    return audit_prompt(agent, rep, rep_prompt)


def _scenario_audits(agent: LoadedAgent, s: Scenario, sfile: str, pfile: str, prompt_ok: bool,
                     sizes: set[str], machine: bool = False) -> list[Problem]:
    """Scenario-level audits; ``machine``: the file was written by callbench generate, whose known
    facts must not copy hidden or fixture values undeclared (:mod:`callbench.bundle.validate.isolation`)."""
    found: list[Problem] = []
    rep = _reporter(found, sfile)
    audit_structure(agent, s, rep)
    audit_references(agent, s, rep)
    audit_scenario_matchers(agent, s, rep)
    audit_rendered(agent, s, rep, _reporter(found, pfile), prompt_ok, sizes)
    audit_languages(agent, s, rep)
    audit_isolation(s, rep, strict_known_facts=machine)
    audit_reference_refs(s, rep)
    audit_reference_path(agent, s, rep)
    audit_state_checks(agent, s, rep)
    return found
