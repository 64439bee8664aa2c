"""callbench.report.model.workers and the parallel report load: the same results in the
same order as one process, errors raised again unchanged, and no worker outliving the report."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from callbench.report.model import workers
from callbench.report.model.episode_read import ReportInputError
from callbench.report.model.load import load_run
from callbench.report.model.workers import WorkerCrash, chunks, default_workers, map_ordered
from fakes import worker_fns
from fakes.synthetic import synthetic_runs
from waiting import finish, run_command, wait_until

from .conftest import force_workers

ROOT = Path(__file__).resolve().parents[2]


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


def test_chunks_keep_order_and_sizes() -> None:
    assert chunks(list(range(7)), 3) == [[0, 1, 2], [3, 4, 5], [6]]
    assert chunks([], 3) == []


def test_results_come_back_in_input_order_from_worker_processes() -> None:
    out = list(map_ordered(worker_fns.square_with_pid, list(range(23)), workers=2, chunk=2, min_items=0))
    assert [v for v, _ in out] == [i * i for i in range(23)]
    pids = {pid for _, pid in out}
    assert os.getpid() not in pids and len(pids) == 2


def test_small_inputs_run_in_this_process() -> None:
    out = list(map_ordered(worker_fns.square_with_pid, list(range(5)), workers=2, chunk=2))
    assert {pid for _, pid in out} == {os.getpid()}
    assert [v for v, _ in out] == [0, 1, 4, 9, 16]


def test_an_error_in_a_worker_is_raised_unchanged() -> None:
    with pytest.raises(ReportInputError, match=r"^/run/traces/e7\.json\.gz: not valid JSON \(trace\)"):
        list(map_ordered(worker_fns.fail_at_seven, list(range(20)), workers=2, chunk=3, min_items=0))


@pytest.mark.parametrize(("chunk", "ahead"), [(3, None), (1, 1), (1, 100), (5, 2)])
def test_a_killed_worker_is_a_plain_error(chunk: int, ahead: int | None) -> None:
    """Whether the crash is seen waiting for a result or submitting the next chunk (CI saw the
    second: a BrokenProcessPool from submit() once escaped as a traceback)."""
    with pytest.raises(WorkerCrash, match="CALLBENCH_REPORT_WORKERS=1"):
        list(map_ordered(worker_fns.die_at_seven, list(range(20)), workers=2, chunk=chunk, min_items=0,
                         ahead=ahead))
    after = list(map_ordered(worker_fns.square_with_pid, [1, 2, 3], workers=2, chunk=1, min_items=0))
    assert [v for v, _ in after] == [1, 4, 9]  # a new pool serves the next map


_NO_MAIN_GUARD = """
import sys
from callbench.report.model.workers import WorkerCrash, map_ordered
from fakes.worker_fns import square_with_pid
try:
    out = list(map_ordered(square_with_pid, list(range(10)), workers=2, chunk=1, min_items=0))
except WorkerCrash as e:
    print(f"error: {e}")
    raise SystemExit(2) from None
print("results", len(out))
"""


def test_workers_that_cannot_start_are_not_called_killed(tmp_path: Path) -> None:
    """A script with no ``if __name__ == "__main__":`` guard: each spawned worker runs the script
    again, tries to start a pool of its own and exits before it returns anything. That is a start
    failure with its usual cause named, not a worker killed by the system."""
    script = tmp_path / "no_guard.py"
    script.write_text(_NO_MAIN_GUARD, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT / "src")])}
    done = run_command([sys.executable, str(script)], "the script without a main guard to end",
                       env=env, text=True)
    assert done.returncode == 2, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1
    line = lines[0]
    assert line.startswith("error: the report's worker processes could not start"), line
    assert 'if __name__ == "__main__":' in line and "CALLBENCH_REPORT_WORKERS=1" in line
    assert "killed" not in line
    # each worker that ran the script again says so in one line, not with a traceback
    assert "Traceback" not in done.stderr
    worker_lines = done.stderr.splitlines()
    assert 1 <= len(worker_lines) <= 2
    assert set(worker_lines) == {workers.RERUN_MAIN_LINE}


_LIBRARY_NO_GUARD = """
import sys
from pathlib import Path
from callbench.report.model import workers
from callbench.report.model.load import load_runs
workers.PARALLEL_MIN_ITEMS, workers.CHUNK_ITEMS = 0, 4
runs = load_runs([Path(sys.argv[1])])
print("episodes", len(runs[0].records))
"""


def test_a_library_script_without_the_guard_gets_one_line_per_process(tmp_path: Path) -> None:
    """The case users meet: a script reading a run through the library with worker processes
    (here ``CALLBENCH_REPORT_WORKERS=2``) and no ``__main__`` guard. It fails with the start error
    (its traceback is the script's own: it does not catch it) and each worker says why in one line."""
    run = synthetic_runs().make_synthetic_run(tmp_path / "syn", 12, seed=1, candidates=2)
    script = tmp_path / "read_runs.py"
    script.write_text(_LIBRARY_NO_GUARD, encoding="utf-8")
    env = {**os.environ, workers.WORKERS_ENV: "2",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT / "src")])}
    done = run_command([sys.executable, str(script), str(run)], "the library script to end",
                       env=env, text=True)
    assert done.returncode == 1 and "episodes" not in done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("callbench.report.model.workers.WorkerStartError: the report's worker processes "
                           "could not start"), done.stderr
    assert 1 <= done.stderr.count(workers.RERUN_MAIN_LINE) <= 2
    assert done.stderr.count("Traceback") == 1  # the parent's, none from the workers


