"""One call of the folder report as data for the viewer script.

The folder report ships each call as ``callbenchCall("e<n>", {...});`` in ``calls/e<n>.js``; the
viewer script (``templates/report.js``, ``buildCall``) builds from it the same
``<details class="episode">`` element the single file's template (``templates/episode.html.j2``)
renders, with DOM calls only (``createElement``, ``textContent``, ``setAttribute``), so trace
text is never parsed as markup. What the script would otherwise compute differently from Python
is done here:

- numbers are sent already formatted as the template's ``num`` filter and ``str`` print them
  (``f"{x:.1f}"``; a float weight as ``1.0``), so JavaScript's number printing never shows;
- JSON shown indented (tool arguments, results, JSON tool messages) is sent as its compact text
  from Python's C encoder (:func:`json_source`: ``[text]``), which the script re-indents
  token by token into exactly :func:`callbench.report.html.viewer.pretty`'s text (numbers are never
  parsed, so ``1.0``, ``1e+16``, ``NaN`` and integers beyond 2**53 print as Python prints them);
  Python's pure-Python indenting encoder (about half the cost of a call) is not used.

:func:`call_record` gives the data, :func:`search_text` the call's searchable text from the same
strings (no markup is made or parsed in Python).
"""

from __future__ import annotations

import json
from typing import Any

_COMPACT = json.JSONEncoder(ensure_ascii=False, sort_keys=True).encode

_VIEW_KEYS = ("anchor", "run_id", "episode_id", "candidate", "agent_id", "scenario_id", "repeat", "language",
              "difficulty", "status", "skip_reason", "end_reason", "caller", "brief", "passed")  # fmt: skip
_MESSAGE_KEYS = ("index", "role", "content", "json", "tool_calls", "tool_call_id", "caller_turn", "fragment",
                 "tool_event_index", "candidate_turn", "error", "instructions")  # fmt: skip
_EVENT_KEYS = ("index", "name", "candidate_turn", "message_index", "result_message_index", "arguments",
               "parse_error", "schema_errors", "double_encoded", "known_tool", "queue_position", "outcome",
               "executed", "matchers", "state_changes", "result", "call_ending", "success_condition_met",
               "ended_call")  # fmt: skip
_CHANNEL_KEYS = ("kind", "source", "applied", "span", "replacement", "detail")


def json_source(value: Any) -> Any:
    """``value`` for display as indented JSON by the viewer script: ``[compact JSON text]``
    (``json.dumps`` with sorted keys, non-ASCII kept, Python's default ``", "``/``": "``
    separators), or the ``repr`` text when it is not JSON (as
    :func:`~callbench.report.html.viewer.pretty`)."""
    try:
        return [_COMPACT(value)]
    except (TypeError, ValueError):
        return repr(value)


def _num(x: float | None, digits: int = 1) -> str:
    """The template's ``num`` filter (``callbench.report.html.page``): an em dash for None."""
    return "—" if x is None else f"{x:.{digits}f}"


def _grade(grade: Any) -> dict[str, Any] | None:
    if grade is None:
        return None
    return {
        "overall": _num(grade.overall),
        "task": _num(grade.task_score),
        "task_points": _num(grade.task.points, 2),
        "task_weight": _num(grade.task.weight, 0),
        "conversation": _num(grade.conversation_score),
        "conversation_points": _num(grade.conversation.points, 2),
        "conversation_weight": _num(grade.conversation.weight, 0),
        "verdict": "pass" if grade.passed else "fail" if grade.passed is not None else "no pass/fail",
        "judge_errors": str(grade.judge_errors),
    }


