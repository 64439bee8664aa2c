"""Terminal output that fits the console's width without breaking a word.

Two rules for every report printed to a terminal, 80 columns and up:

* **Text** wraps at spaces only (:func:`print_wrapped`): a word, id or path is never cut, and a token
  longer than the width (a long path) goes whole on a line of its own. Continuation lines are
  indented so a wrapped item still reads as one.
* **Tables** print as tables when every column fits its longest word (rich's minimum
  measurement); otherwise :func:`print_table` prints them *stacked*: the title, then for each row
  its first cell (the row label) as a heading and one ``column: value`` line per other column.
  A stacked table loses nothing, keeps every row label, and breaks no header into fragments.
"""

from __future__ import annotations

import io
import re
import shutil
import textwrap

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text


def wrap_words(text: str, width: int, *, indent: str = "", hang: str = "    ") -> list[str]:
    """``text`` (plain, one paragraph per line) wrapped at spaces to ``width`` cells: first lines
    of paragraphs start with ``indent``, continuation lines with ``indent + hang``. Words are never
    broken; a word longer than the width stands alone on its line."""
    out: list[str] = []
    for para in text.split("\n"):
        lead = indent + (para[: len(para) - len(para.lstrip(" "))])
        body = para.strip(" ")
        if not body:
            out.append("")
            continue
        out += textwrap.wrap(body, width=max(20, width), initial_indent=lead, subsequent_indent=lead + hang,
                             break_long_words=False, break_on_hyphens=False) or [lead]
    return out


def terminal_width() -> int:
    """The terminal's width in columns (``COLUMNS`` when set; 80 when unknown, e.g. a pipe)."""
    return shutil.get_terminal_size((80, 24)).columns


def echo_wrapped(text: str, *, hang: str = "    ") -> list[str]:
    """``text`` as the lines to echo to the terminal, wrapped at spaces (:func:`wrap_words`)."""
    return wrap_words(text, terminal_width(), hang=hang)


def labelled_path(label: str, path: str) -> list[str]:
    """``label`` and ``path`` on one line when they fit the terminal, else the path on a line of
    its own, indented, so a terminal never breaks it mid-word."""
    one = f"{label} {path}"
    return [one] if len(one) <= terminal_width() else [label, f"  {path}"]


def print_wrapped(console: Console, text: str, *, style: str | None = None, hang: str = "    ") -> None:
    """Print plain ``text`` (not markup) wrapped by :func:`wrap_words` at the console's width."""
    for line in wrap_words(text, console.width, hang=hang):
        console.print(escape(line), style=style, soft_wrap=True, highlight=False)


_SEPARATORS = re.compile(r"[\s\u2500-\u257f]+")  # whitespace and box-drawing characters


def words(text: str) -> set[str]:
    """The words of rendered text: split at whitespace and box-drawing characters."""
    return {w for w in _SEPARATORS.split(text) if w}


def _render(console: Console, table: Table, width: int) -> str:
    scratch = Console(width=width, file=io.StringIO(), color_system=None, emoji=False,
                      legacy_windows=False, force_terminal=False)
    scratch.print(table)
    out = scratch.file.getvalue()  # type: ignore[attr-defined]
    return str(out)


def table_fits(console: Console, table: Table) -> bool:
    """True when ``table`` printed at the console's width breaks no word of a cell or header: every
    word of it is a word of the same table printed with unlimited width. (Rich's own minimum
    measurement cannot say so for columns that fold, whose minimum is one character.)"""
    if Measurement.get(console, console.options, table).minimum > console.width:
        return False
    return words(_render(console, table, console.width)) <= words(_render(console, table, 100_000))


def _plain(cell: object) -> Text:
    if isinstance(cell, Text):
        return cell
    return Text.from_markup(str(cell)) if isinstance(cell, str) else Text(str(cell))


def print_table(console: Console, table: Table) -> None:
    """Print ``table``; stacked (module docstring) when it does not fit the console's width."""
    if table_fits(console, table):
        console.print(table)
        return
    if table.title:
        console.print(Text.from_markup(str(table.title), style="italic"))
    columns = table.columns
    rows = [list(c.cells) for c in columns]
    for i in range(table.row_count):
        label = _plain(rows[0][i]).copy()
        label.stylize("bold")
        console.print(label)
        for col, cells in zip(columns[1:], rows[1:], strict=True):
            value = _plain(cells[i])
            if not value.plain.strip():
                continue
            header = _plain(col.header).plain.replace("\n", " ")
            console.print(Padding(Text.assemble(f"{header}: ", value), (0, 0, 0, 2)))
