"""The HTML report as a folder, for runs too large for one file.

Layout (every file offline, every link relative, so it opens from ``file://`` with no server)::

    DIR/index.html          every table and figure, one episodes-table row per call, the shared
                            instruction and brief blocks, the viewer script and the fonts
    DIR/calls/e<n>.js       one call's data: ``callbenchCall("e<n>", {...})``
    DIR/calls/audio/<sha256>.wav  the synthesised audio of voice-channel caller turns, as the run's
                            voice cache holds it (:mod:`callbench.report.html.call_file`)
    DIR/search/s<k>.js      the calls' text for the search box, about SHARD_BYTES each:
                            ``callbenchSearch(<k>, {"e<n>": "text", ...})``
    DIR/report-folder.json  what wrote the folder (it marks the folder as a report's, so a later
                            report may replace it; nothing else is ever replaced)

Browsers block ``fetch()`` of ``file://`` URLs, but not ``<script src>`` of a file beside the
page: the viewer script (``templates/report.js``) adds a ``<script>`` element for a call's file
when the call is opened (a row, a score-matrix tile, a link or the URL's ``#e<n>``), and for the
search files on the first search. A call file holds the call's data, not markup
(:func:`callbench.report.html.call_script.call_record`, as a JSON literal:
:func:`~callbench.report.html.call_file.js_value`); the call
builder (``templates/call_view.js``, embedded in the folder's page only) makes the call's
``<details class="episode">`` element from it with DOM calls only
(``createElement``, ``textContent``, ``setAttribute``; never ``innerHTML``), the same DOM the single
file's template gives (``tests/report/test_browser_equivalence.py`` compares them call by call).
Its search text comes from the same strings (:func:`callbench.report.html.call_script.search_text`).
:func:`~callbench.report.html.call_file.call_file` does all of one call's work but the writing (a
pure function, so it may run in worker processes): 0.76 ms of CPU per call of the 1,000-episode
synthetic run, 1.0 ms with writing the file (``benchmarks/folder_call_bench.py``, load average 1.9
on 2 cores), against 2.8 ms without writing when the markup was rendered in Python.

The folder is written whole into a temporary sibling, then renamed into place; an earlier report
folder at the same path is moved aside first and deleted after (the one moment between the two
renames has no folder at the path).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterable, Iterator
from functools import lru_cache, partial
from importlib import resources
from pathlib import Path
from typing import Any

from callbench.report.html.call_file import SearchEntry, call_file, copy_audio, non_ascii_runs
from callbench.report.html.calls import CallOut, SharedReplay, folder_calls, write_episode_call
from callbench.report.html.page import embed_fonts, neutralise_js, render_page, script_json
from callbench.report.html.viewer import CallData, SharedTexts
from callbench.report.model.build import Report
from callbench.report.model.load import CallFiles, RunData
from callbench.trace import atomic_write_text

SINGLE_FILE_MAX_CALLS = 250
"""Calls up to which ``callbench report`` writes one HTML file; beyond it, a folder. Measured with
starter-shaped calls (``benchmarks/html_bench.py``, 2 cores at load average 11): 250 calls make
an 8.7 MB file that opens in Chromium in 2.0 s, within the 3 s asked of the folder's first page;
500 calls 15.4 MB in 3.7 s; 1,000 calls 28.6 MB in 7.3 s (its first version: 1,500 calls, 27.5 MB, 12 s)."""

SHARD_BYTES = 2_000_000
"""Search text per ``search/s<k>.js`` file, in UTF-8 bytes (a file closes once it passes this)."""

MARKER = "report-folder.json"
CALLS = "calls/"
SEARCH = "search/"
_REPORT_ENTRIES = frozenset({"index.html", MARKER, CALLS.rstrip("/"), SEARCH.rstrip("/")})
"""What a folder report holds at its top level (anything else there is not ours to delete)."""


class ReportFolderError(Exception):
    """The folder report cannot be written to the path asked for; the message names it."""


@lru_cache(maxsize=1)
def call_view_js() -> str:
    """The folder page's call builder (``templates/call_view.js``), checked for inline embedding;
    the single file, which has its calls' markup, does not carry it."""
    return neutralise_js(
        (resources.files("callbench.report.html") / "templates" / "call_view.js").read_text(encoding="utf-8")
    )


