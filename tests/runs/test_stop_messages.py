"""The line a stopped command ends with (the stop line, worded per command): ``run`` keeps
its finished episodes and resumes, ``grade`` keeps its finished grades and grades the rest, and
``report``, which writes nothing partial, says what was written (nothing, or the files finished
before the stop) and that the command can be run again."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from callbench.runs import supervisor
from callbench.runs.stop_lines import command_word
from callbench.runs.supervisor import hard_exit_line, note_command, stop_message


@pytest.fixture(autouse=True)
def _no_noted_command() -> Iterator[None]:
    saved = supervisor._stop.argv, supervisor._stop.reported
    supervisor._stop.argv = ()
    yield
    supervisor._stop.argv, supervisor._stop.reported = saved


def test_run_keeps_its_resume_wording() -> None:
    assert stop_message(signal.SIGINT, "/tmp/out", command=["run", "b"]) == (
        "interrupted (Ctrl-C): finished episodes are saved in /tmp/out; run the same command to resume"
    )
    assert stop_message(signal.SIGTERM, command=["demo"]) == (
        "stopped by SIGTERM: finished episodes are saved; run the same command to resume"
    )


def test_a_report_stopped_before_writing_says_nothing_was_written() -> None:
    line = stop_message(signal.SIGINT, command=["report", "runs/a", "--json", "r.json"])
    assert line == ("interrupted (Ctrl-C): the report was not finished and nothing was written; "
                    "run the same command to make it")
    assert "resume" not in line and "saved" not in line


def test_a_report_stopped_after_some_files_names_them() -> None:
    line = stop_message(signal.SIGTERM, command=["report", "runs/a"],
                        written=["JSON report r.json", "CSV out.csv"])
    assert line == ("stopped by SIGTERM: the report was not finished; written before the stop: JSON report "
                    "r.json, CSV out.csv; nothing else was written; run the same command to make the "
                    "whole report")


def test_grade_says_finished_grades_are_kept_and_how_to_grade_the_rest() -> None:
    assert stop_message(signal.SIGINT, command=["grade", "runs/a"]) == (
        "interrupted (Ctrl-C): finished grades are saved in their grade set; run the same command to "
        "grade the rest"
    )
    # with --new-set the same command would start yet another set: say to leave it out
    assert stop_message(signal.SIGINT, command=["grade", "runs/a", "--new-set"]) == (
        "interrupted (Ctrl-C): finished grades are saved in their grade set; run the same command "
        "without --new-set to grade the rest"
    )


def test_generate_resumes_its_batch() -> None:
    assert stop_message(signal.SIGINT, command=["generate", "b", "--agent", "a"]) == (
        "interrupted (Ctrl-C): scenarios written so far are kept with their records; run the same "
        "command to resume"
    )


def test_other_commands_claim_nothing_saved() -> None:
    line = stop_message(signal.SIGINT, command=["validate", "bundle"])
    assert line == "interrupted (Ctrl-C): stopped; run the same command again"


def test_the_noted_command_is_the_default() -> None:
    note_command(["report", "runs/a"])
    assert "nothing was written" in stop_message(signal.SIGINT)
    note_command(["-V"])
    assert stop_message(signal.SIGINT) == "interrupted (Ctrl-C): stopped; run the same command again"


@pytest.mark.parametrize(("argv", "word"), [
    (["report", "x"], "report"), (["--version"], None), ([], None), (["-h", "grade"], "grade"),
    (["labels", "export", "r"], "labels"),
])
def test_command_word(argv: list[str], word: str | None) -> None:
    assert command_word(argv) == word


def test_the_hard_exit_line_fits_the_command() -> None:
    why = "SIGINT again: stopped at once"
    note_command(["run", "b"])
    assert hard_exit_line(why) == f"{why}: finished episodes are saved; run the same command to resume"
    note_command(["report", "runs/a"])
    # stopped at once, a temporary file may be left beside the report: only its own names are whole
    assert hard_exit_line(why) == (f"{why}: the report was not finished; no report file is half-written "
                                   "under its own name; run the same command to make it")
