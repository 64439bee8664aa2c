"""The Ray executor against a separately started Ray cluster: a head node started
with ``ray start --head --block`` on loopback as its own process group, a scripted run sent to it by
address (the driver here and through ``callbench run --executor ray --ray-address``), a worker
killed mid-run, and traces with a local run's content (timings aside) with nothing lost or doubled;
two drivers on one run folder against the cluster, the second refused by the run-folder lock.
Skipped when Ray is not installed (extra ``[distributed]``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
# a Ray head started and stopped as a process (about 20 s to stop) and runs through it
pytestmark = pytest.mark.slow

from callbench.bundle.models import Bundle  # noqa: E402
from callbench.models.base import ModelClient  # noqa: E402
from callbench.runfolder import episode_files  # noqa: E402
from callbench.runfolder.store import RunStore  # noqa: E402
from callbench.runs.executor import RunConfig, execute_run  # noqa: E402
from callbench.runs.ray_executor import default_clients, execute_run_ray  # noqa: E402
from waiting import finish, run_command, wait_until  # noqa: E402

from .conftest import DAIRY, scripted_clients, scripted_config  # noqa: E402
from .test_ray_executor import DieOnce, _traces  # noqa: E402
from .test_signals import _children, _wait_for  # noqa: E402

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers need not import tests


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def ray_head() -> Iterator[str]:
    """A Ray head node on 127.0.0.1 in its own process group; yields its ``HOST:PORT`` address.
    Ended with SIGTERM to the group (``ray start --block`` then stops every process it started),
    SIGKILL after 20 s."""
    exe = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
    if not Path(exe).exists():
        pytest.skip("the `ray` command is not installed")
    if ray.is_initialized():
        ray.shutdown()
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="cbray-", dir="/tmp")  # short: Ray's socket paths have a limit
    # authentication off, explicitly: the cluster listens on loopback only, and Ray reads its auth
    # mode once per process, before this fixture could give the in-process driver a token
    auth = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    saved = {k: os.environ.get(k) for k in auth}
    os.environ.update(auth)
    env = dict(os.environ)
    proc = subprocess.Popen(
        [exe, "start", "--head", "--block", f"--port={port}", "--node-ip-address=127.0.0.1",
         "--num-cpus=2", "--include-dashboard=false", f"--temp-dir={temp}", "--disable-usage-stats"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env,
    )
    address = f"127.0.0.1:{port}"
    try:
        def listening() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return True
            except OSError:
                return False

        def node_registered() -> bool:  # the GCS listens seconds before the raylet has registered
            log = Path(temp) / "session_latest" / "logs" / "gcs_server.out"
            return log.exists() and "Registering new node" in log.read_text(errors="replace")

        wait_until(listening, f"the Ray head to listen on port {port}", proc=proc, interval=0.5)
        wait_until(node_registered, "the Ray head's node to register with its GCS (gcs_server.out)",
                   proc=proc, interval=0.2)
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(20)  # cleanup only: a head slower to stop is killed
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(temp, ignore_errors=True)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _config(out: Path, address: str) -> RunConfig:
    config = scripted_config(out, repeats=4)
    config.grade = False
    config.concurrency = 4
    config.ray_address = address
    return config


async def test_a_run_on_a_started_cluster_survives_a_killed_worker(
    tmp_path: Path, dairy: Bundle, ray_head: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = _config(tmp_path / "local", ray_head)
    planned = await execute_run(local, scripted_clients(local, dairy), bundle=dairy)
    victim = sorted(k.episode_id for k in planned.planned)[2]
    marker = tmp_path / "killed"

    def factory(cfg: RunConfig, bundle: Bundle) -> dict[str, ModelClient]:
        clients = default_clients(cfg, bundle)
        return {k: DieOnce(c, marker, victim) if k.startswith("candidate:") else c
                for k, c in clients.items()}

    saves: Counter[str] = Counter()
    real = RunStore.save_episode

    def counted(self: RunStore, trace, ledger):  # type: ignore[no-untyped-def]
        saves[trace.episode_id] += 1
        return real(self, trace, ledger)

    monkeypatch.setattr(RunStore, "save_episode", counted)
    config = _config(tmp_path / "ray", ray_head)
    try:
        manifest = await execute_run_ray(config, scripted_clients(config, dairy), bundle=dairy,
                                         client_factory=factory)
    finally:
        if ray.is_initialized():
            ray.shutdown()  # the CLI test below connects from its own process
    assert marker.exists()  # a worker of the cluster died in the middle of the victim episode
    assert manifest.executors == ["ray"]
    assert manifest.completed == len(manifest.planned) == 4 and manifest.skipped == 0
    assert set(saves.values()) == {1} and len(saves) == 4  # nothing lost, nothing doubled
    assert _traces(tmp_path / "ray") == _traces(tmp_path / "local")


def test_callbench_run_by_address_equals_a_local_run(tmp_path: Path, ray_head: str) -> None:
    base = [sys.executable, "-m", "callbench", "run", str(DAIRY), "--candidate", "scripted:reference",
            "--caller", "scripted:plan", "--task-judge", "scripted:met",
            "--conversation-judge", "scripted:met", "--repeats", "2", "--no-grade"]
    env = dict(os.environ)  # with the fixture's auth and loopback settings
    runs = {}
    for name, extra in (("local", []), ("ray", ["--executor", "ray", "--ray-address", ray_head])):
        out = tmp_path / name
        res = run_command([*base, *extra, "--out", str(out)], f"the {name} run to finish", text=True,
                          env=env, stdin=subprocess.DEVNULL)
        assert res.returncode == 0, res.stderr[-2000:]
        runs[name] = _traces(out)
    assert len(runs["local"]) == 2 * len(list(DAIRY.glob("agents/*/scenarios/*.yaml")))
    assert runs["ray"] == runs["local"]


GATED_SAVES = textwrap.dedent(
    """
    import os
    if os.environ.get("CALLBENCH_SUPERVISED") and os.environ.get("SAVE_LOG"):
        import threading, time
        from callbench.runfolder.store import RunStore
        real, one_at_a_time = RunStore.save_episode, threading.Lock()
        def logged(self, trace, ledger):
            with one_at_a_time:
                log = os.environ["SAVE_LOG"]
                gate = os.environ.get("GATE")
                if gate and os.path.exists(log):  # the first save passes, later ones wait for the gate
                    while not os.path.exists(gate):
                        time.sleep(0.05)
                with open(log, "a", encoding="utf-8") as f:
                    f.write(trace.episode_id + "\\n")
                return real(self, trace, ledger)
        RunStore.save_episode = logged
    """
)


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split() if path.exists() else []


def test_a_second_driver_on_the_folder_of_a_cluster_run_is_refused(tmp_path: Path, ray_head: str) -> None:
    """The first driver's saves (in the driver: every trace is written there) are held after its
    first one until the second driver has been refused, so the two surely overlap. The second fails
    at once with the located lock error naming the first driver's pid and host, exit 2, saves
    nothing; the first finishes with every episode saved exactly once."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(GATED_SAVES, encoding="utf-8")
    out, gate = tmp_path / "run", tmp_path / "gate"
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    command = [sys.executable, "-m", "callbench", "run", str(DAIRY), "--candidate", "scripted:reference",
               "--caller", "scripted:plan", "--task-judge", "scripted:met",
               "--conversation-judge", "scripted:met", "--repeats", "4", "--no-grade",
               "--executor", "ray", "--ray-address", ray_head, "--out", str(out)]
    # the fixture's Ray settings, the supervisor on (its child holds the lock)
    env = {k: v for k, v in os.environ.items() if k != "CALLBENCH_NO_SUPERVISOR"}
    env["PYTHONPATH"] = f"{site}{os.pathsep}{Path(__file__).parents[2] / 'src'}"
    first = subprocess.Popen(command, env={**env, "SAVE_LOG": str(first_log), "GATE": str(gate)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             stdin=subprocess.DEVNULL)
    try:
        _wait_for(lambda: len(_lines(first_log)) >= 1, "the first driver's first saved episode", first)
        driver = _children(first.pid)[0]  # the supervised child runs the command and holds the lock
        # refused at once; a second driver let through would wait for the cluster's CPUs instead
        second = run_command(command, "the second driver to be refused",
                             env={**env, "SAVE_LOG": str(second_log)}, text=True, stdin=subprocess.DEVNULL)
        assert first.poll() is None  # the first was still running, holding the folder
    except BaseException:
        first.kill()  # the parent; its child follows it (the supervisor's parent-death signal)
        first.communicate()
        raise
    finally:
        gate.touch()
    _, err1 = finish(first, "the first driver to finish once the gate opened")
    assert second.returncode == 2, second.stderr
    lines = [line for line in second.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, second.stderr
    assert lines[0].startswith(f"error: run folder {out} is in use by callbench run ray "
                               f"(pid {driver} on host {socket.gethostname()}); "), lines[0]
    assert not second_log.exists()  # the second driver saved nothing
    assert first.returncode == 0, err1[-2000:]
    saved = _lines(first_log)
    assert len(saved) == 4 and len(set(saved)) == 4  # every episode once: nothing doubled
    assert sorted(episode_files.paths(out / "traces")) == sorted(saved)
