"""Readable per-episode views for the HTML trace viewer.

Each view holds plain strings and numbers (escaped by the template, never marked safe): messages
by index, tool events with arguments/results/outcome, caller turns with intended vs observed text
and channel events, and the judge's labels with the message and tool-event indices they cite
(rendered as in-page links ``#e<n>-m<index>`` / ``#e<n>-t<index>``). System messages (the long
operating instructions) and the caller briefs are stored once per distinct text and linked
(:class:`SharedTexts`): per agent (instructions) or per language (briefs) the first text is kept
whole and every other one as the line edits from it, since an agent's instructions differ between
scenarios in a few lines; a report over many episodes of one agent then does not repeat a
30,000-character document per episode. Every block is named by the agents and scenarios that used
it. Text in the call's language (messages, caller turns, tool arguments and results, briefs)
carries the episode's BCP 47 tag as ``lang``; caller turns carry the word-level difference of
intended and observed speech (:func:`callbench.report.html.textdiff.word_diff`) and, for turns
spoken through the voice channel, the synthesised audio to play (:func:`embed_audio` in the single
file; files beside the call files in the folder report, :mod:`callbench.report.html.call_file`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from callbench.bundle.models import DIAGNOSTIC_LABELS
from callbench.grade.models import EpisodeGrade
from callbench.report.html.latency_strip import latency_view
from callbench.report.html.textdiff import apply_line_ops, line_ops, word_diff
from callbench.report.model.audio import AudioFiles
from callbench.report.model.load import RunData
from callbench.stats.summary import EpisodeRecord
from callbench.trace import CallerTurn, Trace

AUDIO_EMBED_MAX_BYTES = 5_000_000
"""The most audio, as base64 ``data:`` URI text summed over every played turn, that the single-file
report embeds; above it no turn's audio is embedded (each says it is in the folder report): a
nine-turn call of the offline English voice is about 1.5 MB of WAV, and the single file is meant
to stay small enough to open at once (``SINGLE_FILE_MAX_CALLS``)."""

AUDIO_NOT_FOUND = "audio not in the run's voice cache"
AUDIO_IN_FOLDER = "audio in the folder report"
LINE_NOT_KEPT = "not kept by the run (made before the voice channel kept the line's audio)"
LINE_LABEL = "as the line delivered it (what the recogniser heard)"
CLEAN_LABEL = "clean synthesis, before the line"


def pretty(value: Any) -> str:
    """Indented JSON for display (non-ASCII kept as is)."""
    try:
        return json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


class SharedTexts:
    """Distinct long texts (operating instructions, caller briefs), each stored once.

    ``add(text, group, agent, scenario, language)`` returns the block's anchor
    (``<kind>-<first 16 hex of sha256>``). Per ``group`` the first text added is the base, kept
    whole (``text``); each later distinct text keeps ``base`` (the base's anchor) and ``ops``
    (:func:`~callbench.report.html.textdiff.line_ops` from the base) instead, unless the edits are
    not smaller than half the text, in which case it is kept whole too.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.blocks: dict[str, dict[str, Any]] = {}
        self._base: dict[str, str] = {}
        self._last: dict[str, tuple[str, str]] = {}

    def add(self, text: str, group: str, agent: str, scenario: str, language: str) -> str:
        last = self._last.get(group)  # the group's previous text (the next call is often a repeat)
        if last is not None and last[0] == text:
            sha = last[1]
        else:
            sha = hashlib.sha256(text.encode()).hexdigest()
            self._last[group] = (text, sha)
        block = self.blocks.get(sha)
        if block is None:
            block = {
                "anchor": f"{self.kind}-{sha[:16]}",
                "sha256": sha,
                "length": len(text),
                "text": text,
                "base": None,
                "ops": [],
                "agents": [],
                "scenarios": [],
                "languages": [],
            }
            base_sha = self._base.setdefault(group, sha)
            if base_sha != sha:
                base = self.blocks[base_sha]
                ops = line_ops(base["text"], text)
                if sum(len(line) for _, _, new in ops for line in new) < len(text) / 2:
                    assert apply_line_ops(base["text"], ops) == text
                    block.update(text=None, base=base["anchor"], ops=ops)
            self.blocks[sha] = block
        for key, value in (("agents", agent), ("scenarios", scenario), ("languages", language)):
            if value not in block[key]:
                block[key].append(value)
        return str(block["anchor"])

    def views(self) -> list[dict[str, Any]]:
        """The blocks in first-use order, each with a ``name`` (agents and scenarios), ``lang``
        (the one language that used it, else "") and ``edits`` (the changed lines for display:
        ``(first line number, last, removed lines, added lines)``, 1-based)."""
        anchors = {b["anchor"]: b for b in self.blocks.values()}
        out = []
        for b in self.blocks.values():
            scen = b["scenarios"]
            shown = ", ".join(scen[:4]) + (f" and {len(scen) - 4} more" if len(scen) > 4 else "")
            name = f"{', '.join(b['agents'])} · scenario{'s' if len(scen) > 1 else ''} {shown}"
            view = dict(b, name=name, lang=b["languages"][0] if len(b["languages"]) == 1 else "")
            if b["base"] is not None:
                base_lines = anchors[b["base"]]["text"].split("\n")
                view["base_name"] = None
                view["edits"] = [(i1 + 1, i2, base_lines[i1:i2], new) for i1, i2, new in b["ops"]]
            out.append(view)
        names = {v["anchor"]: v["name"] for v in out}
        for v in out:
            if v["base"] is not None:
                v["base_name"] = names[v["base"]]
        return out


JsonText = Callable[[Any], Any]
"""How a view holds a JSON value for display: :func:`pretty` (the single file's template prints the
text) or :func:`callbench.report.html.call_script.json_source` (the folder's viewer script indents it)."""


def _text_view(content: str | None, role: str, json_text: JsonText) -> tuple[Any, bool]:
    """Message content for display: tool results that parse as JSON shown as JSON (True)."""
    if role == "tool" and content:
        try:
            return json_text(json.loads(content)), True
        except ValueError:
            pass
    return content, False


def _arguments(raw: str, json_text: JsonText) -> Any:
    try:
        return json_text(json.loads(raw))
    except ValueError:
        return raw


def _messages(
    trace: Trace, prefix: str, instructions: SharedTexts, json_text: JsonText
) -> list[dict[str, Any]]:
    out = []
    for m in trace.messages:
        content, is_json = _text_view(m.content, m.role, json_text)
        view: dict[str, Any] = {
            "anchor": f"{prefix}-m{m.index}",
            "index": m.index,
            "role": m.role,
            "content": content,
            "json": is_json,
            "tool_calls": [
                {"id": c.id, "name": c.name, "arguments": _arguments(c.arguments, json_text)}
                for c in m.tool_calls
            ],
            "tool_call_id": m.tool_call_id,
            "name": m.name,
            "caller_turn": m.caller_turn,
            "fragment": m.fragment,
            "tool_event": f"{prefix}-t{m.tool_event}" if m.tool_event is not None else None,
            "tool_event_index": m.tool_event,
            "candidate_turn": m.candidate_turn,
            "error": m.error,
            "instructions": None,
        }
        if m.role == "system" and m.content:
            view["instructions"] = instructions.add(
                m.content, trace.agent_id, trace.agent_id, trace.scenario_id, trace.language
            )
            view["content"] = (
                f"operating instructions of {trace.agent_id} for {trace.scenario_id} "
                f"({len(m.content)} characters)"
            )
        out.append(view)
    return out


def _short_json(v: Any) -> str:
    text = json.dumps(v, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


def _tool_events(trace: Trace, prefix: str, json_text: JsonText) -> list[dict[str, Any]]:
    return [
        {
            "anchor": f"{prefix}-t{e.index}",
            "index": e.index,
            "name": e.name,
            "candidate_turn": e.candidate_turn,
            "message": f"{prefix}-m{e.message_index}",
            "message_index": e.message_index,
            "result_message": f"{prefix}-m{e.result_message_index}",
            "result_message_index": e.result_message_index,
            "raw_arguments": e.raw_arguments,
            "arguments": json_text(e.arguments) if e.arguments is not None else None,
            "parse_error": e.parse_error,
            "schema_errors": [f"{x.path or '/'}: {x.message}" for x in e.schema_errors],
            "double_encoded": e.double_encoded,
            "known_tool": e.known_tool,
            "queue_position": e.queue_position,
            "outcome": e.outcome,
            "executed": e.executed,
            "matchers": [{"field": r.field, "ok": r.ok, "reason": r.reason} for r in e.matcher_results],
            "state_changes": [
                f"{c.table}[{c.key}].{c.path}: {_short_json(c.before)} -> {_short_json(c.after)}"
                for c in e.state_changes
            ],
            "result": json_text(e.result),
            "call_ending": e.call_ending,
            "success_condition_met": e.success_condition_met,
            "ended_call": e.ended_call,
        }
        for e in trace.tool_events
    ]


def _player(label: str, sha256: str | None, path: Path | None, missing: str) -> dict[str, Any]:
    return {
        "label": label,
        "sha256": sha256 or "",
        "file": None if path is None else str(path),
        "src": None,
        "note": missing if path is None else None,
    }


def _turn_audio(turn: CallerTurn, language: str, files: AudioFiles | None) -> list[dict[str, Any]] | None:
    """The players of a turn spoken through the voice channel (None for a text-channel turn): what
    the line delivered (the WAV the recogniser was given), then the clean synthesis; each with its
    ``label``, ``sha256``, ``file`` (the kept WAV's path, None when not found), ``src`` (what the
    player plays: set by the renderer) and ``note`` (shown instead of a player)."""
    if turn.voice is None:
        return None
    ev = turn.voice
    line = files.find_line(ev) if files is not None else None
    clean = files.find(ev, language) if files is not None else None
    return [
        _player(LINE_LABEL, ev.line_audio_sha256, line,
                AUDIO_NOT_FOUND if ev.line_audio_sha256 else LINE_NOT_KEPT),
        _player(CLEAN_LABEL, ev.audio_sha256, clean, AUDIO_NOT_FOUND),
    ]


def _caller_turns(trace: Trace, prefix: str, audio: AudioFiles | None) -> list[dict[str, Any]]:
    return [
        {
            "index": t.index,
            "intended": t.intended,
            "observed": t.observed,
            "differs": t.observed != [t.intended],
            "diff": word_diff(t.intended, t.observed),
            "messages": [(i, f"{prefix}-m{i}") for i in t.message_indices],
            "expressed_steps": t.expressed_steps,
            "done": t.done,
            "attempts": t.attempts,
            "rejections": t.rejections,
            "channel_events": [ev.model_dump(mode="json") for ev in t.channel_events],
            "audio": _turn_audio(t, trace.language, audio),
        }
        for t in trace.caller_turns
    ]


def _items(grade: EpisodeGrade | None, prefix: str, trace: Trace | None) -> list[dict[str, Any]]:
    if grade is None:
        return []
    known_msgs = {m.index for m in trace.messages} if trace else set()
    known_events = {e.index for e in trace.tool_events} if trace else set()
    return [
        {
            "id": it.id,
            "source": it.source,
            "pillar": it.pillar.value,
            "diagnostic": DIAGNOSTIC_LABELS[it.diagnostic],
            "weight": it.weight,
            "label": it.label.value if it.label is not None else None,
            "rating": it.rating,
            "r": it.r,
            "reason": it.reason,
            "messages": [(i, f"{prefix}-m{i}" if i in known_msgs else None) for i in it.cited_messages],
            "events": [(i, f"{prefix}-t{i}" if i in known_events else None) for i in it.cited_events],
        }
        for it in grade.items
    ]


class CallData(NamedTuple):
    """One planned episode as the HTML report reads it: its summary record, its trace and its
    grade (either may be None: a skipped episode has no grade, an episode not run has neither),
    and where its caller turns' audio is found (None: nowhere)."""

    record: EpisodeRecord
    trace: Trace | None
    grade: EpisodeGrade | None
    audio: AudioFiles | None = None


def call_data(runs: list[RunData]) -> Iterator[CallData]:
    """Every episode of ``runs`` that has a trace or a grade, in run then plan order: the one
    place the HTML report reads trace data. Each trace and grade is read from its file when
    reached and not kept (:meth:`RunData.iter_episodes`), so memory does not grow with the run."""
    for run in runs:
        audio = AudioFiles.of_run(run.run_dir)
        for rec, trace, grade in run.iter_episodes():
            yield CallData(rec, trace, grade, audio)


def call_count(runs: list[RunData]) -> int:
    """How many calls :func:`call_data` yields, from the records alone (an episode with neither
    trace nor grade is the only kind recorded ``not_run``), so no trace is read to count them."""
    return sum(1 for run in runs for rec in run.records if rec.status != "not_run")


def episode_view(
    call: CallData, n: int, instructions: SharedTexts, briefs: SharedTexts, *, json_text: JsonText = pretty,
    budget_s: float | None = None,
) -> dict[str, Any]:
    """The view of the ``n``-th call (anchor ``e<n>``), adding its operating instructions and
    caller brief to ``instructions`` and ``briefs``. Tool arguments and results and JSON tool
    messages are held as ``json_text(value)`` (default :func:`pretty`: indented text);
    ``budget_s``: the latency budget (seconds) marked on the latency strip (None: not marked). Both
    HTML reports pass the report's budget (``report.settings.latency_budget_s``): the folder
    report's calls, written while the runs are read, get it from ``callbench report``, which
    settles it from the run manifests before reading anything else."""
    rec, trace, grade, audio = call
    prefix = f"e{n}"
    return {
        "anchor": prefix,
        "run_id": rec.run_id,
        "episode_id": rec.episode_id,
        "candidate": rec.candidate,
        "agent_id": rec.agent_id,
        "scenario_id": rec.scenario_id,
        "repeat": rec.repeat,
        "language": rec.language,
        "difficulty": rec.difficulty,
        "status": rec.status,
        "skip_reason": rec.skip_reason,
        "end_reason": trace.end_reason.value if trace else grade.end_reason if grade else "",
        "caller": trace.caller.spec if trace else "",
        "brief": (
            briefs.add(
                trace.caller_view.system_prompt,
                trace.language,
                trace.agent_id,
                trace.scenario_id,
                trace.language,
            )
            if trace and trace.caller_view.system_prompt
            else None
        ),
        "passed": grade.passed if grade else None,
        "grade": grade,
        "messages": _messages(trace, prefix, instructions, json_text) if trace else [],
        "tool_events": _tool_events(trace, prefix, json_text) if trace else [],
        "caller_turns": _caller_turns(trace, prefix, audio) if trace else [],
        "unreached_channel_events": (
            [ev.model_dump(mode="json") for ev in trace.unreached_channel_events] if trace else []
        ),
        "judged": _items(grade, prefix, trace),
        "usage": {k: v.model_dump(mode="json") for k, v in trace.usage.items()} if trace else {},
        "latency": latency_view(trace.latency, budget_s) if trace else None,
    }


def episode_row(view: dict[str, Any]) -> dict[str, Any]:
    """The few fields of a view the episodes table shows and filters on (what the folder report
    keeps in memory per call): anchor, ids, language, difficulty, status, end reason, the number
    of tool calls, the overall score (0-100 or None) and the verdict (pass, fail, cut: ended at a
    caller-turn cap before the authored call could finish, or none)."""
    grade = view["grade"]
    passed = view["passed"]
    return {
        **{k: view[k] for k in ("anchor", "episode_id", "candidate", "agent_id", "scenario_id", "repeat",
                                "language", "difficulty", "status", "end_reason")},
        "tool_calls": len(view["tool_events"]),
        "overall": grade.overall if grade is not None else None,
        "graded": grade is not None,
        "verdict": "cut" if grade is not None and grade.cut else (
            "pass" if passed else ("fail" if passed is not None else "none")),
    }


def _data_uri_size(path: str) -> int:
    """Characters of ``path``'s WAV as a ``data:audio/wav;base64,`` URI (0: unreadable)."""
    try:
        n = os.path.getsize(path)
    except OSError:
        return 0
    return len("data:audio/wav;base64,") + 4 * ((n + 2) // 3)


def embed_audio(views: list[dict[str, Any]], limit: int | None = None) -> int:
    """For the single file: give every caller turn of ``views`` whose audio was found a
    ``data:audio/wav;base64,...`` URI of the cached WAV's exact bytes as its ``src``, when all of
    them together come to at most ``limit`` characters (default :data:`AUDIO_EMBED_MAX_BYTES`);
    otherwise none, and each such turn's note says :data:`AUDIO_IN_FOLDER`. Returns the characters
    embedded (0 when none). A file that became unreadable since it was found gets
    :data:`AUDIO_NOT_FOUND`."""
    turns = [a for v in views for t in v["caller_turns"] for a in t.get("audio") or [] if a["file"]]
    if not turns:
        return 0
    if sum(_data_uri_size(a["file"]) for a in turns) > (AUDIO_EMBED_MAX_BYTES if limit is None else limit):
        for a in turns:
            a["note"] = AUDIO_IN_FOLDER
        return 0
    uris: dict[str, str | None] = {}
    total = 0
    for a in turns:
        if a["file"] not in uris:
            try:
                with open(a["file"], "rb") as f:
                    uris[a["file"]] = "data:audio/wav;base64," + base64.b64encode(f.read()).decode("ascii")
            except OSError:
                uris[a["file"]] = None
        uri = uris[a["file"]]
        if uri is None:
            a["note"] = AUDIO_NOT_FOUND
        else:
            a["src"] = uri
            total += len(uri)
    return total


def episode_views(
    runs: list[RunData], budget_s: float | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Views of every episode that has a trace or a grade, in run then plan order, and the
    distinct operating instructions and caller briefs they link to (:meth:`SharedTexts.views`);
    the caller turns' audio is embedded when small enough (:func:`embed_audio`); ``budget_s``:
    the latency budget marked on each call's latency strip."""
    instructions = SharedTexts("instr")
    briefs = SharedTexts("brief")
    views = [episode_view(c, n, instructions, briefs, budget_s=budget_s)
             for n, c in enumerate(call_data(runs))]
    embed_audio(views)
    return views, instructions.views(), briefs.views()
