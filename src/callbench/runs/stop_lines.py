"""The end of the line a stopped command prints (:func:`callbench.runs.supervisor.stop_message`):
what the stop left behind and what to do next, worded for the command, since commands keep
different things. ``run``/``demo`` save each episode as it finishes (runfolder/store.py) and resume;
``generate`` commits each scenario with its records (generate/records.py) and resumes the batch;
``grade`` saves each grade into its set (grade/grader.py) and continues the latest unfinished set
unless ``--new-set`` is given; ``report`` writes each file whole or not at all (atomic writes), so
it has nothing to resume; other commands claim nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

RESUMING_COMMANDS = frozenset({"run", "demo"})
"""Commands whose finished episodes are saved as they finish, so the same command resumes."""


def command_word(argv: Sequence[str]) -> str | None:
    """The command of a ``callbench`` argument list (without the program): its first argument that
    is not an option (the app's own options, ``--version``/``--help``, take no value), or None."""
    return next((a for a in argv if not a.startswith("-")), None)


def stop_outcome(argv: Sequence[str], where: str | None = None, written: Sequence[str] | None = None,
                 *, at_once: bool = False) -> str:
    """What a stop left behind and what to do next, for the command of ``argv`` (the ``callbench``
    arguments without the program): the part of the stop line after ``"interrupted (Ctrl-C): "``.
    ``where``: the run folder (``run``/``demo``); ``written``: the report files finished before
    the stop (``report``); ``at_once``: the stop did not wait for the command (a report then
    cannot say which files it finished)."""
    word = command_word(argv)
    if word in RESUMING_COMMANDS:
        kept = f"finished episodes are saved in {where}" if where else "finished episodes are saved"
        return f"{kept}; run the same command to resume"
    if word == "generate":  # each scenario is committed with its records (generate/records.py)
        return "scenarios written so far are kept with their records; run the same command to resume"
    if word == "grade":  # each grade is saved into its set as it finishes (grade/grader.py)
        again = "the same command without --new-set" if "--new-set" in argv else "the same command"
        return f"finished grades are saved in their grade set; run {again} to grade the rest"
    if word == "report":  # every report file is written whole (atomically) or not at all
        if at_once:
            return ("the report was not finished; no report file is half-written under its own name; run "
                    "the same command to make it")
        if written:
            return (f"the report was not finished; written before the stop: {', '.join(written)}; nothing "
                    "else was written; run the same command to make the whole report")
        return "the report was not finished and nothing was written; run the same command to make it"
    return "stopped; run the same command again"
