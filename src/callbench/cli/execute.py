"""Running a planned run from the command line (``run`` and ``demo``): the run folder's lock, a
progress bar, Ctrl-C and the supervisor's stop, the exit codes of a run that ended early."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer

from callbench.cli.plan import _input_error

if TYPE_CHECKING:
    from rich.console import Console

    from callbench.bundle.loader import BundleError


def execute(
    config: object, cache_path: Path | None, cache_mode: str, title: str
) -> tuple[object, str | None]:
    """:func:`_execute_held` holding the run folder's lock (:mod:`callbench.runfolder.lock`) from before
    the progress bar is drawn: a second driver gets its one line at once (exit 2)."""
    import contextlib

    with contextlib.ExitStack() as lock:
        return _execute_held(config, cache_path, cache_mode, title, lock)


def _execute_held(
    config: object, cache_path: Path | None, cache_mode: str, title: str, lock: object
) -> tuple[object, str | None]:
    """Run with a rich progress bar; Ctrl-C stops cleanly (finished episodes are kept).

    Exit codes: 2 bad input; 3 a role's provider cannot be used (preflight failed, or a role
    failed with HTTP 401/403/404 several times in a row); 4 the machine refused a write (disk
    full, permission denied, read-only folder); 130 interrupted. Finished episodes are kept in
    every case and the same command resumes."""
    import contextlib
    import sqlite3

    from rich.console import Console
    from rich.live import Live

    from callbench.bundle.loader import BundleError
    from callbench.bundle.validate.audits import load_bundle
    from callbench.cli.progress import RunProgress
    from callbench.grade.grader import GradeError
    from callbench.models.activity import listening
    from callbench.runfolder.lock import hold_run_folder
    from callbench.runs import event_loop
    from callbench.runs.budget import EXIT_BUDGET, BudgetReached
    from callbench.runs.executor import RunConfig, RunConflict
    from callbench.runs.guard import RunStopped
    from callbench.runs.machine import EXIT_MACHINE_FAULT, EXIT_PROVIDER, machine_fault_message
    from callbench.runs.plan import plan_episodes, sweep_personas
    from callbench.runs.preflight import PreflightError
    from callbench.runs.ray_executor import EXIT_CLUSTER_LOST, ClusterLost
    from callbench.runs.session import RunTotals, build_clients, check_run_folder, open_cache, run_and_grade

    assert isinstance(config, RunConfig)
    console = Console(stderr=True, emoji=False)
    # Everything that can be wrong with the configuration is checked before the progress bar is
    # drawn: the output folder, the bundle, the filters and every role's model spec.
    try:
        event_loop.loop_factory()  # CALLBENCH_EVENT_LOOP, read again when the run starts
        check_run_folder(Path(config.out))
        assert isinstance(lock, contextlib.ExitStack)
        lock.enter_context(hold_run_folder(Path(config.out), f"callbench run {config.executor}"))
        bundle = load_bundle(config.bundle_path)
        cands = [(c.spec, c.settings) for c in config.candidates]
        plan_episodes(bundle, cands, config.repeats, config.filters,
                      sweep_personas(bundle, config.filters, config.personas, config.personas_file))
        from callbench.runs.voice import prepare_voice

        prepare_voice(config, bundle)  # a language without an offline voice is refused here, in one line
        cache = open_cache(cache_path, cache_mode)
        clients = build_clients(config, bundle, cache)
    except BundleError as e:
        _bundle_error(console, e)
    except (RunConflict, ValueError, FileNotFoundError, FileExistsError, NotADirectoryError) as e:
        console.print(f"error: {_input_error(e, config.bundle_path)}", markup=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except OSError as e:  # the run folder or its lock cannot be created (read-only, full, no permission)
        line = machine_fault_message(e, config.out)
        console.print(f"error: {line or e}", markup=False, soft_wrap=True)
        raise typer.Exit(EXIT_MACHINE_FAULT if line else 2) from None

    totals = RunTotals()
    bars = RunProgress(console, title)

    def show() -> None:
        bars.totals(totals.skipped, totals.tokens, totals.cost_text())

    def on_plan(planned: list, done: set) -> None:
        bars.plan(len(planned), len([k for k in planned if k.episode_id in done]))

    def on_episode(trace: object, _executor_totals: dict) -> None:
        from callbench.trace import Trace

        assert isinstance(trace, Trace)
        totals.add_trace(trace)
        bars.episode_done()
        show()

    def on_graded(grade: object) -> None:
        from callbench.grade.models import EpisodeGrade

        assert isinstance(grade, EpisodeGrade)
        totals.add_usage(grade.usage.values())
        show()

    async def go() -> tuple[object, str | None]:
        try:
            return await run_and_grade(
                config, clients=clients, bundle=bundle, cache=cache, on_episode=on_episode, on_plan=on_plan,
                on_graded=on_graded,
            )
        finally:
            for c in clients.values():
                await c.aclose()

    try:
        try:
            with Live(bars.group(), console=console, refresh_per_second=4), listening(bars.on_activity):
                return event_loop.run(go())
        finally:
            if not console.is_interactive:  # as rich's Progress.stop: end the last line in a pipe
                console.print()
    except KeyboardInterrupt:
        from callbench.runs.supervisor import exit_if_native_work, requested_stop, stop_message, stop_status

        console.print(stop_message(requested_stop(), str(config.out)), markup=False, soft_wrap=True)
        # finished episodes are saved and the store closed by now; a llama.cpp call still running
        # is abandoned (it cannot be cancelled) instead of waited for
        exit_if_native_work(stop_status())
        raise typer.Exit(stop_status()) from None
    except BudgetReached as e:
        console.print(f"stopped: {e}", markup=False, soft_wrap=True)
        raise typer.Exit(EXIT_BUDGET) from None
    except (PreflightError, RunStopped) as e:
        console.print(f"error: {e}", markup=False, soft_wrap=True)
        raise typer.Exit(EXIT_PROVIDER) from None
    except ClusterLost as e:
        console.print(f"error: {e}", markup=False, soft_wrap=True)
        raise typer.Exit(EXIT_CLUSTER_LOST) from None
    except (OSError, sqlite3.OperationalError) as e:
        line = machine_fault_message(e, config.out)
        if line is None and not isinstance(e, FileNotFoundError | FileExistsError | NotADirectoryError):
            raise
        if line is not None:
            console.print(f"error: {line}", markup=False, soft_wrap=True)
            raise typer.Exit(EXIT_MACHINE_FAULT) from None
        console.print(f"error: {e}", markup=False)
        raise typer.Exit(2) from None
    except BundleError as e:
        _bundle_error(console, e)
    except (RunConflict, ValueError, FileNotFoundError, GradeError, FileExistsError, NotADirectoryError) as e:
        console.print(f"error: {e}", markup=False, soft_wrap=True)
        raise typer.Exit(2) from None


def _bundle_error(console: Console, error: BundleError) -> NoReturn:
    """Print each of ``error``'s problems and the count, then exit 2."""
    for p in error.problems:
        console.print(f"{p}", markup=False)
    count = len(error.problems)
    console.print(f"error: the bundle has {count} problem(s); run callbench validate", markup=False)
    raise typer.Exit(2)
