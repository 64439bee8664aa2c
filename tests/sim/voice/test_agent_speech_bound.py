"""A candidate turn of thousands of words: piper took 8.9 s of wall time for 100 words on the
loaded test machine, so a turn of about 1,500 words ran past the engine's 120 s limit and failed
the episode as a voice-channel fault. Only the first :data:`MAX_TURN_CHARS` characters of a turn
are synthesised now (cut at a word boundary); the cut is recorded (the part's ``spoken`` text is
the said prefix), and the turn's talk time stays estimated from its words, not measured from a
prefix."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.fakes.voice_engines import ToneASR, ToneTTS

from callbench.bundle.audio import AudioChannel
from callbench.bundle.models import ChannelProgram
from callbench.sim.channel import Channel
from callbench.sim.voice.agent import MAX_TURN_CHARS, said_within
from callbench.sim.voice.line import Audio
from callbench.sim.voice.pipeline import VoiceLine, VoicePipeline
from callbench.sim.voice.score import speakable

pytest.importorskip("soxr", reason="the voice channel resamples with soxr: pip install 'callbench[audio]'")


class LengthTTS(ToneTTS):
    def __init__(self) -> None:
        super().__init__()
        self.lengths: list[int] = []

    def synthesize(self, text: str, language: str) -> Audio:
        self.lengths.append(len(text))
        return super().synthesize(text, language)


def test_said_within_cuts_at_a_word_boundary_and_drops_later_parts() -> None:
    assert said_within(["Hello there.", "Bye."], 100) == ["Hello there.", "Bye."]
    assert said_within(["Hello there friend.", "Bye."], 14) == ["Hello there", ""]
    assert said_within(["Hello.", "one two three four"], 16) == ["Hello.", "one two"]
    assert said_within(["Supercalifragilistic"], 5) == [""]  # no word fits: nothing said


def test_a_huge_turn_is_synthesised_up_to_the_bound_and_the_cut_is_recorded(tmp_path: Path) -> None:
    words = "Your order of milk will arrive on Tuesday morning."
    huge = " ".join([words] * 300)  # about 15,000 characters
    tts = LengthTTS()
    pipe = VoicePipeline(tts=tts, asr=ToneASR(tts), cache_dir=tmp_path)
    ch = Channel(ChannelProgram(), 5, {}, voice=VoiceLine(pipe, AudioChannel(), agent="line"), language="en")
    out = ch.speak_agent(["Hello.", huge, "Goodbye."], 3)
    assert sum(tts.lengths) <= 2 * MAX_TURN_CHARS and max(tts.lengths) <= MAX_TURN_CHARS
    first, middle, last = out.parts
    assert first.spoken == "Hello." and last.spoken == "" and last.audio_seconds == 0.0
    assert middle.text == huge and middle.spoken != speakable(huge) and huge.startswith(middle.spoken)
    assert len(first.spoken) + 1 + len(middle.spoken) <= MAX_TURN_CHARS
    assert out.heard is not None and out.heard.intended == f"Hello. {middle.spoken}"


async def test_an_episode_with_a_huge_and_a_silent_answer_runs_and_times_honestly(  # type: ignore[no-untyped-def]
    bundle, dairy, tmp_path: Path
) -> None:
    import yaml

    from callbench.models.scripted.models import create_scripted
    from callbench.sim.episode import run_episode
    from callbench.sim.speech_rate import spoken_seconds

    huge = " ".join(["Your order of milk will arrive on Tuesday morning."] * 300)
    script = tmp_path / "candidate.yaml"
    script.write_text(yaml.safe_dump({"candidate": [huge, "...", "\x00?!"]}), encoding="utf-8")
    tts = LengthTTS()
    pipe = VoicePipeline(tts=tts, asr=ToneASR(tts), cache_dir=tmp_path / "cache")
    agent, scen = dairy
    trace = await run_episode(
        agent, scen, candidate=create_scripted(f"scripted:file:{script}", None, bundle),
        caller=create_scripted("scripted:plan", None, bundle), bundle_name="b", bundle_version="1",
        bundle_hash="h", episode_id="ep-huge", run_seed=3, repeat=0,
        voice=VoiceLine(pipe, AudioChannel(), agent="line"),
    )
    assert not trace.skipped and trace.latency is not None
    assert max(tts.lengths) <= MAX_TURN_CHARS
    turns = {t.turn: t for t in trace.latency.turns}
    assert turns[0].spoken_source == "estimated" and turns[0].spoken_s == pytest.approx(spoken_seconds(huge))
    silent = [a for a in trace.agent_speech if a.turn > 0]
    assert silent and all(a.seconds == 0.0 and a.heard is not None and a.heard.observed == "" for a in silent)
    assert all(turns[a.turn].spoken_source == "measured" and turns[a.turn].spoken_s == 0.0 for a in silent)
