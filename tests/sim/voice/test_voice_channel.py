"""The voice channel in the channel and the episode, with scripted engines: authored ASR events
replaced (and recorded), VAD splits on the recognised text, pairing across candidates, the cache
(a replay never reruns the recogniser), the trace record and the language refusal."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from tests.fakes.voice_engines import ToneASR, ToneTTS

from callbench.bundle.audio import AudioChannel, LineNoise, PacketLoss
from callbench.bundle.models import AsrEvent, Bundle, ChannelProgram, VadSplit
from callbench.models.base import InfrastructureError
from callbench.models.scripted.models import create_scripted
from callbench.sim.channel import Channel
from callbench.sim.episode import run_episode
from callbench.sim.voice.pipeline import VoiceLine, VoicePipeline
from callbench.sim.voice.setup import line_for, refuse_languages
from callbench.trace import Trace

pytest.importorskip("soxr", reason="the voice channel resamples with soxr: pip install 'callbench[audio]'")
NOISY = AudioChannel(
    noise=LineNoise(kind="white", snr_db=20), packet_loss=PacketLoss(rate=0.05, mean_burst=2)
)
FACTS: dict[str, object] = {"name": "Meena Patel", "farmer_id": "F-2231"}
SAID = "My farmer ID is 4 8 2 1 5, this is Meena Patel"


def _pipeline(cache: Path, **asr_kw: bool) -> tuple[VoicePipeline, ToneTTS, ToneASR]:
    tts = ToneTTS()
    asr = ToneASR(tts, **asr_kw)
    return VoicePipeline(tts=tts, asr=asr, cache_dir=cache), tts, asr


def _channel(
    pipe: VoicePipeline, program: ChannelProgram | None = None, seed: int = 11, cfg: AudioChannel = NOISY
) -> Channel:
    return Channel(program or ChannelProgram(), seed, FACTS, voice=VoiceLine(pipe, cfg), language="en-IN")


def test_recognised_text_replaces_authored_events_and_vad_splits_it(tmp_path: Path) -> None:
    program = ChannelProgram(
        asr_events=[AsrEvent(kind="drop", span="Meena", turn=1)],
        seeded_noise=True,
        vad_splits=[VadSplit(turn=1, after=["ID is"])],
    )
    pipe, _, _ = _pipeline(tmp_path)
    out = _channel(pipe, program).render(SAID, 1, [])
    assert out.voice is not None
    heard = out.voice.observed
    assert heard.startswith("My farmer ID is 4 8 2 1 ") and heard.endswith(", this is Meena Patel")
    assert out.fragments == ["My farmer ID is", heard[len("My farmer ID is ") :]]
    kinds = [(e.kind, e.applied, e.program_path) for e in out.events]
    assert kinds == [
        ("drop", False, "channel.asr_events.0"),
        ("seeded_substitute", False, None),
        ("vad_split", True, "channel.vad_splits.0"),
    ]
    assert "replaced by the voice channel" in out.events[0].detail
    assert out.voice.replaced == ["channel.asr_events.0"]
    digit_ok = heard[len("My farmer ID is 4 8 2 1 ")] == "5"
    assert [(e.kind, e.text, e.survived) for e in out.voice.entities] == [
        ("digits", "4 8 2 1 5", digit_ok),
        ("name", "Meena Patel", True),
    ]
    assert out.voice.wer == (0.0 if digit_ok else 1 / 13)  # 13 intended words, one digit misheard
    assert out.voice.tts["name"] == "tone-tts" and out.voice.line["noise"]["snr_db"] == 20


def test_same_text_and_seed_give_the_same_observed_text_for_every_candidate(tmp_path: Path) -> None:
    # two candidates' episodes, each with its own cache (nothing shared) and the text on another turn
    a, _, _ = _pipeline(tmp_path / "a")
    b, _, _ = _pipeline(tmp_path / "b")
    seen_a = _channel(a).render(SAID, 1, []).voice
    ch_b = _channel(b)
    ch_b.render("Hello?", 1, [])
    seen_b = ch_b.render(SAID, 2, []).voice
    assert seen_a is not None and seen_b is not None
    assert seen_a.observed == seen_b.observed and seen_a.lost_frames == seen_b.lost_frames
    # other seeds meet other noise: the misheard digit follows the line's draws
    heard = {
        _channel(_pipeline(tmp_path / f"s{s}")[0], seed=s).render(SAID, 1, []).voice.observed  # type: ignore[union-attr]
        for s in range(6)
    }
    assert len(heard) > 1


def test_the_cache_serves_a_replay_without_running_the_engines(tmp_path: Path) -> None:
    first, tts1, asr1 = _pipeline(tmp_path)
    rec1 = _channel(first).render(SAID, 1, []).voice
    assert (tts1.calls, asr1.calls) == (1, 1) and first.stats.asr_misses == 1
    again, tts2, asr2 = _pipeline(tmp_path)  # a new process replaying the run folder
    tts2.table.update(tts1.table)
    rec2 = _channel(again).render(SAID, 1, []).voice
    assert (tts2.calls, asr2.calls) == (0, 0) and again.stats.asr_hits == 1
    assert rec1 == rec2
    # the same text said twice in one call meets fresh noise the second time (its own cache entry)
    ch = _channel(again)
    ch.render(SAID, 1, [])
    ch.render(SAID, 2, [])
    assert asr2.calls == 1


def test_a_truncated_decode_is_recorded(tmp_path: Path) -> None:
    pipe, _, _ = _pipeline(tmp_path, truncate=True)
    out = _channel(pipe).render(SAID, 1, [])
    assert out.voice is not None and out.voice.truncated and out.fragments == ["My farmer"]


async def test_an_episode_through_the_voice_channel(bundle: Bundle, dairy, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    agent, scen = dairy
    pipe, _, _ = _pipeline(tmp_path)
    trace = await run_episode(
        agent,
        scen,
        candidate=create_scripted("scripted:reference", None, bundle),
        caller=create_scripted("scripted:plan", None, bundle),
        bundle_name="b",
        bundle_version="1",
        bundle_hash="h",
        episode_id="ep-voice",
        run_seed=3,
        repeat=0,
        voice=VoiceLine(pipe, NOISY),
    )
    assert not trace.skipped and trace.caller_turns
    for turn in trace.caller_turns:
        assert turn.voice is not None and turn.voice.intended == turn.intended
        assert turn.observed == [turn.voice.observed]
        assert trace.messages[turn.message_indices[0]].content == turn.voice.observed
    again = Trace.model_validate_json(trace.canonical_json())
    assert again.caller_turns[0].voice == trace.caller_turns[0].voice


async def test_a_voice_trace_saved_before_line_audio_was_kept_hashes_as_graded(  # type: ignore[no-untyped-def]
        bundle: Bundle, dairy, tmp_path: Path) -> None:
    """A trace written before the voice event had ``line_audio_sha256`` has no such key: read back,
    it serialises to the same bytes and content hash it was graded on (no ``null`` appears)."""
    agent, scen = dairy
    pipe, _, _ = _pipeline(tmp_path)
    trace = await run_episode(
        agent, scen, candidate=create_scripted("scripted:reference", None, bundle),
        caller=create_scripted("scripted:plan", None, bundle), bundle_name="b", bundle_version="1",
        bundle_hash="h", episode_id="ep-old-voice", run_seed=3, repeat=0, voice=VoiceLine(pipe, NOISY),
    )
    assert all(t.voice is not None and t.voice.line_audio_sha256 for t in trace.caller_turns)
    for t in trace.caller_turns:
        assert t.voice is not None
        t.voice.line_audio_sha256 = None
    old_text = trace.canonical_json()
    assert '"line_audio_sha256"' not in old_text  # what the older version wrote
    again = Trace.model_validate_json(old_text)
    assert again.canonical_json() == old_text and again.sha256() == trace.sha256()


def test_which_scenarios_are_spoken_and_the_language_refusal(dairy) -> None:  # type: ignore[no-untyped-def]
    from callbench.sim.voice.setup import VoiceSettings

    _, scen = dairy
    spoken = scen.model_copy(update={"channel": ChannelProgram(audio=AudioChannel())})
    off = scen.model_copy(update={"channel": ChannelProgram(audio=AudioChannel(enabled=False))})
    assert line_for(scen, None) is None and line_for(spoken, None) == AudioChannel()
    assert line_for(off, None) is None and line_for(off, "audio") == AudioChannel(enabled=False)
    assert line_for(spoken, "text") is None and line_for(scen, "audio") == AudioChannel()
    hindi = spoken.model_copy(update={"language": "hi-IN", "id": "hi_call"})
    line = refuse_languages([spoken, hindi], None, VoiceSettings())
    assert line is not None and "\n" not in line
    assert line.startswith("scenario hi_call is in hi-IN, and the offline voice channel is English only")
    assert refuse_languages([hindi], "text", VoiceSettings()) is None
    assert refuse_languages([hindi], None, VoiceSettings(engines="openai", base_url="http://x/v1")) is None


def test_a_noise_recording_is_mixed_in_and_its_hash_recorded(tmp_path: Path) -> None:
    import numpy as np

    from callbench.sim.voice.line import Audio, write_wav

    rec = np.random.default_rng(0).standard_normal(8000).astype(np.float32) * 0.1
    (tmp_path / "cafe.wav").write_bytes(write_wav(Audio(rec, 8000)))
    cfg = AudioChannel(noise=LineNoise(kind="file", path="cafe.wav", snr_db=0))
    tts = ToneTTS()
    pipe = VoicePipeline(tts=tts, asr=ToneASR(tts), cache_dir=tmp_path / "c", bundle_root=tmp_path)
    ev = _channel(pipe, cfg=cfg).render(SAID, 1, []).voice
    assert ev is not None and ev.line["noise"]["path"] == "cafe.wav"
    assert ev.line["noise"]["sha256"] == hashlib.sha256((tmp_path / "cafe.wav").read_bytes()).hexdigest()
    missing = AudioChannel(noise=LineNoise(kind="file", path="gone.wav"))
    with pytest.raises(InfrastructureError, match=r"gone\.wav: cannot read the noise file"):
        _channel(pipe, cfg=missing).render(SAID, 1, [])
