"""The plan as a contract (issue 26 item 2): a generated scenario must be what its plan item asked.

:func:`plan_problems` compares a candidate scenario with its :class:`~callbench.generate.plan.PlanItem`:
its ``language`` and ``brief.language`` must be the item's language (code ``generate.plan_language``),
its ``difficulty`` the item's difficulty (``generate.plan_difficulty``), and its channel program must
carry every channel event kind the item asks for, or none at all when the item asks for a clean
channel (``generate.plan_channel``). Each is a located problem sent back for repair, like an audit
problem. :func:`written_facts` gives what was written, recorded in ``generation.yaml`` beside what was
planned (:class:`~callbench.generate.manifest.PlanFacts`).
"""

from __future__ import annotations

from typing import Any

from callbench.bundle.loader import Problem
from callbench.generate.manifest import PlanFacts
from callbench.generate.plan import PlanItem


def channel_kinds(channel: Any) -> list[str]:
    """The channel event kinds of a scenario's ``channel`` (its JSON form), sorted and unique:
    ``asr_<kind>`` per ASR event, ``vad_split`` for VAD splits, ``seeded_noise`` when set.
    Anything not of the schema's shape counts as no event (the schema audit reports it)."""
    if not isinstance(channel, dict):
        return []
    kinds: set[str] = set()
    for e in channel.get("asr_events") or []:
        if isinstance(e, dict) and isinstance(e.get("kind"), str):
            kinds.add(f"asr_{e['kind']}")
    if channel.get("vad_splits"):
        kinds.add("vad_split")
    if channel.get("seeded_noise") is True:
        kinds.add("seeded_noise")
    return sorted(kinds)


def planned_facts(item: PlanItem) -> PlanFacts:
    """What ``item`` asked for, in the manifest's form."""
    return PlanFacts(language=item.language, difficulty=item.difficulty, channel=sorted(item.channel_kinds))


def written_facts(data: dict[str, Any]) -> PlanFacts:
    """What a scenario (its JSON form) is: language, difficulty and channel event kinds."""
    return PlanFacts(
        language=str(data.get("language", "")),
        difficulty=str(data.get("difficulty", "")),
        channel=channel_kinds(data.get("channel")),
    )


def plan_problems(item: PlanItem, data: dict[str, Any], file: str) -> list[Problem]:
    """Every way the scenario ``data`` differs from its plan item ``item`` (codes in the module
    docstring), located in ``file`` (the scenario's bundle path) by field path."""
    out: list[Problem] = []
    item_no = f"plan item {item.index + 1}"
    brief = data.get("brief") if isinstance(data.get("brief"), dict) else {}
    assert isinstance(brief, dict)
    for path, value in (("language", data.get("language")), ("brief.language", brief.get("language"))):
        if value != item.language:
            out.append(Problem(file=file, path=path, code="generate.plan_language",
                               message=f"{value!r} but {item_no} asks for language {item.language!r}; "
                               f"write the whole call (brief, plan, reference speech) in {item.language}"))
    if data.get("difficulty") != item.difficulty:
        out.append(Problem(file=file, path="difficulty", code="generate.plan_difficulty",
                           message=f"{data.get('difficulty')!r} but {item_no} asks for difficulty "
                           f"{item.difficulty!r}"))
    have = set(channel_kinds(data.get("channel")))
    want = set(item.channel_kinds)
    if not want and have:
        out.append(Problem(file=file, path="channel", code="generate.plan_channel",
                           message=f"{item_no} asks for a clean channel, but the scenario has "
                           f"{', '.join(sorted(have))}; remove the channel events"))
    for kind in sorted(want - have):
        out.append(Problem(file=file, path="channel", code="generate.plan_channel",
                           message=f"{item_no} asks for a {kind.replace('_', ' ')} event ({item.channel}), "
                           "and the scenario has none"))
    return out
