"""The event loop callbench's commands run on (``runs/event_loop.py``): uvloop by default where it
imports, asyncio's own on request, a clear error for anything else; the manifest records the loop
that ran."""

from __future__ import annotations

import asyncio
import sys
import warnings
from pathlib import Path

import pytest
import uvloop
from typer.testing import CliRunner

from callbench.cli import app
from callbench.runfolder.manifest import RunManifest
from callbench.runs import event_loop
from callbench.runs.event_loop import EventLoopChoiceError, describe, loop_factory, run

DAIRY = Path(__file__).resolve().parents[1] / "sim" / "data" / "dairy_bundle"
ROLES = ["--candidate", "scripted:reference", "--caller", "scripted:plan", "--task-judge", "scripted:met",
         "--conversation-judge", "scripted:met"]


async def _which() -> str:
    await asyncio.sleep(0)
    return describe()


@pytest.mark.parametrize("choice", [None, "", "auto", " AUTO ", "uvloop"])
def test_uvloop_by_default_and_on_request(choice: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(event_loop.ENV, raising=False)
    assert loop_factory(choice) is uvloop.new_event_loop
    assert run(_which(), choice) == f"uvloop {uvloop.__version__}"


def test_the_environment_chooses_when_no_choice_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(event_loop.ENV, "asyncio")
    assert loop_factory() is None
    assert run(_which()) == "asyncio"
    monkeypatch.setenv(event_loop.ENV, "uvloop")
    assert run(_which()).startswith("uvloop ")


def test_without_uvloop_auto_falls_back_and_uvloop_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now raises ImportError
    assert loop_factory("auto") is None
    assert run(_which(), "auto") == "asyncio"
    with pytest.raises(EventLoopChoiceError, match=r"=uvloop, but uvloop cannot be imported"):
        loop_factory("uvloop")


def test_an_unknown_choice_is_named_and_nothing_runs() -> None:
    ran = []

    async def body() -> None:
        ran.append(1)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine ... was never awaited" would be a RuntimeWarning
        with pytest.raises(EventLoopChoiceError) as e:
            run(body(), "trio")
    assert str(e.value) == "CALLBENCH_EVENT_LOOP='trio': expected one of auto, uvloop, asyncio"
    assert ran == []


def test_describe_outside_a_loop_is_empty() -> None:
    assert describe() == ""
    loop = asyncio.new_event_loop()
    try:
        assert describe(loop) == "asyncio"
    finally:
        loop.close()


def test_ctrl_c_reaches_the_main_task_on_uvloop() -> None:
    """``asyncio.Runner`` turns SIGINT into cancelling the main task, then KeyboardInterrupt: the
    same on uvloop's loop (the run's Ctrl-C path, ``cli/run.py``)."""
    import os
    import signal

    cancelled = []

    async def body() -> None:
        asyncio.get_running_loop().call_soon(os.kill, os.getpid(), signal.SIGINT)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(describe())
            raise

    with pytest.raises(KeyboardInterrupt):
        run(body(), "uvloop")
    assert cancelled == [f"uvloop {uvloop.__version__}"]


@pytest.mark.parametrize("choice", ["uvloop", "asyncio"])
def test_a_stop_raised_inside_another_task_is_not_reported_as_its_error(
    choice: str, caplog: pytest.LogCaptureFixture,
) -> None:
    """The supervisor's stop handler raises KeyboardInterrupt in whatever the main thread runs: here
    inside a task other than the main one, as in a server's request handler. The run stops with it,
    and the task that held it is not reported ("Task exception was never retrieved") when it is
    collected; another task's real error still is."""
    import gc

    held: list[asyncio.Task[None]] = []

    async def handler() -> None:
        raise KeyboardInterrupt  # as the signal handler raises it, inside this task's step

    async def broken() -> None:
        raise ValueError("a real error")

    async def body() -> None:
        held.append(asyncio.get_running_loop().create_task(broken()))
        await asyncio.sleep(0)
        held.append(asyncio.get_running_loop().create_task(handler()))
        await asyncio.Event().wait()

    with caplog.at_level("ERROR", logger="asyncio"), pytest.raises(KeyboardInterrupt):
        run(body(), choice)
    assert [t.done() for t in held] == [True, True]
    held.clear()
    gc.collect()
    reported = [r.getMessage() + repr(getattr(r, "exc_info", None)) for r in caplog.records]
    assert len(reported) == 1 and "Task exception was never retrieved" in reported[0], reported
    assert "a real error" in reported[0] and "KeyboardInterrupt" not in reported[0]


def test_a_run_from_the_command_line_records_its_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(event_loop.ENV, raising=False)
    out = tmp_path / "run"
    args = ["run", str(DAIRY), *ROLES, "--out", str(out), "--limit", "1", "--repeats", "1"]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    m = RunManifest.model_validate_json((out / "manifest.json").read_text())
    assert [s.event_loop for s in m.measured_at] == [f"uvloop {uvloop.__version__}"]
    monkeypatch.setenv(event_loop.ENV, "asyncio")
    again = CliRunner().invoke(app, [*args, "--concurrency", "3"])
    assert again.exit_code == 0, again.output
    m = RunManifest.model_validate_json((out / "manifest.json").read_text())
    assert [(s.event_loop, s.concurrency) for s in m.measured_at][1] == ("asyncio", 3)


def test_a_bad_choice_is_a_clear_error_on_the_command_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(event_loop.ENV, "tokio")
    args = ["run", str(DAIRY), *ROLES, "--out", str(tmp_path / "run"), "--limit", "1"]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 2  # bad input
    assert done.output == "error: CALLBENCH_EVENT_LOOP='tokio': expected one of auto, uvloop, asyncio\n"
    assert not (tmp_path / "run").exists()  # refused before the run folder was made