def test_a_worker_killed_after_results_still_reads_as_killed() -> None:
    """Chunks came back before the worker died by a signal: the message says killed, with the signal."""
    with pytest.raises(WorkerCrash) as crash:
        list(map_ordered(worker_fns.die_at_seven, list(range(20)), workers=2, chunk=1, min_items=0, ahead=1))
    assert "could not start" not in str(crash.value)
    assert "SIGKILL" in str(crash.value) and "killed" in str(crash.value)


def test_workers_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(workers.WORKERS_ENV, "3")
    assert default_workers() == 3
    monkeypatch.setenv(workers.WORKERS_ENV, "0")
    with pytest.raises(ValueError, match="CALLBENCH_REPORT_WORKERS='0'"):
        default_workers()
    monkeypatch.delenv(workers.WORKERS_ENV)
    monkeypatch.setattr(workers, "_configured", 1)
    assert default_workers() == 1  # a library caller works in one process unless it asks
    cpus = workers.use_cpus()
    assert default_workers() == cpus == min(len(os.sched_getaffinity(0)), 8)


_STOPPABLE = """
import sys
from callbench.report.model.workers import map_ordered
from fakes.worker_fns import slow_recording_pid
list(map_ordered(slow_recording_pid, [sys.argv[1]] * 8, workers=2, chunk=1, min_items=0))
"""


@pytest.mark.parametrize("how", ["ctrl-c", "kill-9"])
def test_no_worker_outlives_the_report(tmp_path: Path, how: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT / "src")])}
    proc = subprocess.Popen([sys.executable, "-c", _STOPPABLE, str(tmp_path)], env=env,
                            start_new_session=True, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: len(list(tmp_path.glob("*.pid"))) >= 2, "both workers to write their pid files",
                   proc=proc)
        pids = [int(p.stem) for p in tmp_path.glob("*.pid")]
        assert len(pids) == 2
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends: the whole group
        else:
            os.kill(proc.pid, signal.SIGKILL)  # the parent alone, with no chance to clean up
        _, err = finish(proc, f"the report process to exit after {how}")
        wait_until(lambda: all(_gone(p) for p in pids), f"the workers {pids} to end after the parent's {how}")
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever is left of the group, on a failure
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if how == "ctrl-c":
        assert proc.returncode != 0
        assert b"KeyboardInterrupt" in err  # the parent's, not one per worker
    else:
        assert proc.returncode == -signal.SIGKILL


def test_a_run_loads_the_same_in_one_process_and_in_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = synthetic_runs().make_synthetic_run(tmp_path / "syn", 40, seed=5, candidates=3)
    force_workers(monkeypatch, 7, processes=None)
    one, many = load_run(run, workers=1), load_run(run, workers=2)
    assert [r.model_dump() for r in one.records] == [r.model_dump() for r in many.records]
    assert len(one.records) == 40
    assert one.ledger == many.ledger and one.faults == many.faults
    assert one.facts.callers == many.facts.callers and one.facts.candidates == many.facts.candidates
    assert one.facts.caller_prompts == many.facts.caller_prompts
    assert one.warnings == many.warnings
    assert one.ledger.episodes == 40


def test_a_damaged_trace_names_its_file_from_a_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = synthetic_runs().make_synthetic_run(tmp_path / "syn", 30, seed=2, candidates=2)
    victim = sorted((run / "traces").iterdir())[17]
    victim.write_bytes(b"\x1f\x8b not really gzip")
    force_workers(monkeypatch, 4, processes=None)
    with pytest.raises(ReportInputError) as one:
        load_run(run, workers=1)
    with pytest.raises(ReportInputError) as many:
        load_run(run, workers=2)
    assert str(one.value) == str(many.value)
    assert str(many.value).startswith(f"{victim}: cannot read trace")