def with_call_view(page: str) -> str:
    """``page`` with the call builder in a ``<script>`` at the end of its head, so it is defined
    before the viewer script (end of body) can load any call file."""
    return page.replace("</head>", f'<script id="call-view">\n{call_view_js()}</script>\n</head>', 1)


def _row_values(row: dict[str, Any]) -> list[Any]:
    """A table row as the viewer script reads it (``templates/report.js``, folder report)."""
    keys = ("anchor", "candidate", "agent_id", "scenario_id", "repeat", "language", "difficulty", "status",
            "end_reason", "tool_calls", "overall", "verdict")  # fmt: skip
    return [row[k] for k in keys]


def _check_target(folder: Path) -> None:
    """Refuse to replace anything but a report folder this command wrote: a file, a symlink, a
    folder without a valid :data:`MARKER`, or a report folder holding anything a report does not
    write (a user's own file would be lost with it). Raises :class:`ReportFolderError`."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise ReportFolderError(f"{folder}: exists and is not a folder; choose another path")
    if not folder.is_dir() or not any(folder.iterdir()):
        return
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        ours = isinstance(marker, dict) and marker.get("written_by") == "callbench report"
    except (OSError, ValueError):
        ours = False
    if not ours:
        raise ReportFolderError(
            f"{folder}: a folder that is not a callbench report folder (no valid {MARKER}); it is "
            "never replaced: choose another path"
        )
    foreign = sorted(p.name for p in folder.iterdir() if p.name not in _REPORT_ENTRIES)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" (+{len(foreign) - 5} more)" if len(foreign) > 5 else "")
        raise ReportFolderError(
            f"{folder}: a report folder that also holds files a report does not write ({shown}); "
            "replacing it would delete them: move them out or choose another path"
        )


def _move_into_place(tmp: Path, folder: Path) -> None:
    old = folder.with_name(f".{folder.name}.old-{os.getpid()}")
    if folder.exists():
        os.rename(folder, old)
    os.rename(tmp, folder)
    if old.exists():
        shutil.rmtree(old, ignore_errors=True)


class _Shards:
    """Search text written as it comes, ``SHARD_BYTES`` per file: ``callbenchSearch(<k>,
    {"<anchor>": "<text>", ...});`` (the object :func:`js_value` makes of the dict, built from
    each call's :class:`SearchEntry`)."""

    def __init__(self, root: Path) -> None:
        self.root, self.count, self.bytes = root, 0, 0
        self._buf: list[str] = []
        self._size = 0

    def add(self, entry: SearchEntry) -> None:
        self._buf.append(entry.item)
        self._size += entry.size
        if self._size >= SHARD_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self._buf:
            return
        body = f"callbenchSearch({self.count}, {{{', '.join(self._buf)}}});\n"
        (self.root / f"s{self.count}.js").write_text(body, encoding="utf-8")
        self.bytes += len(body.encode())
        self.count += 1
        self._buf, self._size = [], 0


def _serial_calls(
    calls: Iterable[CallData], calls_dir: Path, instructions: SharedTexts, briefs: SharedTexts,
    budget_s: float | None,
) -> Iterator[tuple[dict[str, Any], SearchEntry, list[str]]]:
    """Write each call's file in this process; yield its row, search entry and non-ASCII runs."""
    for n, call in enumerate(calls):
        done = call_file(call, n, instructions, briefs, budget_s=budget_s)
        copy_audio(calls_dir, done.audio)
        (calls_dir / f"{done.anchor}.js").write_text(done.script, "utf-8")
        yield done.row, SearchEntry.of(done.anchor, done.search), non_ascii_runs(done.search)


class FolderBuild:
    """A folder report being built: its call files and search files are written first (into a
    temporary sibling of the folder), in this thread or, with ``background``, in a thread that
    feeds the report's worker processes while the caller computes the statistics; :meth:`finish`
    then writes the page and moves the folder into place. :meth:`abort` (any stop before that)
    stops the workers and removes everything written. ``budget_s``: the report's latency budget
    (seconds) marked on every call's latency strip (None: not marked); :meth:`finish` refuses a
    report with another. Made by :func:`start_html_folder`."""

    def __init__(self, folder: Path, calls: Iterable[CallData] | None, runs: list[RunData] | None,
                 background: bool, budget_s: float | None = None) -> None:
        if calls is not None and runs is not None:
            raise ValueError("give calls or runs, not both")
        self.folder, self.parallel = folder.absolute(), False  # fonts: 4 subsets, not worth a pool
        self.budget_s = budget_s
        _check_target(self.folder)
        self.tmp = self.folder.with_name(f".{self.folder.name}.tmp-{os.getpid()}")
        shutil.rmtree(self.tmp, ignore_errors=True)
        try:
            (self.tmp / CALLS).mkdir(parents=True)
            (self.tmp / SEARCH).mkdir()
        except OSError:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        self.instructions, self.briefs = SharedTexts("instr"), SharedTexts("brief")
        self.shards = _Shards(self.tmp / SEARCH)
        self.rows: list[dict[str, Any]] = []
        self.chars: set[str] = set()  # distinct runs of non-ASCII search text (for the embedded fonts)
        self._error: BaseException | None = None
        self._replay = SharedReplay(self.instructions, self.briefs)
        self._thread: threading.Thread | None = None
        if calls is None and runs is None:  # calls come through take() (written while the run is read)
            return
        self._written = (
            _serial_calls(calls, self.tmp / CALLS, self.instructions, self.briefs, budget_s)
            if calls is not None
            else ((c.row, c.search, c.non_ascii)
                  for c in folder_calls(runs or [], self.tmp / CALLS, self.instructions, self.briefs,
                                        ahead=1_000_000 if background else None, budget_s=budget_s))
        )
        if background:
            self._thread = threading.Thread(target=self._consume, name="callbench-report-calls", daemon=True)
            self._thread.start()
        else:
            self._consume()

    @property
    def calls_dir(self) -> Path:
        """Where the call files go (for :meth:`take`'s callers)."""
        return self.tmp / CALLS

    def take(self, done: CallOut) -> None:
        """Add one call whose file was written into :attr:`calls_dir` (in call order)."""
        self._replay.take(done)
        self.chars.update(done.non_ascii)
        self.shards.add(done.search)
        self.rows.append(done.row)

    def while_reading(self) -> CallFiles:
        """What :func:`callbench.report.model.load.load_run` needs to write this folder's call files
        while it reads the run (:data:`~callbench.report.model.load.CallsRequest`): the folder, the
        writer its workers call for each episode (marking this build's budget), and :meth:`take`."""
        return CallFiles(self.calls_dir, partial(write_episode_call, budget_s=self.budget_s), self.take)

    def _consume(self) -> None:
        try:
            for row, entry, non_ascii in self._written:
                self.chars.update(non_ascii)
                self.shards.add(entry)
                self.rows.append(row)
            self.shards.flush()
        except BaseException as e:  # handed to the caller by finish()
            self._error = e

    def finish(self, report: Report, folder: Path, *, reason: str) -> int:
        """Wait for the calls, write the page (``reason`` says on it why it is a folder) and move
        the folder into place at ``folder`` (the one started with, or another: the files move
        there). Returns the number of calls. Raises what writing the calls raised,
        :class:`ReportFolderError` or ``OSError``, and ``ValueError`` when the calls were written
        with a latency budget other than ``report``'s (the strips and the tables would disagree);
        either way nothing is left behind."""
        try:
            budget = report.settings.latency_budget_s
            if self.budget_s is not None and self.budget_s != budget:
                raise ValueError(f"the folder's calls mark a latency budget of {self.budget_s} s but the "
                                 f"report's is {budget} s")
            if self._thread is not None:
                self._thread.join()
            if self._error is not None:
                raise self._error
            self.shards.flush()  # calls given to take() leave the last shard open
            folder = folder.absolute()
            tmp = self.tmp
            if folder != self.folder:  # the report goes elsewhere (a read-only run folder's fallback)
                _check_target(folder)
                tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
                shutil.rmtree(tmp, ignore_errors=True)
                shutil.move(self.tmp, tmp)
                self.tmp = tmp
            page = render_page(
                report,
                self.rows,
                self.instructions.views(),
                self.briefs.views(),
                episode_html=None,
                folder={
                    "calls": CALLS,
                    "search": SEARCH,
                    "shards": self.shards.count,
                    "search_mb": self.shards.bytes / 1e6,
                    "reason": reason,
                    "rows_json": script_json([_row_values(r) for r in self.rows]),
                },
            )
            page = embed_fonts(with_call_view(page), extra_text="".join(sorted(self.chars)),
                               parallel=self.parallel)
            atomic_write_text(tmp / "index.html", page)
            marker = {"written_by": "callbench report", "calls": len(self.rows),
                      "search_files": self.shards.count}
            atomic_write_text(tmp / MARKER, json.dumps(marker, indent=1) + "\n")
            _check_target(folder)  # still ours to replace after the minutes of writing
            _move_into_place(tmp, folder)
        finally:
            self.abort()
        return len(self.rows)

    def abort(self) -> None:
        """Stop writing calls (the workers are stopped) and remove the temporary folder."""
        if self._thread is not None and self._thread.is_alive():
            from callbench.report.model.workers import close_pool

            close_pool(terminate=True)
            self._thread.join(timeout=30)
        shutil.rmtree(self.tmp, ignore_errors=True)


def start_html_folder(
    folder: Path, calls: Iterable[CallData] | None = None, *, runs: list[RunData] | None = None,
    background: bool = False, budget_s: float | None = None,
) -> FolderBuild:
    """Start a folder report at ``folder`` from ``calls`` (read once, one at a time: an iterator of
    :class:`~callbench.report.html.viewer.CallData` in run then plan order, e.g.
    :func:`callbench.report.html.viewer.call_data`) or from ``runs`` (``calls`` None: the runs' calls
    are read and written by the report's worker processes,
    :func:`callbench.report.html.calls.folder_calls`; the same files), or from neither: the calls
    are then written while the run is read (:data:`callbench.report.model.load.CallsRequest`,
    :meth:`FolderBuild.while_reading`) and handed to :meth:`FolderBuild.take`. Only the
    episodes-table row of each call stays in memory. ``budget_s``: the report's latency budget
    (seconds) marked on each call's latency strip, settled before any call is written (None: not
    marked); the report :meth:`FolderBuild.finish` is given must have the same.
    Raises :class:`ReportFolderError` when ``folder`` is a file
    or a folder that is not a callbench report folder, ``OSError`` when it cannot be written."""
    return FolderBuild(folder, calls, runs, background, budget_s)


def write_html_folder(
    report: Report, calls: Iterable[CallData] | None, folder: Path, *, reason: str,
    runs: list[RunData] | None = None,
) -> int:
    """Write the report as a folder (module docstring) from ``calls`` or ``runs``
    (:func:`start_html_folder`) and return the number of calls in it. ``reason`` says on the
    page why it is a folder; each call's latency strip marks the report's budget
    (``report.settings.latency_budget_s``), as the single file's does. Raises
    :class:`ReportFolderError` when ``folder`` is a file or a folder that is not a callbench report
    folder, and ``OSError`` when it cannot be written (nothing is left behind: the temporary folder
    is removed)."""
    build = start_html_folder(folder, calls, runs=runs, budget_s=report.settings.latency_budget_s)
    return build.finish(report, folder, reason=reason)
