"""The folder HTML report at 10,000 synthetic calls in a real browser: it opens
from ``file://`` with no server; filters, sort, search and the score matrix work; opening a call
loads its file and shows its transcript; no request leaves the folder.

The run folder is written with the report tests' contracts (``conftest.make_trace`` and
``make_grade``: 4 candidates x 25 agents x 50 scenarios x 2 repeats), loaded by the report's
loader and written through the real writer (:func:`callbench.report.html.folder.write_html_folder`
over :func:`callbench.report.html.viewer.call_data`). Open times are measured in ``benchmarks/html_bench.py``,
not here. Skipped when playwright or chromium is missing.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from callbench.grade.models import GradeSetManifest
from callbench.report.html.folder import write_html_folder
from callbench.report.html.viewer import call_data
from callbench.report.model.build import build_report
from callbench.report.model.load import load_runs
from callbench.runfolder.manifest import EpisodeKey, RunManifest
from callbench.trace import RoleInfo

from .conftest import DIFFS, LANGS, make_grade, make_trace

sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip("no chromium installed (apt-get install chromium)", allow_module_level=True)
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
CANDS, AGENTS, SCENARIOS, REPEATS = ("cand-a", "cand-b", "cand-c", "cand-d"), 25, 50, 2
N = len(CANDS) * AGENTS * SCENARIOS * REPEATS
NEEDLE_AT = ("cand-c", 17, 33, 1)  # the one call whose reply holds the search word
NEEDLE = "quokka"


def synthetic_run(run_dir: Path) -> Path:
    """Write a 10,000-call run folder (the report loader's layout; plain writes, no fsync)."""
    caller, gs = RoleInfo(spec="scripted:caller"), "gs1"
    (run_dir / "traces").mkdir(parents=True)
    (run_dir / "grades" / gs / "episodes").mkdir(parents=True)
    planned = []
    for ci, cand in enumerate(CANDS):
        for a in range(AGENTS):
            for s in range(SCENARIOS):
                for r in range(REPEATS):
                    eid = f"{cand}__ag{a}__sc{s}__r{r}"
                    planned.append(EpisodeKey(episode_id=eid, candidate=cand, agent_id=f"ag{a}",
                                              scenario_id=f"sc{s}", repeat=r))  # fmt: skip
                    reply = f"Booked, {NEEDLE} noted." if (cand, a, s, r) == NEEDLE_AT else "Booked. Goodbye."
                    trace = make_trace(eid, RoleInfo(spec=cand), caller, f"ag{a}", f"sc{s}", r,
                                       bundle_hash="b" * 64, lang=LANGS[a % 3], diff=DIFFS[s % 2],
                                       reply=reply, skipped=False,
                                       caller_prompt="You are a caller.")  # fmt: skip
                    (run_dir / "traces" / f"{eid}.json").write_text(trace.canonical_json() + "\n", "utf-8")
                    score = (37 * a + 11 * s + 23 * ci + 5 * r) % 101
                    grade = make_grade(trace, cand, gs, score, score, 70.0)
                    (run_dir / "grades" / gs / "episodes" / f"{eid}.json").write_text(grade.model_dump_json())
    judge = RoleInfo(spec="scripted:judge")
    manifest = RunManifest(
        run_id="r1", bundle_name="synthetic", bundle_version="1", bundle_hash="b" * 64, bundle_path="x",
        callbench_version="0.1.0", git_commit="abc", git_dirty=False,
        candidates=[RoleInfo(spec=c) for c in CANDS], caller=caller, task_judge=judge,
        conversation_judge=judge, seed=7, repeats=REPEATS, planned=planned,
        started="2026-01-01T00:00:00Z", grade_sets=[gs],
    )  # fmt: skip
    (run_dir / "manifest.json").write_text(manifest.model_dump_json())
    gsm = GradeSetManifest(grade_set_id=gs, created="2026-01-01T00:00:00Z", task_judge=judge,
                           conversation_judge=judge, cutoff=70.0)  # fmt: skip
    (run_dir / "grades" / gs / "grade_set.json").write_text(gsm.model_dump_json())
    return run_dir


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("folder")
    runs = load_runs([synthetic_run(root / "run")])
    out = root / "report"
    assert write_html_folder(build_report(runs, n_samples=20), call_data(runs), out, reason="test") == N
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def listed(page: Any) -> list[dict[str, str]]:
    return page.evaluate(
        "Array.from(document.querySelectorAll('#episode-table tbody tr'))"
        ".map(r => Object.assign({}, r.dataset, {overall: r.cells[9].getAttribute('data-v'),"
        " scenario: r.cells[2].textContent}))"
    )


@pytest.mark.slow  # writing a 10,000-call folder and loading it in Chromium: about 16 s idle
def test_folder_report_of_10000_calls_in_chromium(browser: Any, folder: Path) -> None:
    index = folder / "index.html"
    assert index.stat().st_size < 20_000_000
    assert len(list((folder / "calls").iterdir())) == N
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(index.as_uri(), wait_until="load")
    count = page.text_content("#episode-count")
    assert count == f"{N} of {N} episodes shown (the first 200 listed)"
    assert len(listed(page)) == 200
    # "list more" adds the next 200
    page.click("#episode-more")
    assert len(listed(page)) == 400
    # filters: candidate and language; every matching call counted, the listed rows all match
    page.select_option("#filter-candidate", "cand-b")
    page.select_option("#filter-language", "ta")
    per = N // len(CANDS) // AGENTS * len([a for a in range(AGENTS) if LANGS[a % 3] == "ta"])
    assert page.text_content("#episode-count") == f"{per} of {N} episodes shown (the first 200 listed)"
    rows = listed(page)
    assert len(rows) == 200 and all(r["candidate"] == "cand-b" and r["language"] == "ta" for r in rows)
    # sort by overall, ascending then descending, over every matching call (not only those listed)
    page.click("#episode-table thead th:nth-child(10) button")
    asc = [float(r["overall"]) for r in listed(page)]
    assert asc == sorted(asc) and asc[0] == 0.0
    page.click("#episode-table thead th:nth-child(10) button")
    desc = [float(r["overall"]) for r in listed(page)]
    assert desc == sorted(desc, reverse=True) and desc[0] == 100.0
    # search: a word in one call's transcript; the first search loads the search files
    page.click("#episode-reset")
    page.fill("#episode-search", NEEDLE)
    page.wait_for_function("document.getElementById('episode-count').textContent.startsWith('1 of')")
    rows = listed(page)
    cand, a, s, r = NEEDLE_AT
    assert [(x["candidate"], x["agent"], x["scenario"]) for x in rows] == [(cand, f"ag{a}", f"sc{s}")]
    # open it: its file is loaded, the call is open and its transcript shows the word
    page.click("#episode-table tbody tr a")
    target = rows[0]["target"]
    page.wait_for_selector(f"#{target}[open]")
    assert f"episode {cand}__ag{a}__sc{s}__r{r}" in page.text_content(f"#{target} > p")
    transcript = page.evaluate(
        "t => Array.from(document.querySelectorAll('#' + t + ' tr[id]')).map(r => r.textContent).join(' ')",
        target,
    )
    assert f"Booked, {NEEDLE} noted." in transcript and "I want to book" in transcript
    assert page.evaluate("location.hash") == f"#{target}"
    # its operating-instructions link opens the shared block on the index page
    instr = page.locator(f"#{target} tr.role-system a")
    block = instr.get_attribute("href")[1:]
    instr.click()
    assert page.evaluate("b => document.getElementById(b).open", block)
    assert f"ag{a} · scenario" in page.text_content(f"#{block} > summary")
    # a judge citation inside the loaded call leads to its message row
    page.click(f"#{target} a[href='#{target}-m5']")
    assert page.evaluate("document.activeElement !== null && location.hash") == f"#{target}-m5"
    # the score matrix: a tile opens its call (loaded from its file), even one the search filters out
    tiles = page.locator("#fig-matrix svg a")
    assert tiles.count() == len(CANDS) * AGENTS * SCENARIOS
    tile = tiles.nth(tiles.count() - 1)
    goal = tile.get_attribute("href")[1:]
    assert goal != target
    tile.click()
    page.wait_for_selector(f"#{goal}[open]")
    title = tile.locator("title").text_content()  # "<candidate> · <agent> / <scenario> (...)"
    assert page.text_content(f"#{goal} > summary").startswith(title.split(" (")[0] + " · repeat 0 · ")
    # a URL naming a call opens it on load
    page2 = browser.new_page()
    page2.goto(index.as_uri() + "#e7-m2", wait_until="load")
    page2.wait_for_selector("#e7[open]")
    assert page2.evaluate("document.getElementById('e7-m2').getBoundingClientRect().top") < 900
    assert errors == []
    assert requests and all(u.startswith("file://") for u in requests), requests
    loaded = {re.sub(r".*/", "", u) for u in requests if "/calls/" in u}
    assert loaded == {f"{target}.js", f"{goal}.js"}
    searched = [u for u in requests if "/search/" in u]
    assert len(searched) == int(page.evaluate("document.body.dataset.searchShards")) > 0


@pytest.mark.slow  # shares the 10,000-call folder (about 11 s idle to write)
def test_a_missing_call_file_is_said_on_the_page(browser: Any, folder: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("e1*.js"))
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((copy / "index.html").as_uri() + "#e12", wait_until="load")
    page.wait_for_selector("#load-problem")
    assert page.text_content("#load-problem") == (
        "Cannot read calls/e12.js beside this page: keep the report folder whole."
    )
    assert json.loads((copy / "report-folder.json").read_text())["calls"] == N and errors == []