def _set(view: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The ``keys`` of ``view`` that hold something: None, False, "" and [] are left out (the
    script reads a missing key as that), 0 is kept."""
    return {k: v for k in keys if (v := view[k]) is not None and v is not False and v != "" and v != []}


def _channel(ev: dict[str, Any]) -> dict[str, Any]:
    return {k: ev.get(k) for k in _CHANNEL_KEYS}


def _turn(t: dict[str, Any]) -> dict[str, Any]:
    """A caller turn's data; ``audio`` (``src`` and ``note``) only on a voice-channel turn, so a
    text-channel call's file is unchanged by it."""
    out = {
        "index": t["index"],
        "done": t["done"],
        "diff": t["diff"],
        "rejections": "; ".join(t["rejections"]) if t["rejections"] else None,
        "attempts": t["attempts"],
        "expressed_steps": ", ".join(str(s) for s in t["expressed_steps"]),
        "channel_events": [_channel(ev) for ev in t["channel_events"]],
        "messages": t["messages"],
    }
    audio = t.get("audio")
    if audio is not None:
        out["audio"] = [{"label": a["label"], "src": a["src"], "note": a["note"]} for a in audio]
    return out


def call_record(view: dict[str, Any]) -> dict[str, Any]:
    """The data of one call for ``callbenchCall`` from its
    :func:`~callbench.report.html.viewer.episode_view` made with ``json_text=json_source``: plain
    strings, integers, booleans and None (JSON), floats already formatted as text. Messages and
    tool events leave out what the script derives (their anchors ``e<n>-m<i>``/``e<n>-t<i>``)
    and what is empty (:func:`_set`)."""
    out: dict[str, Any] = {k: view[k] for k in _VIEW_KEYS}
    out["grade"] = _grade(view["grade"])
    out["messages"] = [_set(m, _MESSAGE_KEYS) for m in view["messages"]]
    events = []
    for t in view["tool_events"]:
        e = _set(t, _EVENT_KEYS)
        e["arguments"] = t["raw_arguments"] if t["arguments"] is None else t["arguments"]
        events.append(e)
    out["tool_events"] = events
    out["caller_turns"] = [_turn(t) for t in view["caller_turns"]]
    out["unreached_channel_events"] = [
        {"kind": ev.get("kind"), "turn": ev.get("turn"), "span": ev.get("span")}
        for ev in view["unreached_channel_events"]
    ]
    out["judged"] = [
        {
            "id": it["id"],
            "source": it["source"],
            "pillar": it["pillar"],
            "diagnostic": it["diagnostic"],
            "weight": str(it["weight"]),
            "label": it["label"] if it["label"] else f"rating {it['rating']}",
            "r": _num(it["r"], 2),
            "reason": it["reason"],
            "messages": it["messages"],
            "events": it["events"],
        }
        for it in view["judged"]
    ]
    out["latency"] = view["latency"]  # already text (report/html/latency_strip.py)
    return out


def _shown(value: Any) -> str:
    """A held JSON value's text for search (compact JSON), a plain string as is."""
    if isinstance(value, list):
        return str(value[0])
    return "" if value is None else str(value)


def search_text(record: dict[str, Any]) -> str:
    """The call's searchable text: what its element shows (ids, summary, every message, tool
    call, tool event, caller turn, channel event and judge label with its reason), joined and
    with runs of whitespace made one space; JSON as its compact text, not indented, and without
    the tables' column headings."""
    r = record
    parts: list[str] = [
        r["candidate"], r["agent_id"], r["scenario_id"], f"repeat {r['repeat']}", r["language"],
        r["difficulty"], r["status"], r["run_id"], r["episode_id"], r["end_reason"],
        r["skip_reason"] or "", r["caller"],
    ]  # fmt: skip
    g = r["grade"]
    if g is not None:
        parts += ["overall", g["overall"], g["verdict"], g["task"], g["conversation"]]
    for m in r["messages"]:
        parts += [m["role"], _shown(m.get("content")), m.get("error", ""), m.get("tool_call_id", "")]
        for c in m.get("tool_calls", ()):
            parts += [c["name"], c["id"], _shown(c["arguments"])]
    for t in r["tool_events"]:
        parts += [t["name"], _shown(t["arguments"]), t.get("parse_error", ""), t["outcome"]]
        parts += t.get("schema_errors", ())
        parts += [f"{x['field']}: {x['reason']}" for x in t.get("matchers", ())]
        parts += t.get("state_changes", ())
        parts.append(_shown(t.get("result")))
    for ct in r["caller_turns"]:
        intended, heard = ct["diff"]
        parts.append("".join(text for text, _ in intended))
        parts += ["".join(text for text, _ in frag) for frag in heard]
        parts += [ct["rejections"] or "", ct["expressed_steps"]]
        for ev in ct["channel_events"]:
            parts += [ev["kind"], ev["source"], ev["span"] or "", ev["replacement"] or "",
                      ev["detail"] or ""]  # fmt: skip
    for ev in r["unreached_channel_events"]:
        parts += [ev["kind"], ev["span"] or ""]
    for it in r["judged"]:
        parts += [it["id"], it["source"], it["pillar"], it["diagnostic"], it["label"], it["reason"] or ""]
    return " ".join(" ".join(parts).split())
