"""One call of the folder report as its files hold it (:mod:`callbench.report.html.folder`): the
call's data script for ``calls/e<n>.js``, its episodes-table row and its search entry for
``search/s<k>.js``. Pure functions of one call, so the report's worker processes run them
(:mod:`callbench.report.html.calls`) as well as the folder writer itself."""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

from callbench.report.html.call_script import call_record, json_source, search_text
from callbench.report.html.viewer import CallData, SharedTexts, episode_row, episode_view

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
    ``search`` (its searchable text for ``search/s<k>.js``)."""

    anchor: str
    script: str
    row: dict[str, Any]
    search: str


def call_file(call: CallData, n: int, instructions: SharedTexts, briefs: SharedTexts) -> CallFile:
    """Everything the folder report does for the ``n``-th call but writing it: its view
    (:func:`~callbench.report.html.viewer.episode_view`, JSON held as compact text,
    :func:`~callbench.report.html.call_script.json_source`), its data as ``callbenchCall("e<n>",
    {...});``, its table row and its search text. Adds the call's operating instructions and
    caller brief to ``instructions`` and ``briefs``; the links it makes to them are content-hash
    anchors (``instr-<sha256 prefix>``), the same whatever :class:`SharedTexts` is passed, so a
    worker process may use its own and the page's blocks be gathered in call order after. Reads
    and writes no file; raises nothing for any :class:`CallData` the loader gives."""
    view = episode_view(call, n, instructions, briefs, json_text=json_source)
    record = call_record(view)
    anchor = view["anchor"]
    return CallFile(
        anchor, f'callbenchCall("{anchor}", {js_value(record)});\n', episode_row(view), search_text(record)
    )


class SearchEntry(NamedTuple):
    """One call's search text as a shard holds it: ``"<anchor>": <text as a JS string>`` and the
    text's size in UTF-8 bytes. Made by :meth:`of` (in a worker for a large report)."""

    item: str
    size: int

    @classmethod
    def of(cls, anchor: str, text: str) -> SearchEntry:
        return cls(f"{js_value(anchor)}: {js_value(text)}", len(text.encode()))
