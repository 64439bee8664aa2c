"""The voice cache is derived data: an entry that cannot be read (a transcript file that is valid
JSON but not a transcript record, a synthesised WAV cut short) is computed again. Before, a
transcript record without its keys raised ``KeyError`` out of the episode (neither an engine nor an
input error), and a damaged WAV failed every later episode that said the same text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.fakes.voice_engines import ToneASR, ToneTTS

from callbench.bundle.audio import AudioChannel
from callbench.sim.voice.keys import TTS_FOLDER
from callbench.sim.voice.pipeline import VoicePipeline

pytest.importorskip("soxr", reason="the voice channel resamples with soxr: pip install 'callbench[audio]'")
TEXT = "Your account 4 8 2 1 5 is active"


def _observe(pipe: VoicePipeline):  # type: ignore[no-untyped-def]
    return pipe.observe(TEXT, "en", AudioChannel(), channel_seed=7, occurrence=0, turn=1)


@pytest.mark.parametrize("blob", ["{}", '{"text": 5, "truncated": false, "tokens": 1, "lost_frames": 0, '
                                        '"frames": 1}', "[]", "null"])
def test_a_transcript_record_that_is_not_one_is_recognised_again(tmp_path: Path, blob: str) -> None:
    tts = ToneTTS()
    asr = ToneASR(tts)
    pipe = VoicePipeline(tts=tts, asr=asr, cache_dir=tmp_path)
    first = _observe(pipe)
    (entry,) = (tmp_path / "asr").glob("*.json")
    entry.write_text(blob, encoding="utf-8")
    again = _observe(VoicePipeline(tts=tts, asr=asr, cache_dir=tmp_path))
    assert again == first and asr.calls == 2
    assert json.loads(entry.read_text(encoding="utf-8"))["text"] == first.observed  # written anew


def test_a_damaged_synthesis_is_synthesised_again(tmp_path: Path) -> None:
    tts = ToneTTS()
    pipe = VoicePipeline(tts=tts, asr=ToneASR(tts), cache_dir=tmp_path)
    first = pipe.measure(TEXT, "en")
    (wav,) = (tmp_path / TTS_FOLDER).glob("*.wav")
    wav.write_bytes(wav.read_bytes()[:20])
    again = VoicePipeline(tts=tts, asr=ToneASR(tts), cache_dir=tmp_path).measure(TEXT, "en")
    assert again == first and tts.calls == 2
