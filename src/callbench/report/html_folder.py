"""The HTML report as a folder, for runs too large for one file (issue 27 item 2).

Layout (every file offline, every link relative, so it opens from ``file://`` with no server)::

    DIR/index.html          every table and figure, one episodes-table row per call, the shared
                            instruction and brief blocks, the viewer script and the fonts
    DIR/calls/e<n>.js       one call: ``callbenchCall("e<n>", "<details ...>...</details>")``
    DIR/search/s<k>.js      the calls' text for the search box, about SHARD_BYTES each:
                            ``callbenchSearch(<k>, {"e<n>": "text", ...})``
    DIR/report-folder.json  what wrote the folder (it marks the folder as a report's, so a later
                            report may replace it; nothing else is ever replaced)

Browsers block ``fetch()`` of ``file://`` URLs, but not ``<script src>`` of a file beside the
page: the viewer script (``templates/report.js``) adds a ``<script>`` element for a call's file
when the call is opened (a row, a score-matrix tile, a link or the URL's ``#e<n>``), and for the
search files on the first search. Call markup is rendered in Python by the same autoescaping
template as the single file (:func:`callbench.report.html.render_episode`) and stored as a JSON
string (:func:`js_value`) in a file no HTML parser reads.

The folder is written whole into a temporary sibling, then renamed into place; an earlier report
folder at the same path is moved aside first and deleted after (the one moment between the two
renames has no folder at the path).
"""

from __future__ import annotations

import html as htmllib
import json
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from callbench.report.build import Report
from callbench.report.html import embed_fonts, render_episode, render_page, script_json
from callbench.report.viewer import CallData, SharedTexts, episode_row, episode_view
from callbench.trace import atomic_write_text

SINGLE_FILE_MAX_CALLS = 250
"""Calls up to which ``callbench report`` writes one HTML file; beyond it, a folder. Measured with
starter-shaped calls (``benchmarks/html_bench.py``, 2 cores at load average 11): 250 calls make
an 8.7 MB file that opens in Chromium in 2.0 s, within the 3 s asked of the folder's first page;
500 calls 15.4 MB in 3.7 s; 1,000 calls 28.6 MB in 7.3 s (issue 27: 1,500 calls, 27.5 MB, 12 s)."""

SHARD_BYTES = 2_000_000
"""Search text per ``search/s<k>.js`` file, in UTF-8 bytes (a file closes once it passes this)."""

MARKER = "report-folder.json"
CALLS = "calls/"
SEARCH = "search/"
_REPORT_ENTRIES = frozenset({"index.html", MARKER, CALLS.rstrip("/"), SEARCH.rstrip("/")})
"""What a folder report holds at its top level (anything else there is not ours to delete)."""
_TAG = re.compile(r"<[^>]*>")


class ReportFolderError(Exception):
    """The folder report cannot be written to the path asked for; the message names it."""


def search_text(markup: str) -> str:
    """A call's searchable text: its markup's text content (tags dropped, entities decoded), as
    the single file's search reads ``textContent``, with runs of whitespace made one space."""
    return " ".join(htmllib.unescape(_TAG.sub("", markup)).split())


def js_value(value: Any) -> str:
    """``value`` as a JavaScript literal for a ``.js`` file loaded by ``<script src>`` (JSON; no
    HTML parser reads the file, so ``<`` stays as is), with ``://`` written ``:\\/\\/`` so the
    folder holds no URL text either."""
    return json.dumps(value, ensure_ascii=False).replace("://", ":\\/\\/")


def _call_script(anchor: str, markup: str) -> str:
    return f'callbenchCall("{anchor}", {js_value(markup)});\n'


def _row_values(row: dict[str, Any]) -> list[Any]:
    """A table row as the viewer script reads it (``templates/report.js``, folder report)."""
    keys = ("anchor", "candidate", "agent_id", "scenario_id", "repeat", "language", "difficulty", "status",
            "end_reason", "tool_calls", "overall", "verdict")
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
    """Search text written as it comes, ``SHARD_BYTES`` per file."""

    def __init__(self, root: Path) -> None:
        self.root, self.count, self.bytes = root, 0, 0
        self._buf: dict[str, str] = {}
        self._size = 0

    def add(self, anchor: str, text: str) -> None:
        self._buf[anchor] = text
        self._size += len(text.encode())
        if self._size >= SHARD_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self._buf:
            return
        body = f"callbenchSearch({self.count}, {js_value(self._buf)});\n"
        (self.root / f"s{self.count}.js").write_text(body, encoding="utf-8")
        self.bytes += len(body.encode())
        self.count += 1
        self._buf, self._size = {}, 0


def write_html_folder(report: Report, calls: Iterable[CallData], folder: Path, *, reason: str) -> int:
    """Write the report as a folder (module docstring) and return the number of calls in it.

    ``calls`` is read once, one call at a time (:func:`callbench.report.viewer.call_data` or any
    iterator of :class:`~callbench.report.viewer.CallData` in run then plan order); only the
    episodes-table row of each call stays in memory. ``reason`` says on the page why it is a
    folder. Raises :class:`ReportFolderError` when ``folder`` is a file or a folder that is not a
    callbench report folder, and ``OSError`` when it cannot be written (nothing is left behind:
    the temporary folder is removed)."""
    folder = folder.absolute()
    _check_target(folder)
    tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        (tmp / CALLS).mkdir(parents=True)
        (tmp / SEARCH).mkdir()
        instructions, briefs = SharedTexts("instr"), SharedTexts("brief")
        shards = _Shards(tmp / SEARCH)
        rows: list[dict[str, Any]] = []
        chars: set[str] = set()
        for n, call in enumerate(calls):
            view = episode_view(call, n, instructions, briefs)
            markup = str(render_episode(view))
            (tmp / CALLS / f"{view['anchor']}.js").write_text(_call_script(view["anchor"], markup), "utf-8")
            text = search_text(markup)
            chars.update(text)
            shards.add(view["anchor"], text)
            rows.append(episode_row(view))
        shards.flush()
        page = render_page(
            report,
            rows,
            instructions.views(),
            briefs.views(),
            episode_html=None,
            folder={
                "calls": CALLS,
                "search": SEARCH,
                "shards": shards.count,
                "search_mb": shards.bytes / 1e6,
                "reason": reason,
                "rows_json": script_json([_row_values(r) for r in rows]),
            },
        )
        atomic_write_text(tmp / "index.html", embed_fonts(page, extra_text="".join(sorted(chars))))
        marker = {"written_by": "callbench report", "calls": len(rows), "search_files": shards.count}
        atomic_write_text(tmp / MARKER, json.dumps(marker, indent=1) + "\n")
        _check_target(folder)  # still ours to replace after the minutes of writing
        _move_into_place(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return len(rows)
