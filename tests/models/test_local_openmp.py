"""How llama.cpp's OpenMP threads wait is chosen from the load other processes put on the cores
(callbench.models.local.openmp); no llama.cpp needed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from callbench.models.local import openmp
from callbench.models.local.openmp import choose_wait_policy, configure_wait_policy, other_cpu_load


@pytest.mark.parametrize(
    ("threads", "cores", "load", "policy"),
    [
        (2, 2, 0.0, None),  # idle machine: let threads spin (2x faster generation, measured)
        (2, 2, 0.29, None),
        (2, 2, 0.31, "PASSIVE"),  # another process wants a core: sleep at barriers
        (2, 2, 1.0, "PASSIVE"),
        (1, 2, 1.2, None),  # one thread, one core left for the others
        (1, 2, 1.4, "PASSIVE"),
        (2, 2, None, "PASSIVE"),  # unknown load and every core used: the safe choice
        (2, 8, None, None),
    ],
)
def test_policy_follows_other_processes_load(threads: int, cores: int, load: float | None,
                                             policy: str | None) -> None:
    assert choose_wait_policy(threads, cores, load) == policy


def _stat(busy: int, idle: int) -> str:
    # cpu user nice system idle iowait irq softirq steal guest guest_nice
    return f"cpu  {busy - 10} 0 10 {idle} 0 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"


def test_other_load_counts_ticks_without_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stat = tmp_path / "stat"
    stat.write_text(_stat(busy=100, idle=900), encoding="ascii")
    clock = iter([0.0, 0.5])
    own = iter([1.0, 1.1])
    monkeypatch.setattr(openmp.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(openmp.time, "process_time", lambda: next(own))
    monkeypatch.setattr(openmp.os, "cpu_count", lambda: 2)
    # 100 ticks pass in 0.5 s on 2 cores (0.01 core-second a tick); 50 of them busy (0.5 s), 0.1 s
    # of which was this process: others used 0.4 s in 0.5 s = 0.8 cores
    monkeypatch.setattr(openmp.time, "sleep", lambda s: stat.write_text(_stat(busy=150, idle=950), "ascii"))
    assert other_cpu_load(0.5, stat) == pytest.approx(0.8)


def test_other_load_unknown_without_proc_stat(tmp_path: Path) -> None:
    assert other_cpu_load(0.0, tmp_path / "missing") is None
    bad = tmp_path / "stat"
    bad.write_text("intr 1 2 3\n", encoding="ascii")
    assert other_cpu_load(0.0, bad) is None


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="Linux only")
def test_other_load_on_this_machine_is_a_share_of_its_cores() -> None:
    load = other_cpu_load(0.1)
    assert load is not None and 0.0 <= load <= (openmp.os.cpu_count() or 1) + 0.5


def test_configure_keeps_the_environment_and_sets_passive_under_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert configure_wait_policy(2) == "OMP_WAIT_POLICY=ACTIVE (from the environment)"
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.delitem(sys.modules, "llama_cpp", raising=False)
    monkeypatch.setattr(openmp.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(openmp, "other_cpu_load", lambda: 0.9)
    assert configure_wait_policy(2) == "OMP_WAIT_POLICY=PASSIVE: other processes used 0.90 cores of 2"
    assert openmp.os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.setattr(openmp, "other_cpu_load", lambda: 0.05)
    assert configure_wait_policy(2).startswith("libgomp default (spin, then sleep)")
    assert "OMP_WAIT_POLICY" not in openmp.os.environ
    monkeypatch.setitem(sys.modules, "llama_cpp", object())
    monkeypatch.setattr(openmp, "other_cpu_load", lambda: 1.9)
    assert configure_wait_policy(2) == "libgomp default (llama_cpp was already loaded)"
    assert "OMP_WAIT_POLICY" not in openmp.os.environ
