"""The one reader of a user's JSON file in generate/ (platform exports, tools files): a BOM is
allowed; a missing file, bytes that are not UTF-8 and invalid JSON are one located line."""

from __future__ import annotations

from pathlib import Path

import pytest

from callbench.generate.json_file import read_json_file


class Bad(ValueError):
    pass


def test_reads_json_with_or_without_a_bom(tmp_path: Path) -> None:
    plain, bom = tmp_path / "a.json", tmp_path / "b.json"
    plain.write_text('{"tools": [1, 2]}', encoding="utf-8")
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert read_json_file(plain, "--tools a.json", Bad) == {"tools": [1, 2]}
    assert read_json_file(bom, "--tools b.json", Bad) == {"tools": [1, 2]}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "--tools x.json: cannot read: No such file or directory"),
        (b"\xff\xfe{}", "--tools x.json: cannot read: 'utf-8' codec can't decode byte 0xff"),
        (b'{\n  "a": 1,\n}', "--tools x.json: not JSON: Expecting property name enclosed in double "
                             "quotes at line 3 column 1"),
    ],
)
def test_errors_are_one_located_line(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "x.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(Bad) as info:
        read_json_file(path, "--tools x.json", Bad)
    text = str(info.value)
    assert text.startswith(message) and "\n" not in text
