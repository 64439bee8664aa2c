"""The batch plan: what a generation batch must cover.

A plan assigns each of the ``n`` requested scenarios a language, a difficulty, the sections of the
operating document it must test (Markdown and ``[Bracketed]`` headings and a substantial preamble,
see :func:`callbench.bundle.sections.document_sections`; a section without body text or one that
only sets context, the call's date and time or worked examples not to be recited, is not assigned,
:func:`callbench.bundle.sections.testable_sections`; what "test" means:
:mod:`callbench.bundle.section_tests`), the tools
those sections name (else the next tools in turn), a failure mode and a channel program. The
whole plan goes with every request, so the model sees what the other items cover and writes
distinct intents. Every choice derives from the seed (``random.Random`` seeded with SHA-256
of the seed, agent id and purpose), so a plan is reproduced exactly.

Sections per item: at most ``sections_per_item`` (:data:`DEFAULT_SECTIONS_PER_ITEM`, settable with
``callbench generate --sections-per-item``), and no more than ``ceil(sections / n)``. One scenario
is one call with one intent: a model asked to test nine sections in one call writes a scenario that
fails the section contract on every attempt. So with a small ``n`` the plan *picks* sections: first
those no scenario of the agent tests yet (``untested``), then the others, each group in an order
drawn from the seed; item ``i`` takes the next ``sections_per_item`` of that order. The sections no
item takes are the plan's ``uncovered`` list, shown to the user (a larger ``--n`` or another batch
covers them). When ``n`` items need more sections than the document has, the order wraps around.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Collection

from pydantic import BaseModel, Field

from callbench.bundle.models import LoadedAgent
from callbench.bundle.sections import names_word, testable_sections

FAILURE_MODES: tuple[str, ...] = (
    "the caller gives an identifier with one digit wrong, the tool rejects it, and the caller corrects it",
    "a tool returns a refusal, an error or a busy answer the agent must handle truthfully and recover from",
    "the caller asks for something the document forbids; the agent must refuse and offer what is allowed",
    "the caller changes their mind in the middle of the call",
    "the caller asks for information the agent may give only after verification",
    "the call-ending tool's result fails its success condition once and the agent must recover",
    "the caller mentions an urgent or safety issue that the document routes differently",
    "a third party (a relative or neighbour) calls on someone else's behalf",
    "the caller gives several facts in one long turn and the agent must remember them later",
    "the caller hesitates and asks the agent to repeat a number it gave",
)
"""Generic failure modes of phone calls; each plan item draws one (in a seeded order)."""

CHANNEL_PROGRAMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("an ASR substitution of a word or number the caller says (asr_events kind substitute)",
     ("asr_substitute",)),
    ("a VAD split inside a long number or between two halves of a thought (vad_splits)", ("vad_split",)),
    ("an ASR drop of a short word in a caller turn (asr_events kind drop)", ("asr_drop",)),
    ("seeded noise on the first caller turn (seeded_noise: true)", ("seeded_noise",)),
    ("a clean channel (no channel events)", ()),
    ("an ASR double of a word (asr_events kind double) and a VAD split in another turn",
     ("asr_double", "vad_split")),
)
"""The channel programs a plan item may ask for: the text sent, and the channel event kinds the
scenario must then carry (:data:`CHANNEL_KINDS`; none at all for the clean channel)."""

CHANNEL_KINDS: tuple[str, ...] = ("asr_substitute", "asr_drop", "asr_double", "vad_split", "seeded_noise")
"""The kinds of channel events a plan item asks for and a scenario is checked against
(:func:`callbench.generate.contract.channel_kinds`)."""


DEFAULT_SECTIONS_PER_ITEM = 2
"""Most sections one plan item asks a scenario to test (a call of a dozen turns tests one or two
rules of a document well; more makes the section contract unsatisfiable in practice)."""

MAX_SECTIONS_PER_ITEM = 6
"""The largest ``sections_per_item`` accepted."""

NO_SECTIONS = "the whole document"
"""The section name of a plan item when the document has no sections (nothing to hold it to)."""


class PlanItem(BaseModel):
    """One scenario to generate: position ``index`` (0-based), language, difficulty, the document
    sections and tools it should test, a failure mode and a channel program."""

    index: int
    language: str
    difficulty: str
    sections: list[str]
    tools: list[str]
    failure_mode: str
    channel: str
    channel_kinds: list[str] = Field(default_factory=list)
    """The channel event kinds the scenario must carry (:data:`CHANNEL_KINDS`); empty with a
    clean channel, which then must carry none."""

    def line(self) -> str:
        """One readable line (the plan as sent to the model)."""
        return (
            f"{self.index + 1}. {self.language}, {self.difficulty}; sections: {'; '.join(self.sections)}; "
            f"tools: {', '.join(self.tools) or '-'}; failure mode: {self.failure_mode}; "
            f"channel: {self.channel}"
        )


class BatchPlan(BaseModel):
    """The plan of one batch: agent, seed, and one item per scenario."""

    agent: str
    seed: int
    items: list[PlanItem] = Field(default_factory=list)
    uncovered: list[str] = Field(default_factory=list)
    """Testable sections no item asks for, in document order (the plan picked others)."""


class PlanError(ValueError):
    """A bad language or difficulty mix (message names the flag and what is wrong)."""


def _rng(seed: int, agent: str, purpose: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}\x00{agent}\x00{purpose}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def parse_mix(text: str | None, n: int, allowed: tuple[str, ...] | None, flag: str) -> dict[str, int]:
    """``"medium=5,hard=5"`` -> ``{"medium": 5, "hard": 5}``; ``"hi,en"`` (no counts) splits ``n``
    evenly (largest remainder, earlier names first). Counts must sum to ``n``. Raises
    :class:`PlanError` naming ``flag`` for a bad item, an unknown name, a negative count or a sum
    other than ``n``."""
    if not text or not text.strip():
        return {}
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if all("=" not in p for p in parts):
        names = list(dict.fromkeys(parts))
        base, extra = divmod(n, len(names))
        counts = {name: base + (1 if i < extra else 0) for i, name in enumerate(names)}
    else:
        counts = {}
        for p in parts:
            name, eq, num = p.partition("=")
            if not eq or not num.strip().isdigit():
                raise PlanError(f"{flag} {text!r}: {p!r} is not NAME=COUNT (e.g. medium=5,hard=5)")
            counts[name.strip()] = counts.get(name.strip(), 0) + int(num)
        if sum(counts.values()) != n:
            raise PlanError(f"{flag} {text!r}: the counts sum to {sum(counts.values())}, not --n {n}")
    for name in counts:
        if allowed is not None and name not in allowed:
            raise PlanError(f"{flag}: {name!r} is not one of {', '.join(allowed)}")
    return {k: v for k, v in counts.items() if v > 0}


def _tools_named(text: str, tools: list[str]) -> list[str]:
    return [t for t in tools if names_word(text, t)]


def make_plan(
    agent: LoadedAgent,
    rendered: str,
    *,
    n: int,
    seed: int,
    languages: dict[str, int],
    difficulty: dict[str, int],
    sections_per_item: int = DEFAULT_SECTIONS_PER_ITEM,
    untested: Collection[str] = (),
) -> BatchPlan:
    """The plan for ``n`` scenarios of ``agent`` (rules in the module docstring). ``rendered`` is
    the operating document as the model is sent it; ``languages`` and ``difficulty`` are mixes from
    :func:`parse_mix` (empty: the agent's languages evenly, and half medium, half hard); a bare
    language subtag (``en``) stands for the agent's tag it starts (``en-IN``); ``untested`` holds
    the titles of sections no existing scenario tests (planned first). Raises :class:`PlanError`
    when ``n`` is below 1, ``sections_per_item`` is outside 1..:data:`MAX_SECTIONS_PER_ITEM` or a
    language is not one the agent serves."""
    if n < 1:
        raise PlanError(f"--n {n}: ask for at least one scenario")
    if not 1 <= sections_per_item <= MAX_SECTIONS_PER_ITEM:
        raise PlanError(f"--sections-per-item {sections_per_item}: use 1 to {MAX_SECTIONS_PER_ITEM}")
    aid = agent.config.id
    langs = languages or parse_mix(",".join(agent.config.languages), n, None, "--languages")
    resolved: dict[str, int] = {}
    for lang, count in langs.items():
        tag = next((x for x in agent.config.languages if lang.lower() == x.lower()), None) or next(
            (x for x in agent.config.languages if x.lower().startswith(lang.lower() + "-")), None
        )
        if tag is None:
            raise PlanError(
                f"--languages: {lang!r} is not served by agent {aid!r} ({', '.join(agent.config.languages)})"
            )
        resolved[tag] = resolved.get(tag, 0) + count
    langs = resolved
    diffs = difficulty or {"medium": n // 2, "hard": n - n // 2}
    diffs = {k: v for k, v in diffs.items() if v > 0}
    lang_list = [x for x, c in langs.items() for _ in range(c)]
    diff_list = [x for x, c in diffs.items() for _ in range(c)]
    _rng(seed, aid, "languages").shuffle(lang_list)
    _rng(seed, aid, "difficulty").shuffle(diff_list)
    sections = testable_sections(rendered)
    order = list(range(len(sections)))
    _rng(seed, aid, "sections").shuffle(order)
    gaps = set(untested)
    order = [k for k in order if sections[k].title in gaps] + [
        k for k in order if sections[k].title not in gaps]
    modes = list(FAILURE_MODES)
    _rng(seed, aid, "failure_modes").shuffle(modes)
    channels = list(CHANNEL_PROGRAMS)
    _rng(seed, aid, "channel").shuffle(channels)
    tool_names = [t.name for t in agent.config.tools]
    per_item = min(sections_per_item, max(1, -(-len(sections) // n))) if sections else 0
    items: list[PlanItem] = []
    next_tool = 0
    for i in range(n):
        picked = [sections[order[(i * per_item + j) % len(order)]] for j in range(per_item)] if order else []
        titles = list(dict.fromkeys(s.title for s in picked)) or [NO_SECTIONS]
        named = list(
            dict.fromkeys(t for s in picked for t in _tools_named(rendered[s.start : s.end], tool_names))
        )
        if not named and tool_names:
            named = [tool_names[next_tool % len(tool_names)]]
            next_tool += 1
        items.append(
            PlanItem(
                index=i,
                language=lang_list[i],
                difficulty=diff_list[i],
                sections=titles,
                tools=named,
                failure_mode=modes[i % len(modes)],
                channel=channels[i % len(channels)][0],
                channel_kinds=list(channels[i % len(channels)][1]),
            )
        )
    asked = {t for i in items for t in i.sections}
    uncovered = [s.title for s in sections if s.title not in asked]
    return BatchPlan(agent=aid, seed=seed, items=items, uncovered=uncovered)