def test_no_pool_outlives_its_map(tmp_path: Path) -> None:
    """Each map shuts its pool down, and a map run on a thread that then ends keeps its workers
    (they are not tied to the thread that started them) until the map is done."""
    script = ("import sys, threading\nfrom callbench.report.model.workers import map_ordered\n"
              "from fakes.worker_fns import record_pid, square_with_pid\n"
              "out = []\n"
              "t = threading.Thread(target=lambda: out.extend(map_ordered(square_with_pid, list(range(20)),"
              " workers=2, chunk=2, min_items=0)))\n"
              "t.start(); t.join()\n"
              "assert [v for v, _ in out] == [i * i for i in range(20)]\n"
              "for _ in range(2):\n"
              "    list(map_ordered(record_pid, [sys.argv[1]] * 8, workers=2, chunk=1, min_items=0))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT / "src")])}
    done = run_command([sys.executable, "-c", script, str(tmp_path)], "the script of three maps to end",
                       env=env)
    assert done.returncode == 0, done.stderr
    pids = [int(p.stem) for p in tmp_path.glob("*.pid")]
    assert 2 <= len(pids) <= 4  # each map's own workers
    assert all(_gone(p) for p in pids)


def test_a_worker_stopped_while_sending_its_result_does_not_hang_the_exit(tmp_path: Path) -> None:
    """The consumer stops while a worker has sent half of a result (a worker stopped mid-message
    leaves the pool's manager thread reading the rest, which never comes while the parent holds its
    own copy of the pipe's write end): the map's clean-up still ends the pool, and the process
    exits (interpreter exit joins the manager thread)."""
    script = ("import sys, threading, time\nfrom pathlib import Path\n"
              "from callbench.report.model.workers import map_ordered\n"
              "from fakes.worker_fns import half_a_result\n"
              "folder = Path(sys.argv[1])\n"
              "it = map_ordered(half_a_result, ['first', f'{folder}|half'], workers=2, chunk=1,"
              " min_items=0)\n"
              "assert next(it) == 'first'\n"
              "(folder / 'go').write_text('')\n"
              "while not (folder / 'half').exists():\n"
              "    time.sleep(0.05)\n"
              "it.close()\n"
              "left = [t.name for t in threading.enumerate() if 'ExecutorManager' in type(t).__name__]\n"
              "print('manager threads left:', left)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT / "src")])}
    done = run_command([sys.executable, "-c", script, str(tmp_path)],
                       "the map's process to exit after its worker stopped mid-result", env=env, text=True)
    assert done.returncode == 0, done.stderr
    assert "manager threads left: []" in done.stdout, done.stdout


def test_a_worker_that_dies_while_sending_its_result_is_a_crash_not_a_hang() -> None:
    """No error, Ctrl-C or early stop to start the clean-up: the worker dies with half its result
    sent, and the pool's manager thread, reading the rest, never notices. The map still raises
    WorkerCrash and the process exits."""
    script = ("import sys\nfrom callbench.report.model.workers import WorkerCrash, map_ordered\n"
              "from fakes.worker_fns import die_in_half_a_result\n"
              "try:\n"
              "    list(map_ordered(die_in_half_a_result, ['a', 'half', 'b'], workers=2, chunk=1,"
              " min_items=0))\n"
              "except WorkerCrash as e:\n"
              "    print('crash:', e)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT / "src")])}
    done = run_command([sys.executable, "-c", script], "the map to end after a worker died mid-result",
                       env=env, text=True)
    assert done.returncode == 0, done.stderr
    # whether a chunk came back first or not, a death by a signal is named as one
    assert done.stdout.startswith("crash: a report worker process died of SIGKILL"), done.stdout


def test_terminating_a_pool_twice_is_harmless() -> None:
    """The map's own clean-up after close_pool(terminate=True) stopped its pool: no AttributeError
    in place of the map's error."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    assert pool.submit(abs, -3).result() == 3
    workers._terminate(pool)
    workers._terminate(pool)


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_folder_report_is_the_same_written_by_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from callbench.report.html.folder import write_html_folder
    from callbench.report.html.viewer import call_data
    from callbench.report.model.build import build_report
    from callbench.report.model.load import load_runs

    run = synthetic_runs().make_synthetic_run(tmp_path / "syn", 36, seed=9, candidates=3)
    runs = load_runs([run], workers=1)
    report = build_report(runs, n_samples=50)
    one, many = tmp_path / "one", tmp_path / "many"
    assert write_html_folder(report, call_data(runs), one, reason="test") == 36
    force_workers(monkeypatch, 5)
    assert write_html_folder(report, None, many, reason="test", runs=runs) == 36
    a, b = _tree(one), _tree(many)
    assert len([k for k in a if k.startswith("calls/")]) == 36
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []


def test_a_bad_workers_setting_is_a_plain_error(tmp_path: Path) -> None:
    run = synthetic_runs().make_synthetic_run(tmp_path / "syn", 4, seed=1, candidates=1)
    env = {**os.environ, workers.WORKERS_ENV: "two"}
    done = run_command([sys.executable, "-m", "callbench", "report", str(run), "--no-html"],
                       "the report with a bad workers setting to end", env=env, text=True)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: $CALLBENCH_REPORT_WORKERS='two': expected a whole number >= 1"


def _group_alive(pgid: int) -> list[int]:
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive


@pytest.mark.slow  # a 1,200-episode report in a process: about 20 s at load 7
@pytest.mark.parametrize("when", ["reading", "writing"])
def test_ctrl_c_on_a_large_report_leaves_no_worker_and_no_partial_folder(
    tmp_path: Path, when: str
) -> None:
    """Ctrl-C once the report's worker processes run (reading the run), or once the JSON report is
    written (writing the HTML folder); a report that finished first is whole."""
    run = synthetic_runs().make_synthetic_run(tmp_path / "syn", 1_200, seed=4, candidates=2)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "callbench", "report", str(run), "--html-folder", str(out),
                             "--json", str(tmp_path / "r.json")], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        if when == "reading":  # a machine with one CPU has no workers: the report then just ends
            wait_until(lambda: proc.poll() is not None or len(_group_alive(proc.pid)) > 1,
                       "the report's worker processes to start")
        else:
            wait_until(lambda: proc.poll() is not None or (tmp_path / "r.json").exists(),
                       "the JSON report to be written")
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
        _, err = finish(proc, f"the report to exit after Ctrl-C while {when}")
        wait_until(lambda: not _group_alive(proc.pid), "the report's worker processes to end")
    finally:
        for pid in _group_alive(proc.pid):  # what is left on a failure
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert "Traceback" not in err
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")]
    assert leftovers == []
    if proc.returncode == 0:  # finished before the signal: the whole folder is there
        assert len(list((out / "calls").iterdir())) == 1_200
    else:
        assert proc.returncode == 130, err
        assert not out.exists()
        # the stop line is the report's own: what was written, never the run's "resume" wording
        last = err.strip().splitlines()[-1]
        assert "resume" not in err
        if (tmp_path / "r.json").exists():  # stopped while writing the HTML folder
            assert last == (f"interrupted (Ctrl-C): the report was not finished; written before the stop: "
                            f"JSON report {tmp_path / 'r.json'}; nothing else was written; run the same "
                            "command to make the whole report")
        else:
            assert last == ("interrupted (Ctrl-C): the report was not finished and nothing was written; "
                            "run the same command to make it")


@pytest.mark.parametrize("parallel", [False, True])
def test_the_report_command_writes_the_folder_while_it_reads_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parallel: bool
) -> None:
    """One run, a folder report: the call files are written in the reading pass (each trace read
    once); the folder is the same as the library's, written from the calls one at a time."""
    from typer.testing import CliRunner

    from callbench.cli.app import app
    from callbench.report.html.folder import write_html_folder
    from callbench.report.html.viewer import call_data
    from callbench.report.model.build import build_report
    from callbench.report.model.load import load_runs

    run = synthetic_runs().make_synthetic_run(tmp_path / "syn", 30, seed=11, candidates=2)
    if parallel:
        force_workers(monkeypatch, 4)
    reads: list[int] = []
    from callbench.report.html import calls as html_calls

    real = html_calls.write_calls
    monkeypatch.setattr(html_calls, "write_calls", lambda jobs: reads.append(len(jobs)) or real(jobs))
    args = ["report", str(run), "--html-folder", str(tmp_path / "cli"), "--samples", "200"]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    assert reads == []  # no second pass over the traces
    runs = load_runs([run], workers=1)
    write_html_folder(build_report(runs, n_samples=200), call_data(runs), tmp_path / "lib",
                      reason="asked for with --html-folder")
    a, b = _tree(tmp_path / "lib"), _tree(tmp_path / "cli")
    assert len([k for k in a if k.startswith("calls/")]) == 30
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []


def test_candidates_summarised_on_threads_give_the_same_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from callbench.report.model import build

    run = synthetic_runs().make_synthetic_run(tmp_path / "syn", 45, seed=6, candidates=3)
    runs = load_run(run, workers=1)
    one = build.build_report([runs], n_samples=300).model_dump_json()
    monkeypatch.setattr(build, "PARALLEL_STATS_MIN", 0)
    many = build.build_report([runs], n_samples=300)
    assert len(many.candidates) == 3
    assert many.model_dump_json() == one
