"""``callbench new-agent``: an agent folder made from a system prompt and a tools file.

The prompt's own templating (the Liquid ``{{ }}`` of Vapi and Retell prompts) is translated into
declared variables with defaults, or kept verbatim with ``template="none"`` (:mod:`.liquid`).

Writes ``agents/<id>/agent.yaml`` and ``agents/<id>/prompt.md`` into a bundle folder (and a
``bundle.yaml`` when the folder has none), then validates the bundle. When the new agent has
problems, everything written is removed again and the problems are returned, so a failed attempt
leaves the bundle as it was.

Who speaks first (the agent's ``first_user_message`` convention, :mod:`.first_turn`) comes from
``--first-user-message`` when given, else from a voice platform's export (``--platform-export``:
a Vapi assistant, a Retell LLM or agent), else is left out (the role setting decides).

Success conditions are given as ``TOOL:FIELD=VALUE`` (repeatable): ``FIELD`` is a dotted path into
the tool's returned object, ``VALUE`` is read as a YAML scalar (``ended``, ``true``, ``3``) or a
matcher in YAML flow form (``{one_of: [ended, transferred]}``); several for one tool must all hold.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from callbench.bundle.loader import Problem, sha256_text
from callbench.bundle.models import ID_PATTERN, AgentConfig, ToolSpec
from callbench.bundle.validate.audits import validate_path
from callbench.generate.first_turn import FirstTurn, FirstTurnError, parse_option, read_export_file
from callbench.generate.liquid import TemplateImportError, TemplateMode, import_template
from callbench.generate.tools_import import read_tools_file
from callbench.trace import atomic_write_text


class NewAgentError(ValueError):
    """A bad argument to :func:`make_agent` (located message: which flag or file, what is wrong)."""


class NewAgentResult(BaseModel):
    """What :func:`make_agent` did: the agent folder, whether a ``bundle.yaml`` was created, the
    validation problems of the new agent's files (empty: the agent was written), and the notes of
    the template import (:mod:`.liquid`: declared variables, dropped time zones)."""

    agent_dir: str
    created_bundle_file: bool
    problems: list[Problem]
    notes: list[str] = []


def parse_success(items: list[str]) -> dict[str, dict[str, Any]]:
    """``["end_call:status=ended", ...]`` -> ``{"end_call": {"status": "ended"}}``.

    Raises :class:`NewAgentError` naming the item for a missing ``:`` or ``=``, an empty field or
    a value that is not YAML."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        tool, colon, cond = item.partition(":")
        field, eq, raw = cond.partition("=")
        if not colon or not eq or not tool.strip() or not field.strip():
            raise NewAgentError(f"--success {item!r}: expected TOOL:FIELD=VALUE, e.g. end_call:status=ended")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as e:
            raise NewAgentError(f"--success {item!r}: the value is not YAML: {e}") from None
        out.setdefault(tool.strip(), {})[field.strip()] = value
    return out


def agent_id_from(prompt_path: Path) -> str:
    """A default agent id from the prompt file's name (``support_agent.md`` -> ``support_agent``)."""
    stem = re.sub(r"[^A-Za-z0-9_.\-]+", "_", prompt_path.stem).strip("_.-") or "agent"
    return stem if re.fullmatch(ID_PATTERN, stem) else f"agent_{stem}"[:128]


def build_config(
    agent_id: str,
    tools: list[ToolSpec],
    prompt_text: str,
    *,
    name: str,
    domain: str,
    languages: list[str],
    direction: str,
    call_ending: list[str],
    success: dict[str, dict[str, Any]],
    description: str = "",
    variables: dict[str, str] | None = None,
    first_turn: FirstTurn | None = None,
) -> AgentConfig:
    """The typed agent configuration (``first_turn``: who speaks first, written as the agent's
    ``first_user_message`` convention; None leaves it out). Raises :class:`NewAgentError` when
    no call-ending tool is given, when one is no tool of the list, or has no success condition,
    or when a success condition names a tool that is not call-ending; and for a field that fails
    the schema."""
    names = [t.name for t in tools]
    endings = list(dict.fromkeys(call_ending))
    if not endings:
        raise NewAgentError(
            "--call-ending: name at least one call-ending tool (the tool that ends the "
            f"call, one of {', '.join(names)}) and its --success condition"
        )
    for tool in endings:
        if tool not in names:
            raise NewAgentError(
                f"--call-ending {tool!r}: no such tool in the tools file ({', '.join(names)})"
            )
        if tool not in success:
            raise NewAgentError(
                f"--call-ending {tool!r}: give its success condition, e.g. --success '{tool}:status=ended'"
            )
    for tool in success:
        if tool not in endings:
            raise NewAgentError(f"--success {tool}:...: {tool!r} is not named by --call-ending")
    data = {
        "id": agent_id,
        "name": name,
        "domain": domain,
        "languages": languages,
        "direction": direction,
        "description": description,
        "prompt_sha256": sha256_text(prompt_text),
        "tools": [t.model_dump(mode="json", exclude_none=True) for t in tools],
        "call_ending_tools": [{"tool": t, "success": success[t]} for t in endings],
        "variables": variables or {},
    }
    if first_turn is not None:
        data["first_user_message"] = first_turn.first_user_message
        if first_turn.text is not None:
            data["first_user_message_text"] = first_turn.text
    try:
        return AgentConfig.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise NewAgentError(f"agent {loc}: {first['msg']}") from None


