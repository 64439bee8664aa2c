"""The folder report's call files, written by worker processes.

Each call of a folder report (:mod:`callbench.report.html.folder`) is read and turned into its
``calls/e<n>.js`` file independently of the others, so :func:`folder_calls` spreads that work over
:func:`callbench.report.model.workers.map_ordered`: a worker reads a chunk of calls' traces and grades,
builds each file with :func:`callbench.report.html.call_file.call_file`, writes it, and sends back
only the call's episodes-table row, its search text and the long texts it links to (operating
instructions and caller briefs, each sent once per chunk). The parent replays those links into its
own :class:`~callbench.report.html.viewer.SharedTexts` in call order, so the blocks, their order and
their line-edit bases are exactly those of one process reading every call in turn.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from callbench.grade.models import EpisodeGrade
from callbench.report.html.call_file import SearchEntry, call_file, copy_audio, non_ascii_runs
from callbench.report.html.viewer import CallData, SharedTexts
from callbench.report.model.audio import AudioFiles
from callbench.report.model.episode_read import parse, read_model, read_text
from callbench.report.model.load import RunData
from callbench.report.model.workers import map_ordered
from callbench.stats.summary import EpisodeRecord
from callbench.trace import Trace


class SharedUse(NamedTuple):
    """One :meth:`SharedTexts.add` made while building a call: which collection (``kind``), the
    text's SHA-256, the text itself when this chunk had not sent it yet (else None), and the
    add's ``group``, ``agent``, ``scenario`` and ``language``."""

    kind: str
    sha256: str
    text: str | None
    group: str
    agent: str
    scenario: str
    language: str


class _Recorder(SharedTexts):
    """A :class:`SharedTexts` that only records its adds (anchors depend on the text alone)."""

    def __init__(self, kind: str, uses: list[SharedUse], sent: set[str]) -> None:
        super().__init__(kind)
        self.uses, self.sent = uses, sent

    def add(self, text: str, group: str, agent: str, scenario: str, language: str) -> str:
        sha = hashlib.sha256(text.encode()).hexdigest()
        first = sha not in self.sent
        self.sent.add(sha)
        self.uses.append(SharedUse(self.kind, sha, text if first else None, group, agent, scenario, language))
        return f"{self.kind}-{sha[:16]}"


@dataclass
class CallJob:
    """One call to write: its number ``n`` (anchor ``e<n>``), record, files, the folder and the
    report's latency budget."""

    n: int
    record: EpisodeRecord  # without its grade (read from ``grade_path``)
    trace_path: str | None  # plain strings: cheap to pickle
    grade_path: str | None
    calls_dir: str
    audio: AudioFiles | None = None  # where its caller turns' audio is found
    budget_s: float | None = None  # the latency budget marked on its strip (seconds; None: not marked)


@dataclass
class CallOut:
    """What the parent keeps of a written call: its table row, search entry (the shard's item,
    encoded in the worker), the non-ASCII runs of its text (for the fonts) and shared-text uses."""

    row: dict[str, Any]
    search: SearchEntry
    non_ascii: list[str]  # the distinct runs of non-ASCII text in ``search`` (for the embedded fonts)
    uses: list[SharedUse] = field(default_factory=list)
    chunk_start: bool = False  # the first call of a worker's chunk (texts are sent once per chunk)


def make_call(
    call: CallData, n: int, calls_dir: str, sent: set[str], *, chunk_start: bool,
    budget_s: float | None = None,
) -> CallOut:
    """Build and write the ``n``-th call's file into ``calls_dir``; its shared texts are sent only
    if not in ``sent`` (the texts this chunk already sent; updated); ``budget_s``: the report's
    latency budget (seconds) marked on its strip (None: not marked). Raises ``OSError`` when the
    file or its audio cannot be written."""
    uses: list[SharedUse] = []
    made = call_file(call, n, _Recorder("instr", uses, sent), _Recorder("brief", uses, sent),
                     budget_s=budget_s)
    copy_audio(calls_dir, made.audio)
    Path(calls_dir, f"{made.anchor}.js").write_text(made.script, encoding="utf-8")
    entry = SearchEntry.of(made.anchor, made.search)
    return CallOut(made.row, entry, non_ascii_runs(made.search), uses, chunk_start=chunk_start)


