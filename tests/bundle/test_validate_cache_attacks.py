"""Attacks on ``callbench validate``'s result cache (``bundle/validate/cache.py``): staleness (a
change the key misses would replay a wrong result) and poisoning (a hostile or damaged cache
folder must never break, hang or change ``validate``). Each test runs the real command with the
cache on in a temporary folder."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from callbench.bundle.validate import cache as validate_cache
from callbench.cli import bundle as cli_bundle
from waiting import limit

from .conftest import MiniBundle, validate_cli

OPTIONS = {"json": "False", "providers": "openai,anthropic"}


def _validate(*args: str) -> Any:
    return validate_cli(*args)


def _uncached(monkeypatch: pytest.MonkeyPatch, *args: str) -> Any:
    with monkeypatch.context() as m:
        m.setenv("CALLBENCH_VALIDATE_CACHE", "0")
        return _validate(*args)


def test_same_size_and_mtime_content_change_is_a_miss(cache: Path, bundle: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    mb = MiniBundle(bundle)
    target = mb.scenario_file()
    first = _validate(str(bundle))
    assert first.exit_code == 0
    st = target.stat()
    text = target.read_text(encoding="utf-8")
    # the agent id referenced by the scenario, one letter changed: same size, a broken reference
    agent = mb.read(target)["agent"]
    changed = text.replace(f"agent: {agent}", f"agent: {agent[:-1]}{'x' if agent[-1] != 'x' else 'y'}", 1)
    assert changed != text and len(changed.encode()) == len(text.encode())
    target.write_text(changed, encoding="utf-8")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert target.stat().st_size == st.st_size and target.stat().st_mtime_ns == st.st_mtime_ns
    second = _validate(str(bundle))
    assert second.exit_code == 1 and second.stdout == _uncached(monkeypatch, str(bundle)).stdout


def test_added_removed_renamed_files_and_empty_folders(cache: Path, bundle: Path) -> None:
    keys = [validate_cache.cache_key(bundle, OPTIONS)]
    (bundle / "extra.txt").write_text("x", encoding="utf-8")
    keys.append(validate_cache.cache_key(bundle, OPTIONS))
    (bundle / "extra.txt").rename(bundle / "extra2.txt")
    keys.append(validate_cache.cache_key(bundle, OPTIONS))
    (bundle / "extra2.txt").unlink()
    (bundle / "empty").mkdir()
    keys.append(validate_cache.cache_key(bundle, OPTIONS))
    (bundle / "empty").rmdir()
    keys.append(validate_cache.cache_key(bundle, OPTIONS))
    assert None not in keys
    # every state but the last (the original again) is its own key, an empty folder included
    assert len(set(keys[:4])) == 4 and keys[4] == keys[0]


def test_symlinked_file_outside_the_bundle_whose_target_changes(
        cache: Path, bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader reports a symlink out of the bundle (``path.escape``) without reading the
    target, so the result must not depend on the target: edited or removed, the cached result
    stays the true one."""
    mb = MiniBundle(bundle)
    scenario = mb.scenario_file()
    outside = tmp_path / "outside.yaml"
    shutil.move(scenario, outside)
    scenario.symlink_to(outside)
    first = _validate(str(bundle))
    assert first.exit_code == 1 and "[path.escape]" in first.stdout
    mb.edit(outside, lambda d: d.update(agent="nobody"))
    assert _validate(str(bundle)).stdout == _uncached(monkeypatch, str(bundle)).stdout == first.stdout
    outside.unlink()
    assert _validate(str(bundle)).stdout == _uncached(monkeypatch, str(bundle)).stdout