def agent_yaml(
    config: AgentConfig, success: dict[str, dict[str, Any]], first_turn: FirstTurn | None = None
) -> str:
    """The ``agent.yaml`` text (keys in schema order; success conditions as given on the command
    line, since matcher objects do not dump back to their on-disk form; the first-turn convention
    with a comment saying where it came from)."""
    data = config.model_dump(mode="json", exclude_none=True, exclude={"call_ending_tools"})
    data.pop("instructions_file", None)
    data.pop("active", None)
    if not data.get("variables"):
        data.pop("variables", None)
    data["call_ending_tools"] = [
        {"tool": e.tool, "success": success[e.tool]} for e in config.call_ending_tools
    ]
    text = yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=100)
    if first_turn is not None:
        text = text.replace("\nfirst_user_message:", f"\n# who speaks first: {first_turn.source}\n"
                            "first_user_message:", 1)
    return "# Made by `callbench new-agent` from a system prompt and a tools file.\n" + text


def make_agent(
    bundle_dir: Path,
    prompt_path: Path,
    tools_path: Path,
    *,
    agent_id: str | None = None,
    name: str | None = None,
    domain: str = "general",
    languages: list[str] | None = None,
    direction: str = "inbound",
    call_ending: list[str],
    success: list[str],
    description: str = "",
    template: TemplateMode = "auto",
    platform_export: Path | None = None,
    first_user_message: str | None = None,
) -> NewAgentResult:
    """Write a new agent into ``bundle_dir`` and validate it (see the module docstring).
    ``first_user_message`` is the ``--first-user-message`` value (``none``, ``empty``,
    ``text:WORDS``); it takes precedence over what ``platform_export`` says.

    Raises :class:`NewAgentError` for a bad argument, an unreadable prompt, tools or export file,
    an export that says nothing about who speaks first, or an agent folder that already exists;
    returns the problems when the written agent does not validate (the files are then removed
    again)."""
    try:
        prompt_text = prompt_path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise NewAgentError(
            f"--prompt {prompt_path}: cannot read: {getattr(e, 'strerror', None) or e}"
        ) from None
    if not prompt_text.strip():
        raise NewAgentError(f"--prompt {prompt_path}: the file is empty")
    try:
        imported = import_template(prompt_text, template, f"--prompt {prompt_path}")
    except TemplateImportError as e:
        raise NewAgentError(str(e)) from None
    prompt_text = imported.text
    try:
        tools = read_tools_file(tools_path)
    except ValueError as e:
        raise NewAgentError(f"--tools {e}") from None
    try:
        first_turn = (parse_option(first_user_message) if first_user_message is not None
                      else read_export_file(platform_export) if platform_export is not None else None)
    except FirstTurnError as e:
        raise NewAgentError(str(e)) from None
    aid = agent_id or agent_id_from(prompt_path)
    if not re.fullmatch(ID_PATTERN, aid):
        raise NewAgentError(
            f"--id {aid!r}: use letters, digits, '_', '.', '-' (starting with a letter or digit)"
        )
    conds = parse_success(success)
    config = build_config(
        aid,
        tools,
        prompt_text,
        name=name or aid.replace("_", " "),
        domain=domain,
        languages=languages or ["en"],
        direction=direction,
        call_ending=call_ending,
        success=conds,
        description=description,
        variables=imported.variables,
        first_turn=first_turn,
    )
    folder = bundle_dir / "agents" / aid
    if folder.exists():
        raise NewAgentError(f"{folder}: already exists; choose another --id or remove the folder")
    made = [d for d in (bundle_dir, bundle_dir / "agents") if not d.exists()]
    bundle_dir.mkdir(parents=True, exist_ok=True)
    bundle_file = bundle_dir / "bundle.yaml"
    created = not any((bundle_dir / f"bundle{x}").exists() for x in (".yaml", ".yml", ".json"))
    if created:
        meta = {
            "name": bundle_dir.resolve().name or "bundle",
            "version": "0.1.0",
            "description": "A bundle made with callbench new-agent.",
        }
        atomic_write_text(bundle_file, yaml.safe_dump(meta, allow_unicode=True, sort_keys=False))
    (folder / "scenarios").mkdir(parents=True)
    atomic_write_text(folder / "prompt.md", prompt_text)
    atomic_write_text(folder / "agent.yaml", agent_yaml(config, conds, first_turn))
    _, problems = validate_path(bundle_dir)
    rel = f"agents/{aid}/"
    mine = [p for p in problems if p.file.startswith(rel) or (created and p.file.startswith("bundle"))]
    if mine:
        shutil.rmtree(folder)
        if created:
            bundle_file.unlink(missing_ok=True)
        for d in reversed(made):  # folders this call made, innermost first, if left empty
            with contextlib.suppress(OSError):
                d.rmdir()
    notes = list(imported.notes)
    if first_turn is not None:
        notes.append(f"first turn: first_user_message {first_turn.first_user_message} "
                     f"({first_turn.source})")
    return NewAgentResult(agent_dir=str(folder), created_bundle_file=created, problems=mine, notes=notes)
