"""The joined whisper-base folder in the cache is callbench's own copy: a damaged copy (its
model.bin or a copied tokenizer/config file changed, same size or not) was refused with the advice
to reinstall the packages, which never repaired it (the broken copy stayed in the cache), and a
copied file of the same size was never checked at all. Now each copy is checked against its
recorded SHA-256 and made again from the verified packages; damaged packages are still refused.
The packages here are small stand-ins on ``sys.path`` with their own recorded hashes."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from callbench.sim.voice import weights
from callbench.sim.voice.weights import PinnedFile


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def fake_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Two stand-in part packages and their pins; yields the site folder."""
    site = tmp_path / "site"
    one, two = b"first part of the model|" * 50, b"second part" * 40
    files = {"config.json": b'{"a": 1}', "tokenizer.json": b'{"t": [1, 2, 3]}', "vocabulary.json": b"[]"}
    (site / "fake_base_1" / "data").mkdir(parents=True)
    (site / "fake_base_2" / "data").mkdir(parents=True)
    for pkg in ("fake_base_1", "fake_base_2"):
        (site / pkg / "__init__.py").write_text("")
    (site / "fake_base_1" / "data" / "model.bin.part1").write_bytes(one)
    (site / "fake_base_2" / "data" / "model.bin.part2").write_bytes(two)
    for name, data in files.items():
        (site / "fake_base_2" / "data" / name).write_bytes(data)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(weights, "WHISPER_BASE_PARTS", (
        PinnedFile("fake_base_1", "data/model.bin.part1", len(one), _sha(one)),
        PinnedFile("fake_base_2", "data/model.bin.part2", len(two), _sha(two)),
    ))
    monkeypatch.setattr(weights, "WHISPER_BASE_FILES", tuple(
        PinnedFile("fake_base_2", f"data/{n}", 0, _sha(d)) for n, d in files.items()))
    monkeypatch.setattr(weights, "WHISPER_BASE_MODEL_SHA256", _sha(one + two))
    yield site
    for pkg in ("fake_base_1", "fake_base_2"):
        sys.modules.pop(pkg, None)


def test_a_damaged_joined_model_is_joined_again(fake_base: Path, tmp_path: Path) -> None:
    root = tmp_path / "cache"
    folder = weights.whisper_base_dir(root=root)
    model = folder / "model.bin"
    good = model.read_bytes()
    assert _sha(good) == weights.WHISPER_BASE_MODEL_SHA256
    model.write_bytes(b"X" + good[1:])  # same size, other bytes
    assert weights.whisper_base_dir(root=root) == folder
    assert model.read_bytes() == good


def test_a_damaged_copied_file_of_the_same_size_is_copied_again(fake_base: Path, tmp_path: Path) -> None:
    root = tmp_path / "cache"
    folder = weights.whisper_base_dir(root=root)
    tok = folder / "tokenizer.json"
    good = tok.read_bytes()
    tok.write_bytes(good.replace(b"1", b"9"))
    assert len(tok.read_bytes()) == len(good)
    weights.whisper_base_dir(root=root)
    assert tok.read_bytes() == good


def test_damaged_packages_are_still_refused_in_one_line(fake_base: Path, tmp_path: Path) -> None:
    part = fake_base / "fake_base_2" / "data" / "model.bin.part2"
    data = part.read_bytes()
    part.write_bytes(b"Y" + data[1:])
    with pytest.raises(weights.VoiceWeightsError) as err:
        weights.whisper_base_dir(root=tmp_path / "cache")
    assert "SHA-256" in str(err.value) and "\n" not in str(err.value)
    assert not list((tmp_path / "cache").rglob("model.bin*"))  # no half-joined file is left behind


def test_a_model_folder_of_garbage_is_a_one_line_engine_error(tmp_path: Path) -> None:
    pytest.importorskip("faster_whisper", reason="no faster-whisper: pip install 'callbench[audio]'")
    from callbench.sim.voice.engines import VoiceEngineError, WhisperASR

    for name in ("model.bin", "config.json", "tokenizer.json"):
        (tmp_path / name).write_text("garbage\n")
    # ctranslate2 raises a RuntimeError: it was a traceback at the run's start
    with pytest.raises(VoiceEngineError) as err:
        WhisperASR(tmp_path, label="user:garbage")
    msg = str(err.value)
    assert msg.startswith(f"whisper model folder {tmp_path}: cannot load it: ") and "\n" not in msg
