"""Requantised copies of the embedded weights, with a fake quantizer (no llama.cpp needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from callbench.models.local import requantize
from callbench.models.local.requantize import ensure_requantized
from callbench.models.local.weights import WeightsError, WeightsVariant


class FakeQuantizer:
    def __init__(self, output: bytes = b"GGUF-q4_0-copy", fail: bool = False) -> None:
        self.output, self.fail, self.calls = output, fail, 0

    def __call__(self, source: Path, destination: Path, quant: str) -> None:
        self.calls += 1
        assert source.read_bytes().startswith(b"GGUF-first")  # the verified pinned file
        destination.write_bytes(b"half-written")
        if self.fail:
            raise WeightsError("llama.cpp could not requantise (return code 1)")
        destination.write_bytes(self.output)


def test_copy_is_made_once_and_described_by_its_marker(fake_parts: WeightsVariant, tmp_path: Path) -> None:
    quantizer = FakeQuantizer()
    path = ensure_requantized("fake", "q4_0", quantize=quantizer)
    assert path == tmp_path / "cache" / "models" / f"{fake_parts.sha256}-q4_0.gguf"
    assert path.read_bytes() == b"GGUF-q4_0-copy"
    marker = json.loads(path.with_name(path.name + ".json").read_text())
    assert marker["source_sha256"] == fake_parts.sha256 and marker["quant"] == "q4_0"
    assert marker["size"] == len(b"GGUF-q4_0-copy") and len(marker["sha256"]) == 64
    assert ensure_requantized("fake", "q4_0", quantize=quantizer) == path
    assert quantizer.calls == 1  # the marker matched: not made again


def test_changed_copy_or_new_llama_version_is_made_again(
    fake_parts: WeightsVariant, monkeypatch: pytest.MonkeyPatch
) -> None:
    quantizer = FakeQuantizer()
    path = ensure_requantized("fake", quantize=quantizer)
    path.write_bytes(b"GGUF-tampered-longer")
    ensure_requantized("fake", quantize=quantizer)
    assert quantizer.calls == 2 and path.read_bytes() == b"GGUF-q4_0-copy"
    monkeypatch.setattr(requantize, "_llama_version", lambda: "9.9.9")
    ensure_requantized("fake", quantize=quantizer)
    assert quantizer.calls == 3


def test_failures_leave_nothing_behind(fake_parts: WeightsVariant, tmp_path: Path) -> None:
    with pytest.raises(WeightsError, match="could not requantise"):
        ensure_requantized("fake", quantize=FakeQuantizer(fail=True))
    with pytest.raises(WeightsError, match="not a GGUF file"):
        ensure_requantized("fake", quantize=FakeQuantizer(output=b"garbage"))
    models = tmp_path / "cache" / "models"
    assert sorted(p.name for p in models.iterdir() if "q4_0" in p.name) == []
    with pytest.raises(WeightsError, match="unknown requantisation 'q2_k'"):
        ensure_requantized("fake", "q2_k", quantize=FakeQuantizer())
    with pytest.raises(WeightsError, match="unknown embedded model 'nope'"):
        ensure_requantized("nope", quantize=FakeQuantizer())
