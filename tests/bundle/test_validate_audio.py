"""``channel.audio`` in a scenario: its settings are typed, and a noise file must be a PCM WAV
inside the bundle."""

from __future__ import annotations

import io
import wave
from typing import Any

from .conftest import MiniBundle


def _noise(path: str) -> Any:
    return lambda d: d.setdefault("channel", {}).update(
        audio={"noise": {"kind": "file", "path": path, "snr_db": 5}}
    )


def _wav(frames: int = 800) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x01\x00" * frames)
    return buf.getvalue()


def test_a_noise_file_in_the_bundle_is_clean(mb: MiniBundle) -> None:
    (mb.root / "noise").mkdir()
    (mb.root / "noise" / "cafe.wav").write_bytes(_wav())
    mb.edit_scenario(_noise("noise/cafe.wav"))
    assert [p for p in mb.problems() if p.code.startswith(("channel", "path", "schema"))] == []


def test_missing_bad_and_escaping_noise_files(mb: MiniBundle) -> None:
    mb.edit_scenario(_noise("noise/none.wav"))
    [p] = mb.only("channel.audio_file")
    assert p.path == "channel.audio.noise.path" and "'noise/none.wav' does not exist" in p.message
    (mb.root / "bad.wav").write_bytes(b"not a wav at all")
    mb.edit_scenario(_noise("bad.wav"))
    [p] = mb.only("channel.audio_file")
    assert "is not a readable PCM WAV file" in p.message
    (mb.root.parent / "outside.wav").write_bytes(_wav())
    mb.edit_scenario(_noise("../outside.wav"))
    [p] = mb.only("path.escape")
    assert p.path == "channel.audio.noise.path" and "outside the bundle" in p.message


def test_audio_settings_are_typed(mb: MiniBundle) -> None:
    mb.edit_scenario(
        lambda d: d.setdefault("channel", {}).update(audio={"codec": "gsm", "noise": {"kind": "file"}})
    )
    got = {p.path: p.message for p in mb.problems() if p.code == "schema"}
    assert "'pcmu', 'pcma' or 'none'" in got["channel.audio.codec"]
    assert "needs a path" in got["channel.audio.noise"]
