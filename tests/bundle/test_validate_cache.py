"""``callbench validate``'s result cache (``bundle/validate/cache.py``): a hit replays the same
lines and exit code without running the audits; any change to what the result depends on (a
bundle byte, a symlink, an option, callbench's code) is a miss; a damaged entry is ignored."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from callbench.bundle.validate import cache as validate_cache
from callbench.cli import bundle as cli_bundle
from waiting import limit

from .conftest import MiniBundle, validate_cli


def _validate(*args: str) -> Any:
    return validate_cli(*args)


def _no_audits(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a: object) -> None:
        raise AssertionError("the audits ran: expected a cache hit")

    monkeypatch.setattr(cli_bundle, "_validate_uncached", refuse)


def test_a_hit_replays_the_same_lines_and_code_without_auditing(
        cache: Path, bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _validate(str(bundle))
    assert first.exit_code == 0 and "2 scenario(s), no problems" in first.stdout
    assert len(list(cache.glob("*.json"))) == 1
    _no_audits(monkeypatch)
    second = _validate(str(bundle))
    assert (second.exit_code, second.stdout, second.stderr) == (first.exit_code, first.stdout, first.stderr)


def test_problems_and_their_order_across_streams_are_replayed(
        cache: Path, bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mb = MiniBundle(bundle)
    mb.edit(mb.scenario_file(), lambda d: d.update(agent="nobody"))
    first = _validate(str(bundle))
    assert first.exit_code == 1 and "problem(s) in" in first.stdout
    key = validate_cache.cache_key(bundle, {"json": "False", "providers": "openai,anthropic"})
    assert key is not None
    saved = validate_cache.load(key)
    assert saved is not None and saved.exit_code == 1
    assert [text for _s, text in saved.lines if _s == "out"] == first.stdout.splitlines()
    _no_audits(monkeypatch)
    assert _validate(str(bundle)).stdout == first.stdout


def test_a_changed_byte_a_symlink_or_an_option_is_a_miss(cache: Path, bundle: Path) -> None:
    options = {"json": "False", "providers": "openai,anthropic"}
    key = validate_cache.cache_key(bundle, options)
    mb = MiniBundle(bundle)
    text = mb.scenario_file().read_text(encoding="utf-8")
    mb.scenario_file().write_text(text + "\n", encoding="utf-8")  # one byte more, same meaning
    key2 = validate_cache.cache_key(bundle, options)
    assert None not in (key, key2) and key != key2
    (bundle / "notes").symlink_to("somewhere")
    key3 = validate_cache.cache_key(bundle, options)
    os.unlink(bundle / "notes")
    (bundle / "notes").symlink_to("elsewhere")
    key4 = validate_cache.cache_key(bundle, options)
    assert len({key2, key3, key4}) == 3
    assert validate_cache.cache_key(bundle, {**options, "json": "True"}) != key4
    # the bundle.yaml given instead of its folder is another command line: another key
    assert validate_cache.cache_key(bundle / "bundle.yaml", options) not in (None, key4)


def test_a_change_in_callbench_code_is_a_miss(cache: Path, bundle: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "pkg" / "callbench"
    (package / "bundle" / "validate").mkdir(parents=True)
    module = package / "bundle" / "validate" / "cache.py"
    module.write_text("# 1\n", encoding="utf-8")
    monkeypatch.setattr(validate_cache, "__file__", str(module))
    options = {"json": "False"}
    key = validate_cache.cache_key(bundle, options)
    (package / "bundle" / "loader.py").write_text("# an audit changed\n", encoding="utf-8")
    assert validate_cache.cache_key(bundle, options) != key


def test_damaged_entries_are_ignored_and_rewritten(cache: Path, bundle: Path) -> None:
    first = _validate(str(bundle))
    (entry,) = cache.glob("*.json")
    for damage in ("not json", json.dumps({"lines": [["out", "OK: forged"]], "exit_code": 7}),
                   json.dumps({"lines": [["stdin", "x"]], "exit_code": 0}), json.dumps([1, 2])):
        entry.write_text(damage, encoding="utf-8")
        again = _validate(str(bundle))
        assert (again.exit_code, again.stdout) == (first.exit_code, first.stdout), damage
        assert json.loads(entry.read_text(encoding="utf-8"))["exit_code"] == 0


def test_off_unreadable_paths_and_bad_options_are_not_cached(
        cache: Path, bundle: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert _validate(str(bundle), "--providers", "nonsense").exit_code == 2
    assert _validate(str(tmp_path / "missing")).exit_code == 2
    assert not cache.exists() or not list(cache.glob("*.json"))
    monkeypatch.setenv("CALLBENCH_VALIDATE_CACHE", "0")
    assert _validate(str(bundle)).exit_code == 0
    assert not cache.exists() or not list(cache.glob("*.json"))


def test_the_cache_keeps_at_most_max_entries(cache: Path, bundle: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(validate_cache, "MAX_ENTRIES", 3)
    for i in range(5):
        validate_cache.save(f"k{i}", validate_cache.Replay(lines=(("out", f"line {i}"),), exit_code=0))
        os.utime(cache / f"k{i}.json", ns=(i * 10**9, i * 10**9))
    validate_cache.save("k5", validate_cache.Replay(lines=(("out", "line 5"),), exit_code=0))
    assert sorted(p.stem for p in cache.glob("*.json")) == ["k3", "k4", "k5"]
    assert validate_cache.load("k5") == validate_cache.Replay(lines=(("out", "line 5"),), exit_code=0)
    assert not list(cache.glob(".tmp-*"))


def test_without_the_variable_only_the_command_uses_the_cache(
        tmp_path: Path, bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset, the cache serves the ``callbench`` command (a new process) but never the app
    invoked in-process, whose patched code must run (``callbench.RUNNING_AS_COMMAND``)."""
    import subprocess
    import sys

    monkeypatch.delenv("CALLBENCH_VALIDATE_CACHE", raising=False)
    monkeypatch.setenv("CALLBENCH_CACHE_DIR", str(tmp_path / "cache"))
    entries = tmp_path / "cache" / "validate"
    assert _validate(str(bundle)).exit_code == 0
    assert not entries.exists() or not list(entries.glob("*.json"))
    env = {k: v for k, v in os.environ.items() if k != "CALLBENCH_VALIDATE_CACHE"}
    done = subprocess.run([sys.executable, "-m", "callbench", "validate", str(bundle)], env=env,
                          capture_output=True, text=True, timeout=limit(600))
    assert done.returncode == 0, done.stderr
    assert "2 scenario(s), no problems" in done.stdout
    assert len(list(entries.glob("*.json"))) == 1
