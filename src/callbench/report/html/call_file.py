"""One call of the folder report as its files hold it (:mod:`callbench.report.html.folder`): the
call's data script for ``calls/e<n>.js``, its episodes-table row and its search entry for
``search/s<k>.js``, and the audio files it plays (``calls/audio/<sha256>.wav``, the run's WAV
as kept, the line's output and the clean synthesis: no maintained compressor is among the
dependencies, and an 8 kHz-band caller turn is tens of kilobytes a second). Pure functions of
one call, so the report's worker processes run them (:mod:`callbench.report.html.calls`) as well
as the folder writer itself; :func:`copy_audio` writes the audio files."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from pathlib import Path
from typing import Any, NamedTuple

from callbench.report.html.call_script import call_record, json_source, search_text
from callbench.report.html.viewer import CallData, SharedTexts, episode_row, episode_view

AUDIO_DIR = "audio"
"""The folder report's audio files, inside its calls folder."""
AUDIO_SRC = "calls/" + AUDIO_DIR + "/{sha256}.wav"
"""A turn's audio as the page (``index.html``, which holds every built call) refers to it."""

_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


def non_ascii_runs(text: str) -> list[str]:
    """The distinct runs of non-ASCII characters in ``text`` (what the embedded fonts look at)."""
    return [] if text.isascii() else list(set(_NON_ASCII.findall(text)))


def js_value(value: Any) -> str:
    """``value`` as a JavaScript literal for a ``.js`` file loaded by ``<script src>`` (JSON; no
    HTML parser reads the file, so ``<`` stays as is), with ``://`` written ``:\\/\\/`` so the
    folder holds no URL text either."""
    return json.dumps(value, ensure_ascii=False).replace("://", ":\\/\\/")


class CallFile(NamedTuple):
    """One call of the folder report, ready to write: its ``anchor`` (``e<n>``), ``script`` (the
    text of ``calls/e<n>.js``), ``row`` (its :func:`~callbench.report.html.viewer.episode_row`) and
    ``search`` (its searchable text for ``search/s<k>.js``) and ``audio``: the audio files its
    turns play, as ``(file name in calls/audio, cached WAV path)``."""

    anchor: str
    script: str
    row: dict[str, Any]
    search: str
    audio: tuple[tuple[str, str], ...] = ()


def copy_audio(calls_dir: Path | str, files: tuple[tuple[str, str], ...]) -> None:
    """Copy each ``(name, source)`` of :attr:`CallFile.audio` to ``calls_dir/audio/name`` unless
    it is there already (a file is named by its content's SHA-256, so one already there is the
    same); through a temporary name, so a worker copying the same file at once never leaves a
    partial one. Raises ``OSError`` when a file cannot be read or written."""
    if not files:
        return
    folder = Path(calls_dir) / AUDIO_DIR
    folder.mkdir(exist_ok=True)
    for name, source in files:
        dest = folder / name
        if dest.exists():
            continue
        tmp = folder / f".{name}.{os.getpid()}.{threading.get_ident()}.tmp"
        shutil.copyfile(source, tmp)
        os.replace(tmp, dest)


def call_file(
    call: CallData, n: int, instructions: SharedTexts, briefs: SharedTexts, *, budget_s: float | None = None
) -> CallFile:
    """Everything the folder report does for the ``n``-th call but writing it: its view
    (:func:`~callbench.report.html.viewer.episode_view`, JSON held as compact text,
    :func:`~callbench.report.html.call_script.json_source`), its data as ``callbenchCall("e<n>",
    {...});``, its table row and its search text. Adds the call's operating instructions and
    caller brief to ``instructions`` and ``briefs``; the links it makes to them are content-hash
    anchors (``instr-<sha256 prefix>``), the same whatever :class:`SharedTexts` is passed, so a
    worker process may use its own and the page's blocks be gathered in call order after. A turn
    whose audio was found plays ``calls/audio/<sha256>.wav`` (:data:`AUDIO_SRC`; the caller copies
    :attr:`CallFile.audio` there with :func:`copy_audio`). ``budget_s``: the report's latency
    budget (seconds) marked on the call's latency strip (None: not marked). Writes no file (it
    only checks the audio files' hashes); raises nothing for any :class:`CallData` the loader gives."""
    view = episode_view(call, n, instructions, briefs, json_text=json_source, budget_s=budget_s)
    audio: dict[str, str] = {}
    for turn in view["caller_turns"]:
        for a in turn["audio"] or []:
            if a["file"] is not None:
                a["src"] = AUDIO_SRC.format(sha256=a["sha256"])
                audio.setdefault(f"{a['sha256']}.wav", a["file"])
    record = call_record(view)
    anchor = view["anchor"]
    return CallFile(
        anchor, f'callbenchCall("{anchor}", {js_value(record)});\n', episode_row(view), search_text(record),
        tuple(audio.items()),
    )


class SearchEntry(NamedTuple):
    """One call's search text as a shard holds it: ``"<anchor>": <text as a JS string>`` and the
    text's size in UTF-8 bytes. Made by :meth:`of` (in a worker for a large report)."""

    item: str
    size: int

    @classmethod
    def of(cls, anchor: str, text: str) -> SearchEntry:
        return cls(f"{js_value(anchor)}: {js_value(text)}", len(text.encode()))
