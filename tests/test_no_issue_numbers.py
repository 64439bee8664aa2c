"""No source, test or document of the repository cites a tracker number.

Comments, docstrings and documents give the reason itself, or name a section of
``docs/decisions.md`` by its heading: a reader outside the team cannot look a tracker number up
(docs/decisions.md and the developers' standards). The search is the same one a reviewer runs
with ``git grep -i -E`` over ``src``, ``tests``, ``docs``, ``benchmarks``, ``examples``, ``.ci`` and
``README.md``, done here in Python so it needs no git checkout: every text file, case-insensitive,
one failure line per hit as ``path:line: text``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEARCHED = ("src", "tests", "docs", "benchmarks", "examples", ".ci", "README.md")
SKIPPED_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "node_modules"})

# The word, an optional plural "s", an optional space and "#", then digits. Spelled with
# character classes so that this file's own text does not match it.
CITATION = re.compile(r"[i][s][s][u][e][s]? ?#?[0-9]+", re.IGNORECASE)


def _text_files() -> list[Path]:
    """Every file under :data:`SEARCHED` that decodes as UTF-8 text, build caches left out."""
    out: list[Path] = []
    for name in SEARCHED:
        top = ROOT / name
        if top.is_file():
            out.append(top)
            continue
        if not top.is_dir():
            continue
        for path in sorted(top.rglob("*")):
            if not path.is_file() or any(part in SKIPPED_DIRS or part.endswith(".egg-info")
                                         for part in path.relative_to(ROOT).parts):
                continue
            out.append(path)
    return out


def citations(text: str) -> list[tuple[int, str]]:
    """(1-based line number, stripped line) of each line of ``text`` that cites a tracker number."""
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), start=1) if CITATION.search(line)]


def test_the_pattern_finds_what_it_is_meant_to_find() -> None:
    word = "Iss" + "ue"
    text = f"a\n# {word} 27 item 5: why\n({word.lower()}s 12 and 17)\n{word} #7\nissuer 5 tissue\n"
    assert citations(text) == [(2, f"# {word} 27 item 5: why"), (3, f"({word.lower()}s 12 and 17)"),
                               (4, f"{word} #7")]


def test_no_file_cites_a_tracker_number() -> None:
    files = _text_files()
    assert len(files) > 100, f"searched only {len(files)} files under {ROOT}: wrong root?"
    hits: list[str] = []
    for path in files:
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        rel = path.relative_to(ROOT).as_posix()
        hits.extend(f"{rel}:{n}: {line[:160]}" for n, line in citations(text))
    assert not hits, ("cite the reason itself or a docs/decisions.md heading, not a tracker number:\n"
                      + "\n".join(hits))
