"""The HTML report as a folder: layout, escaping, search files, atomic
replacement, and the CLI's choice between one file and a folder."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import callbench.report.html.folder as html_folder
from callbench.cli import app
from callbench.report.html.call_file import call_file
from callbench.report.html.folder import MARKER, ReportFolderError, write_html_folder
from callbench.report.html.viewer import CallData, SharedTexts, call_count, call_data
from callbench.report.model.build import build_report
from callbench.report.model.load import load_runs

MakeRun = Callable[..., Path]
HOSTILE = 'Booked <script>alert("x")</script> </script><!-- see https://evil.example/ & Tamil தமிழ்'


def calls_of(folder: Path) -> dict[str, Any]:
    """anchor -> the call's data, read back from the call files as the browser would evaluate them."""
    out = {}
    for f in (folder / "calls").glob("*.js"):
        m = re.fullmatch(r'callbenchCall\("(e\d+)", (\{.*\})\);\n', f.read_text(encoding="utf-8"), re.S)
        assert m, f
        out[m.group(1)] = json.loads(m.group(2).replace(":\\/\\/", "://"))
    return out


def search_of(folder: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    files = sorted((folder / "search").glob("s*.js"), key=lambda p: int(p.stem[1:]))
    for k, f in enumerate(files):
        m = re.fullmatch(r"callbenchSearch\((\d+), (\{.*\})\);\n", f.read_text(encoding="utf-8"), re.S)
        assert m and int(m.group(1)) == k, f
        out.update(json.loads(m.group(2)))
    return out


@pytest.fixture
def run(make_run: MakeRun) -> Path:
    return make_run(reply=lambda c, a, s, r: HOSTILE if (a, s, r) == (1, 1, 0) else "Booked. Goodbye.")


def test_folder_layout_rows_calls_and_search(run: Path, tmp_path: Path) -> None:
    runs = load_runs([run], None)
    report = build_report(runs, n_samples=20)
    out = tmp_path / "rep"
    n = write_html_folder(report, call_data(runs), out, reason="asked for")
    episodes = sorted(p.stem for p in (run / "traces").glob("*.json"))
    assert n == len(episodes) == 24 == call_count(runs)
    index = (out / "index.html").read_text(encoding="utf-8")
    # the page holds one data row per call and no call markup
    rows = json.loads(
        re.search(r'<script type="application/json" id="episode-rows">(.*?)</script>', index, re.S)
        .group(1)  # type: ignore[union-attr]
        .replace("\\u003c", "<")
        .replace("\\u003e", ">")
        .replace("\\u0026", "&")
    )
    assert sorted(r[0] for r in rows) == sorted(f"e{i}" for i in range(n))
    assert sorted(r[1] + "__" + r[2] + "__" + r[3] + "__r" + str(r[4]) for r in rows) == episodes
    assert '<details class="episode"' not in index and 'data-calls="calls/"' in index
    assert "asked for" in index and 'id="folder-note"' in index
    # every call has its file, holding its own data (no markup); hostile text is held as data,
    # never as markup (the viewer script puts it in with textContent: test_browser_equivalence.py)
    calls = calls_of(out)
    assert sorted(calls) == sorted(r[0] for r in rows)
    for anchor, data in calls.items():
        assert data["anchor"] == anchor and data["messages"][0]["index"] == 0
        assert "<details" not in (out / "calls" / f"{anchor}.js").read_text(encoding="utf-8")
    hostile = [d for d in calls.values() if any(m.get("content") == HOSTILE for m in d["messages"])]
    assert len(hostile) == 2 and hostile[0]["messages"][4]["content"] == ['{"status": "ok"}']
    assert hostile[0]["tool_events"][0]["result"] == ['{"status": "ok"}']
    # no URL text anywhere in the folder
    for f in out.rglob("*"):
        if f.is_file():
            assert "://" not in f.read_text(encoding="utf-8"), f
    # search text: each call's shown strings
    texts = search_of(out)
    assert texts.keys() == calls.keys()
    found = [a for a, t in texts.items() if 'alert("x")' in t]  # one call per candidate
    assert len(found) == 2 and "https&#58;//" not in texts[found[0]] and "https://evil" in texts[found[0]]
    assert all("<td" not in t for t in texts.values())
    # the Tamil text of the call files is drawn by the embedded font
    assert 'id="embedded-fonts"' in index and "Noto Sans Tamil" in index
    assert json.loads((out / MARKER).read_text())["calls"] == n


def test_search_text_holds_what_the_call_shows(run: Path) -> None:
    runs = load_runs([run], None)
    call = next(c for c in call_data(runs) if c.trace and c.trace.messages[5].content == HOSTILE)
    done = call_file(call, 3, SharedTexts("instr"), SharedTexts("brief"))
    text = done.search
    assert (
        done.anchor == "e3" and done.row["anchor"] == "e3" and done.script.startswith('callbenchCall("e3", {')
    )
    rec = call.record
    for shown in (f"{rec.candidate} {rec.agent_id} {rec.scenario_id} repeat {rec.repeat}", rec.episode_id,
                  "Hello, how can I help?", "I want to book", HOSTILE, '{"day": "monday"}',
                  '{"status": "ok"}', "book c1", "drop authored a table dropped", "book called once",
                  "speakable", "overall"):  # fmt: skip
        assert shown in text, shown
    assert "  " not in text and "\n" not in text and "cited tool events" not in text


def test_search_files_split_by_size(run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(html_folder, "SHARD_BYTES", 3_000)
    runs = load_runs([run], None)
    out = tmp_path / "rep"
    write_html_folder(build_report(runs, n_samples=20), call_data(runs), out, reason="r")
    files = list((out / "search").glob("*.js"))
    assert len(files) > 3
    assert len(search_of(out)) == 24
    assert f'data-search-shards="{len(files)}"' in (out / "index.html").read_text(encoding="utf-8")


def test_replaces_only_a_report_folder_and_leaves_nothing_on_failure(run: Path, tmp_path: Path) -> None:
    runs = load_runs([run], None)
    report = build_report(runs, n_samples=20)
    out = tmp_path / "rep"
    write_html_folder(report, call_data(runs), out, reason="r")
    (out / "calls" / "stale.js").write_text("old")
    write_html_folder(report, call_data(runs), out, reason="r")  # an earlier report is replaced whole
    assert not (out / "calls" / "stale.js").exists() and len(list((out / "calls").iterdir())) == 24

    def failing() -> Iterator[CallData]:
        yield from list(call_data(runs))[:5]
        raise OSError(28, "No space left on device")

    before = sorted(p.name for p in out.rglob("*"))
    with pytest.raises(OSError):
        write_html_folder(report, failing(), out, reason="r")
    assert sorted(p.name for p in out.rglob("*")) == before  # the earlier report is untouched
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left
    # never replaces a folder that is not a report folder, nor a file
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(ReportFolderError, match=r"mine: a folder that is not a callbench report folder"):
        write_html_folder(report, call_data(runs), mine, reason="r")
    assert (mine / "notes.txt").read_text() == "keep" and len(list(mine.iterdir())) == 1
    (mine / "report-folder.json").write_text("{}")  # a marker this command did not write
    with pytest.raises(ReportFolderError, match=r"mine: a folder that is not a callbench report folder"):
        write_html_folder(report, call_data(runs), mine, reason="r")
    assert (mine / "notes.txt").read_text() == "keep"
    (out / "notes.txt").write_text("mine")  # a user's file put into an earlier report folder
    with pytest.raises(ReportFolderError, match=r"rep: a report folder that also holds .*\(notes\.txt\)"):
        write_html_folder(report, call_data(runs), out, reason="r")
    assert (out / "notes.txt").read_text() == "mine" and (out / "index.html").is_file()
    (tmp_path / "f.html").write_text("x")
    with pytest.raises(ReportFolderError, match="exists and is not a folder"):
        write_html_folder(report, call_data(runs), tmp_path / "f.html", reason="r")


def test_cli_writes_one_file_up_to_the_limit_then_a_folder(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = CliRunner()
    small = cli.invoke(app, ["report", str(run), "--html", str(tmp_path / "a.html"), "--samples", "20"])
    assert small.exit_code == 0, small.output
    assert (tmp_path / "a.html").is_file() and '<details class="episode"' in (tmp_path / "a.html").read_text()
    monkeypatch.setattr(html_folder, "SINGLE_FILE_MAX_CALLS", 23)  # 24 calls: one more than a file holds
    big = cli.invoke(app, ["report", str(run), "--html", str(tmp_path / "b.html"), "--samples", "20"])
    assert big.exit_code == 0, big.output
    assert not (tmp_path / "b.html").exists() and (tmp_path / "b" / "index.html").is_file()
    assert "24 calls, more than the 23 one file holds" in big.output
    assert (tmp_path / "b" / "index.html").as_uri() in big.output.replace("\n", "")
    default = cli.invoke(app, ["report", str(run), "--samples", "20"])
    assert default.exit_code == 0 and (run / "report" / "index.html").is_file()
    assert len(list((run / "report" / "calls").iterdir())) == 24


def test_cli_html_folder_option(run: Path, tmp_path: Path) -> None:
    cli = CliRunner()
    done = cli.invoke(app, ["report", str(run), "--html-folder", str(tmp_path / "f"), "--samples", "20"])
    assert done.exit_code == 0, done.output
    assert len(list((tmp_path / "f" / "calls").iterdir())) == 24
    assert "asked for with --html-folder" in (tmp_path / "f" / "index.html").read_text(encoding="utf-8")
    for extra in (["--html", str(tmp_path / "x.html")], ["--no-traces"], ["--no-html"]):
        bad = cli.invoke(app, ["report", str(run), "--html-folder", str(tmp_path / "g"), *extra])
        assert bad.exit_code == 2 and f"--html-folder and {extra[0]} cannot be used together" in bad.output
        assert not (tmp_path / "g").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "keep.txt").write_text("x")
    bad = cli.invoke(app, ["report", str(run), "--html-folder", str(tmp_path / "mine"), "--samples", "20"])
    assert bad.exit_code == 2 and "not a callbench report folder" in bad.output
    assert "Traceback" not in bad.output
    owned = cli.invoke(app, ["report", str(run), "--html-folder", str(run / "traces"), "--samples", "20"])
    assert owned.exit_code == 2 and "would overwrite the saved data of run" in owned.output


def test_call_count_matches_the_calls_written(make_run: MakeRun, tmp_path: Path) -> None:
    run = make_run(not_run=lambda c, a, s, r: a == 0, skip=lambda c, a, s, r: (a, s) == (1, 0))
    runs = load_runs([run], None)
    assert call_count(runs) == len(list(call_data(runs))) == 16  # 8 planned episodes never ran
    n = write_html_folder(build_report(runs, n_samples=20), call_data(runs), tmp_path / "f", reason="r")
    assert n == 16 and len(list((tmp_path / "f" / "calls").iterdir())) == 16


def test_a_search_shard_is_the_json_object_of_its_calls(tmp_path: Path) -> None:
    import json

    from callbench.report.html.call_file import SearchEntry, js_value
    from callbench.report.html.folder import _Shards

    texts = {"e0": 'plain "quoted" \\ text', "e1": "https://example.org/x </script> नमस्ते", "e2": ""}
    shards = _Shards(tmp_path)
    for anchor, text in texts.items():
        shards.add(SearchEntry.of(anchor, text))
    shards.flush()
    body = (tmp_path / "s0.js").read_text(encoding="utf-8")
    assert body == f"callbenchSearch(0, {js_value(texts)});\n"
    assert "://" not in body
    inner = body[len("callbenchSearch(0, "):-len(");\n")]
    assert json.loads(inner) == texts