def write_episode_call(
    record: EpisodeRecord, trace: Trace | None, grade: EpisodeGrade | None, n: int, calls_dir: str,
    sent: set[str], *, chunk_start: bool, run_dir: str | None = None, budget_s: float | None = None,
) -> CallOut:
    """:func:`make_call` for an episode the run's loader has just read (the
    :class:`~callbench.report.model.episode_read.CallWriter` a folder report hands to
    :func:`callbench.report.model.load.load_run`, so each trace is read once for both; a module-level
    function, so a spawned worker unpickles it by name; the folder fixes ``budget_s`` with
    ``functools.partial``). ``record`` comes without its grade; the turns' audio is looked for in
    ``run_dir``'s voice cache; ``budget_s``: the report's latency budget (seconds) marked on the
    call's strip (None: not marked)."""
    audio = None if run_dir is None else AudioFiles.of_run(run_dir)
    return make_call(CallData(record, trace, grade, audio), n, calls_dir, sent, chunk_start=chunk_start,
                     budget_s=budget_s)


def write_calls(jobs: list[CallJob]) -> list[CallOut]:
    """Read, build and write each job's call file (the unit of work of a report worker); raises
    :class:`~callbench.report.model.episode_read.ReportInputError` naming a file that became unreadable
    since the run was loaded, ``OSError`` when a call file cannot be written."""
    sent: set[str] = set()
    out: list[CallOut] = []
    for job in jobs:
        tpath = None if job.trace_path is None else Path(job.trace_path)
        trace = parse(tpath, read_text(tpath, "trace"), Trace, "trace") if tpath else None
        grade = read_model(Path(job.grade_path), EpisodeGrade, "episode grade") if job.grade_path else None
        out.append(make_call(CallData(job.record, trace, grade, job.audio), job.n, job.calls_dir, sent,
                             chunk_start=not out, budget_s=job.budget_s))
    return out


class SharedReplay:
    """Adds each written call's shared-text uses to the page's :class:`SharedTexts`, in call order
    (a chunk sends each text once, with its first use; the cache holds the current chunk's)."""

    def __init__(self, instructions: SharedTexts, briefs: SharedTexts) -> None:
        self.shared = {"instr": instructions, "brief": briefs}
        self.texts: dict[str, str] = {}

    def take(self, done: CallOut) -> None:
        if done.chunk_start:
            self.texts.clear()
        for use in done.uses:
            if use.text is not None:
                self.texts.setdefault(use.sha256, use.text)
            text = self.texts[use.sha256]
            self.shared[use.kind].add(text, use.group, use.agent, use.scenario, use.language)


def folder_calls(
    runs: list[RunData], calls_dir: Path, instructions: SharedTexts, briefs: SharedTexts,
    *, workers: int | None = None, ahead: int | None = None, budget_s: float | None = None,
) -> Iterator[CallOut]:
    """Write every call of ``runs`` (those with a trace or a grade, in run then plan order, as
    :func:`callbench.report.html.viewer.call_data`) into ``calls_dir`` and yield each call's
    :class:`CallOut` in that order, after adding its operating instructions and caller brief to
    ``instructions`` and ``briefs`` (``workers`` and ``ahead`` as in
    :func:`~callbench.report.model.workers.map_ordered`; ``budget_s``: the report's latency budget
    in seconds, marked on each call's strip; None: not marked)."""
    jobs: list[CallJob] = []
    for run in runs:
        audio = AudioFiles.of_run(run.run_dir)
        for rec in run.records:
            tpath, gpath = run.trace_files.get(rec.episode_id), run.grade_files.get(rec.episode_id)
            if tpath is not None or gpath is not None:
                # the record without its grade (the worker reads the grade file; a grade costs more
                # to pickle there than to read)
                jobs.append(CallJob(len(jobs), rec.model_copy(update={"grade": None}),
                                    None if tpath is None else str(tpath),
                                    None if gpath is None else str(gpath), str(calls_dir), audio,
                                    budget_s))
    replay = SharedReplay(instructions, briefs)
    for done in map_ordered(write_calls, jobs, workers=workers, ahead=ahead):
        replay.take(done)
        yield done
