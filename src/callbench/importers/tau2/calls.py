"""The call shape of an imported tau2 task: the caller's plan steps and the reference path's turns.

What the reference path and the plan agree on (turn k answers caller turn k): turn 0 greets;
caller step ``request`` says why they call and who they are; the candidate answers with the reads
before the first write (at most :data:`MAX_CALLS` a turn: longer runs get ``wait`` steps); before
each gold write the caller confirms (step ``confirm_<n>``) and the answer makes the write and the
reads that follow it; the caller closes (``close``) and the candidate says goodbye. A gold
``transfer_to_human_agents`` (always last in the source) ends the call there.
"""

from __future__ import annotations

from typing import Any

from callbench.importers.tau2.tools import WRITE_TOOLS

MAX_CALLS = 10
"""Tool calls in one reference turn (the episode loop's per-turn limit)."""
TRANSFER = "transfer_to_human_agents"


def _segments(actions: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The calls of each candidate turn after the greeting, with the caller step it answers."""
    segs: list[tuple[str, list[dict[str, Any]]]] = [("request", [])]
    n = 0
    for a in actions:
        if a["name"] in WRITE_TOOLS:
            n += 1
            segs.append((f"confirm_{n}", []))
        elif len(segs[-1][1]) >= MAX_CALLS:
            segs.append((f"wait_{len(segs)}", []))
        segs[-1][1].append(a)
    return segs


def _step(step_id: str) -> dict[str, str]:
    if step_id == "request":
        return {
            "id": "request",
            "trigger": "The agent greets you and asks how it can help.",
            "meaning": "Say why you are calling (your reason for calling) and who you are, giving the "
            "identifying details you know when the agent asks for them.",
        }
    if step_id.startswith("confirm_"):
        return {
            "id": step_id,
            "trigger": "The agent lists the details of a change to your account or orders and asks "
            "you to confirm it.",
            "meaning": "Say yes, go ahead, if the change is what you want; otherwise say what is wrong.",
        }
    if step_id.startswith("wait_"):
        return {
            "id": step_id,
            "trigger": "The agent says it is still looking things up.",
            "meaning": "Say that is fine and that you will wait.",
        }
    return {
        "id": "close",
        "trigger": "The agent says everything is done and asks if there is anything else.",
        "meaning": "Say no, thank the agent and say goodbye.",
    }


def _turn(step_id: str, calls: list[dict[str, Any]], last: bool) -> dict[str, Any]:
    turn: dict[str, Any] = {}
    if calls:
        turn["before_tools"] = (
            "One moment, let me take care of that."
            if not step_id.startswith("confirm_")
            else "Thank you, I am doing that now."
        )
        # tau2's gold actions run one after another, each able to use the results before it: every
        # call after a turn's first is sent after those results (a causal reference path)
        turn["tool_calls"] = [
            {"name": c["name"], "arguments": c["arguments"], **({"after_results": True} if i else {})}
            for i, c in enumerate(calls)
        ]
    if calls and calls[-1]["name"] == TRANSFER:
        turn["before_tools"] = "I am transferring you to a colleague who can help with this. Goodbye."
        return turn
    turn["speech"] = (
        "Is there anything else I can help you with?"
        if last
        else "Here is what I found, and the change I can make for you. Shall I go ahead?"
    )
    return turn


def conversation(
    calls: list[dict[str, Any]], ends: bool
) -> tuple[list[dict[str, str]], list[dict[str, Any]]]:
    """The caller's plan steps (``brief.plan`` items) and the reference path (``reference_path``
    turns) for the candidate's ``calls`` (name and arguments, in order) as the module docstring
    shapes them; ``ends``: the last call is a transfer that ends the call (no closing steps)."""
    segs = _segments(calls)
    steps = [_step(sid) for sid, _ in segs] + ([] if ends else [_step("close")])
    path: list[dict[str, Any]] = [
        {"speech": "Thank you for calling the store's customer service. How can I help you today?"}
    ]
    path += [_turn(sid, c, k == len(segs) - 1) for k, (sid, c) in enumerate(segs)]
    if not ends:
        path.append({"speech": "You are welcome. Thank you for calling, goodbye."})
    return steps, path
