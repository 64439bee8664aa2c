"""A user's own recogniser folder (``--voice-asr-model``) or piper voice (``--voice-tts-model``)
was recorded by its name only: replacing the weights under the same name kept the cache keys, so
a replay served transcripts and audio of the old model as the new one's, and a resume with the
new weights was not refused. Their content (SHA-256 of ``model.bin``, of the ``.onnx``) is now in
the engine's recorded settings, which key the cache and the manifest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from callbench.sim.voice import setup
from callbench.sim.voice.setup import VoiceSettings, build_engines


class _FakeASR:
    def __init__(self, model_dir: Path, *, label: str, **_: Any) -> None:
        self.label = label


def _asr_label(folder: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(setup, "WhisperASR", _FakeASR)
    monkeypatch.setattr(setup, "PiperTTS", lambda *a, **k: None)
    _, asr = build_engines(VoiceSettings(asr_model=folder, tts_model=folder / "v.onnx"))
    assert isinstance(asr, _FakeASR)
    return asr.label


def test_a_user_recogniser_is_recorded_by_its_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CALLBENCH_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "my-whisper"
    folder.mkdir()
    (folder / "model.bin").write_bytes(b"weights one")
    first = _asr_label(folder, monkeypatch)
    assert first.startswith("user:my-whisper sha256:") and _asr_label(folder, monkeypatch) == first
    (folder / "model.bin").write_bytes(b"weights two")
    second = _asr_label(folder, monkeypatch)
    assert second.startswith("user:my-whisper sha256:") and second != first


def test_a_user_piper_voice_is_recorded_by_its_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("piper", reason="piper-tts is not installed: pip install 'callbench[audio]'")
    monkeypatch.setenv("CALLBENCH_CACHE_DIR", str(tmp_path / "cache"))
    from callbench.sim.voice.piper import PiperTTS

    onnx = tmp_path / "mine.onnx"
    onnx.write_bytes(b"voice one")
    (tmp_path / "mine.onnx.json").write_text("{}")
    first = PiperTTS(onnx, fingerprint=True).info.settings
    onnx.write_bytes(b"voice two")
    second = PiperTTS(onnx, fingerprint=True).info.settings
    assert first["voice"] == second["voice"] == "mine"
    assert len(first["voice_sha256"]) == 64 and first["voice_sha256"] != second["voice_sha256"]
    assert "voice_sha256" not in PiperTTS(onnx).info.settings  # the packaged voice is pinned by its hash