def test_symlinked_folder_outside_the_bundle_whose_content_changes(
        cache: Path, bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mb = MiniBundle(bundle)
    scenarios = mb.scenario_file().parent
    outside = tmp_path / "outside_scenarios"
    shutil.move(scenarios, outside)
    scenarios.symlink_to(outside, target_is_directory=True)
    first = _validate(str(bundle))
    assert first.exit_code == 1 and "[path.escape]" in first.stdout
    mb.edit(outside / mb.scenario_file().name, lambda d: d.update(agent="nobody"))
    (outside / "new.yaml").write_text("{}", encoding="utf-8")
    second = _validate(str(bundle))
    truth = _uncached(monkeypatch, str(bundle))
    assert "new.yaml" in truth.stdout  # the loader lists the linked folder: outside state counts
    assert (second.exit_code, second.stdout) == (truth.exit_code, truth.stdout)
    assert validate_cache.cache_key(bundle, OPTIONS) is None


def test_an_empty_agent_folder_added_is_a_miss(cache: Path, bundle: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty folder under agents/ is a problem ("no agent.yaml in this agent folder"): the
    key must change when a folder appears, even with no file in it."""
    assert _validate(str(bundle)).exit_code == 0
    (bundle / "agents" / "ghost").mkdir()
    got = _validate(str(bundle))
    truth = _uncached(monkeypatch, str(bundle))
    assert truth.exit_code == 1 and "no agent.yaml" in truth.stdout
    assert (got.exit_code, got.stdout) == (truth.exit_code, truth.stdout)


def test_a_fifo_in_the_bundle_does_not_hang_the_key(cache: Path, bundle: Path) -> None:
    """A named pipe (or a device) under the bundle: opening it for the hash would block forever
    with no writer. The key must not read it (no caching), and must return."""
    os.mkfifo(bundle / "pipe")
    done: list[str | None] = []
    worker = threading.Thread(target=lambda: done.append(validate_cache.cache_key(bundle, OPTIONS)),
                              daemon=True)
    worker.start()
    worker.join(limit(120.0))  # a safety net: the call returns at once unless it blocks
    if worker.is_alive():  # unblock the reader so the thread ends
        fd = os.open(bundle / "pipe", os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        worker.join(5)
        pytest.fail("cache_key blocked opening a FIFO in the bundle")
    assert done == [None]


def test_permissions_change(cache: Path, bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unreadable file: not cached for a user it stops; root reads it anyway, and then the mode
    does not change validate's result, so the same key is right."""
    target = MiniBundle(bundle).scenario_file()
    key = validate_cache.cache_key(bundle, OPTIONS)
    target.chmod(0)
    try:
        after = validate_cache.cache_key(bundle, OPTIONS)
        if os.geteuid() == 0:
            assert after == key
            assert _validate(str(bundle)).stdout == _uncached(monkeypatch, str(bundle)).stdout
        else:
            assert after is None
    finally:
        target.chmod(stat.S_IRUSR | stat.S_IWUSR)


def test_relative_paths_from_different_working_folders(
        cache: Path, bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").mkdir()
    results = []
    for cwd, arg in ((tmp_path, "bundle"), (tmp_path / "a", "../bundle"), (bundle, ".")):
        monkeypatch.chdir(cwd)
        got = _validate(arg)
        truth = _uncached(monkeypatch, arg)
        assert (got.exit_code, got.stdout, got.stderr) == (truth.exit_code, truth.stdout, truth.stderr)
        results.append(got.stdout)
    assert all(r.startswith("OK:") for r in results)


def _entry(cache: Path) -> Path:
    (entry,) = cache.glob("*.json")
    return entry


def test_a_huge_entry_is_not_read_whole(cache: Path, bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry over MAX_ENTRY_BYTES is ignored (read at most that much plus one byte), replaced
    by the true result; a sparse 200 MB entry costs no more than that bound."""
    first = _validate(str(bundle))
    entry = _entry(cache)
    with open(entry, "wb") as f:
        f.truncate(200 * 1024 * 1024)
    assert validate_cache.load(entry.stem) is None
    monkeypatch.setattr(validate_cache, "MAX_ENTRY_BYTES", 4096)
    forged = {"lines": [["out", "OK: forged " + "x" * 8000]], "exit_code": 0}
    entry.write_text(json.dumps(forged), encoding="utf-8")
    assert validate_cache.load(entry.stem) is None
    again = _validate(str(bundle))
    assert (again.exit_code, again.stdout) == (first.exit_code, first.stdout)
    assert entry.stat().st_size < 4096
    # an output over the bound is not written at all (it could never be loaded)
    validate_cache.save("big", validate_cache.Replay(lines=(("out", "y" * 5000),), exit_code=1))
    assert not (cache / "big.json").exists()


def test_a_symlinked_entry_is_not_followed(cache: Path, bundle: Path, tmp_path: Path) -> None:
    """An entry that is a symlink (to /dev/zero it would never end; to another user's file it
    would replay their text) is ignored and replaced by a real file."""
    first = _validate(str(bundle))
    entry = _entry(cache)
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps({"lines": [["out", "OK: forged"]], "exit_code": 0}), encoding="utf-8")
    entry.unlink()
    entry.symlink_to(forged)
    again = _validate(str(bundle))
    assert "forged" not in again.stdout and again.stdout == first.stdout
    assert not entry.is_symlink() and forged.read_text(encoding="utf-8").count("forged") == 1
    entry.unlink()
    entry.symlink_to("/dev/zero")
    done: list[Any] = []
    worker = threading.Thread(target=lambda: done.append(validate_cache.load(entry.stem)), daemon=True)
    worker.start()
    worker.join(limit(120.0))  # a safety net: the call returns at once unless it blocks
    assert not worker.is_alive(), "load() read /dev/zero without end"
    assert done == [None]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_read_only_cache_folder_never_fails(cache: Path, bundle: Path) -> None:
    cache.mkdir(parents=True)
    cache.chmod(0o500)
    try:
        assert _validate(str(bundle)).exit_code == 0
    finally:
        cache.chmod(0o700)


def test_unwritable_or_full_cache_never_fails(cache: Path, bundle: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk (ENOSPC on write), a cache folder that is a file: validate still succeeds."""
    cache.parent.mkdir(parents=True)
    cache.write_text("not a folder", encoding="utf-8")
    assert _validate(str(bundle)).exit_code == 0
    cache.unlink()

    def read_only(*_a: object, **_k: object) -> None:  # what a read-only folder does to a non-root user
        raise PermissionError(13, "Permission denied")

    with monkeypatch.context() as m:
        m.setattr(validate_cache.tempfile, "mkstemp", read_only)
        assert _validate(str(bundle)).stdout.startswith("OK:")

    real_fdopen = os.fdopen

    class Full:
        def __init__(self, f: Any) -> None:
            self.f = f

        def __enter__(self) -> Full:
            return self

        def __exit__(self, *a: object) -> None:
            self.f.close()

        def write(self, _s: str) -> int:
            raise OSError(28, "No space left on device")

    def fdopen(fd: int, mode: str = "r", *a: Any, **k: Any) -> Any:
        f = real_fdopen(fd, mode, *a, **k)
        return Full(f) if "w" in mode else f

    monkeypatch.setattr(validate_cache.os, "fdopen", fdopen)
    result = _validate(str(bundle))
    assert result.exit_code == 0 and result.stdout.startswith("OK:")
    assert not list(cache.glob("*")), "a half-written temporary file was left"


def test_concurrent_validates_write_one_whole_entry(cache: Path, bundle: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(validate_cache.__file__).parents[3])}
    cmd = ["nice", "-n", "19", sys.executable, "-m", "callbench", "validate", str(bundle)]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    outs = [p.communicate(timeout=limit(600)) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    assert len({o for o, _e in outs}) == 1 and all(e == "" for _o, e in outs)
    entries = list(cache.iterdir())
    assert len(entries) == 1 and entries[0].suffix == ".json"
    assert validate_cache.load(entries[0].stem) is not None


def test_json_output_replayed_byte_identical(cache: Path, bundle: Path) -> None:
    mb = MiniBundle(bundle)
    mb.edit(mb.scenario_file(), lambda d: d.update(agent="nobody", note="caf\u00e9 \u2014 \u00fc"))
    first = _validate(str(bundle), "--json")
    second = _validate(str(bundle), "--json")
    assert first.exit_code == second.exit_code == 1
    assert first.stdout_bytes == second.stdout_bytes and first.stderr_bytes == second.stderr_bytes
    assert json.loads(second.stdout)


def test_an_edit_during_the_audits_is_not_filed_under_the_old_key(
        cache: Path, bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundle edited while validate runs (an editor saving, a generator writing): the result
    is of the new content, so it must not be kept under the key of the content before; going back
    to that content must give that content's result, not the edit's."""
    mb = MiniBundle(bundle)
    target = mb.scenario_file()
    original = target.read_bytes()
    real = cli_bundle._validate_uncached

    def edit_then_validate(*a: Any) -> Any:
        mb.edit(target, lambda d: d.update(agent="nobody"))
        return real(*a)

    with monkeypatch.context() as m:
        m.setattr(cli_bundle, "_validate_uncached", edit_then_validate)
        assert _validate(str(bundle)).exit_code == 1
    target.write_bytes(original)
    again = _validate(str(bundle))
    assert again.exit_code == 0 and again.stdout.startswith("OK:"), again.stdout
