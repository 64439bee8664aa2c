"""One line for every bad input of every command, on the real ``callbench``
command: a missing path, an unreadable file (a folder or undecodable bytes where a file is read), a
bad model spec and a read-only output (a tmpfs remounted read-only; needs root) each give exactly one
line on stderr, never a traceback, and the command's documented exit code (2 bad input, 4 the
machine refused a write; ``provenance`` reports bad options with 1; a missing ``--judge-audit`` file
is a warning)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from waiting import limit

ROOT = Path(__file__).parents[2]
DAIRY = ROOT / "tests" / "sim" / "data" / "dairy_bundle"
GEN = ROOT / "tests" / "generate" / "data"
ROLES = ["--candidate", "scripted:reference", "--caller", "scripted:plan", "--task-judge", "scripted:met",
         "--conversation-judge", "scripted:met"]
AGENT = ["--id", "water_helpline", "--call-ending", "end_call", "--success", "end_call:status=ended"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env.update({"PYTHONPATH": str(ROOT / "src"), "COLUMNS": "120"})
    return env


def _cb(*argv: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "callbench", *map(str, argv)], env=_env(),
                          capture_output=True, text=True, timeout=limit(600))


def _mount(point: Path) -> bool:
    point.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(point)],
                          capture_output=True)
    return done.returncode == 0


def _read_only(point: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(point)], check=True, capture_output=True)


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """A finished run, a bundle copy, a folder, a file of undecodable bytes, and read-only mounts:
    ``ro`` holding a run and a bundle, and ``side/run`` (only the run folder is read-only)."""
    t = tmp_path_factory.mktemp("bad_input")
    run = t / "run"
    done = _cb("run", DAIRY, *ROLES, "--out", run)
    assert done.returncode == 0, done.stderr
    (t / "adir").mkdir()
    (t / "garbage.bin").write_bytes(b"\xff\xfe\x00garbage\x80\x81")
    ro, side = t / "ro", t / "side"
    mounted = [p for p in (ro, side / "run") if _mount(p)]
    if len(mounted) == 2:
        shutil.copytree(run, ro / "run")
        shutil.copytree(DAIRY, ro / "bundle")
        shutil.copytree(run, side / "run", dirs_exist_ok=True)
        for p in mounted:
            _read_only(p)
    try:
        yield {"t": t, "run": run, "dir": t / "adir", "garbage": t / "garbage.bin", "ro": ro, "side": side,
               "mounted": t if len(mounted) == 2 else Path("/nonexistent")}
    finally:
        for p in mounted:
            subprocess.run(["umount", "-l", str(p)], capture_output=True, check=False)


def _cases(p: dict[str, Path]) -> dict[str, tuple[list[object], int]]:
    t, run, d, g = p["t"], p["run"], p["dir"], p["garbage"]
    return {
        # a missing path
        "validate missing": (["validate", "/nope"], 2),
        "audit missing": (["audit", "/nope"], 2),
        "inspect missing": (["inspect", "/nope"], 2),
        "provenance missing": (["provenance", "/nope"], 2),
        "grade missing": (["grade", "/nope"], 2),
        "report missing": (["report", "/nope"], 2),
        "agreement missing": (["agreement", "/nope", "--grade-set", "a", "--grade-set", "b"], 2),
        "run missing bundle": (["run", "/nope", *ROLES, "--out", t / "o1"], 2),
        "run missing settings": (["run", DAIRY, *ROLES, "--settings", "/nope.yaml", "--out", t / "o1"], 2),
        "new-agent missing prompt": (["new-agent", t / "nb", "--prompt", "/nope.md", "--tools",
                                      "/nope.json"], 2),
        "new-agent missing export": (["new-agent", t / "nb", "--prompt", GEN / "water_prompt.md",
                                      "--tools", GEN / "water_tools.json", *AGENT,
                                      "--platform-export", "/nope.json"], 2),
        "generate missing": (["generate", "/nope", "--agent", "a", "--model", "scripted:met"], 2),
        "review missing": (["review", "/nope"], 2),
        "labels export missing": (["labels", "export", "/nope", "--out", t / "x.csv"], 2),
        "labels import missing run": (["labels", "import", "/nope", t / "f.csv"], 2),
        "labels import missing file": (["labels", "import", run, "/nope.csv"], 2),
        "report judge-audit missing": (["report", run, "--no-html", "--judge-audit", "/nope.json"], 0),
        # an unreadable file
        "run settings folder": (["run", DAIRY, *ROLES, "--settings", d, "--out", t / "o1"], 2),
        "run settings bytes": (["run", DAIRY, *ROLES, "--settings", g, "--out", t / "o1"], 2),
        "new-agent prompt folder": (["new-agent", t / "nb", "--prompt", d, "--tools", g], 2),
        "new-agent tools bytes": (["new-agent", t / "nb", "--prompt", GEN / "water_prompt.md",
                                   "--tools", g], 2),
        "new-agent export bytes": (["new-agent", t / "nb", "--prompt", GEN / "water_prompt.md", "--tools",
                                    GEN / "water_tools.json", *AGENT, "--platform-export", g], 2),
        "new-agent export folder": (["new-agent", t / "nb", "--prompt", GEN / "water_prompt.md", "--tools",
                                     GEN / "water_tools.json", *AGENT, "--platform-export", d], 2),
        "labels import folder": (["labels", "import", run, d], 2),
        "labels import bytes": (["labels", "import", run, g], 2),
        "generate settings bytes": (["generate", DAIRY, "--agent", "x", "--model", "scripted:met",
                                     "--settings", g], 2),
        "validate a file": (["validate", g], 2),
        "audit a file": (["audit", g], 2),
        "review a file": (["review", g], 2),
        # a bad model spec
        "run bad spec": (["run", DAIRY, "--candidate", "nosuch:x", *ROLES[2:], "--out", t / "o2"], 2),
        "demo bad spec": (["demo", "--model", "gpt-4o-mini", "--out", t / "o3"], 2),
        "generate bad spec": (["generate", DAIRY, "--agent", "x", "--model", "nosuch:model"], 2),
        "grade bad spec": (["grade", run, "--task-judge", "nosuch:x"], 2),
        "audit bad spec": (["audit", DAIRY, "--judges", "--task-judge", "nosuch:x",
                            "--conversation-judge", "scripted:met"], 2),
    }


def _ro_cases(p: dict[str, Path]) -> dict[str, tuple[list[object], int]]:
    ro, run = p["ro"], p["run"]
    return {
        "run new out": (["run", DAIRY, *ROLES, "--out", ro / "new"], 4),
        "run resume": (["run", DAIRY, *ROLES, "--out", ro / "run"], 4),
        "grade": (["grade", ro / "run"], 4),
        "report json": (["report", run, "--no-html", "--json", ro / "r.json"], 4),
        "labels export": (["labels", "export", run, "--out", ro / "x.csv"], 4),
        "new-agent": (["new-agent", ro / "nb", "--prompt", GEN / "water_prompt.md", "--tools",
                       GEN / "water_tools.json", *AGENT], 4),
        "provenance update": (["provenance", ro / "bundle", "--update", "--made", "hand_authored",
                               "--author", "me"], 4),
        "schema": (["schema", "--out", ro / "s"], 2),  # documented: 2 the folder cannot be written
    }


def _check(name: str, argv: list[object], code: int) -> None:
    done = _cb(*argv)
    lines = [line for line in done.stderr.splitlines() if line.strip() and "━" not in line]
    assert "Traceback" not in done.stderr + done.stdout, (name, done.stderr)
    assert done.returncode == code, (name, done.returncode, done.stderr)
    assert len(lines) == 1, (name, lines)
    assert lines[0].startswith("warning: " if code == 0 else "error: "), (name, lines)


@pytest.mark.parametrize("name", list(_cases({k: Path("/x") for k in ("t", "run", "dir", "garbage")})))
def test_bad_input_gives_one_line_and_the_documented_exit_code(places: dict[str, Path], name: str) -> None:
    argv, code = _cases(places)[name]
    _check(name, argv, code)


@pytest.mark.parametrize("name", list(_ro_cases({k: Path("/x") for k in ("ro", "run")})))
def test_a_read_only_output_gives_one_line_and_exit_4(places: dict[str, Path], name: str) -> None:
    if not places["mounted"].exists():
        pytest.skip("needs root and tmpfs mounts")
    argv, code = _ro_cases(places)[name]
    _check(name, argv, code)


def test_report_on_a_read_only_run_folder_writes_its_html_beside_it_or_says_where(
    places: dict[str, Path]
) -> None:
    if not places["mounted"].exists():
        pytest.skip("needs root and tmpfs mounts")
    side = _cb("report", places["side"] / "run")
    assert side.returncode == 0, side.stderr
    beside = places["side"] / "run.report.html"
    assert beside.is_file() and "<html" in beside.read_text(encoding="utf-8")[:2000].lower()
    assert f"HTML report: {beside.resolve().as_uri()}" in side.stdout
    nowhere = _cb("report", places["ro"] / "run")
    assert nowhere.returncode == 0 and "Traceback" not in nowhere.stderr
    assert nowhere.stdout.strip()  # the terminal report was shown
    warnings = [line for line in nowhere.stderr.splitlines() if line.strip()]
    assert len(warnings) == 1 and warnings[0].startswith("warning: no HTML report written")
    assert str(places["ro"] / "run" / "report.html") in warnings[0]
    assert str(places["ro"] / "run.report.html") in warnings[0]
