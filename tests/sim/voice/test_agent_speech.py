"""The agent's side spoken by the voice channel (``run --agent-speech``), with scripted engines:
``tts`` measures each candidate turn's speaking time from its synthesis, ``line`` also carries it
over the line and recogniser and the caller simulator is given what was heard; the agent's line
is seeded apart from the caller's, paired across candidates and cached (a replay runs no engine)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.fakes.voice_engines import RATE, ToneASR, ToneTTS
from tests.sim.conftest import Recorder

from callbench.bundle.audio import AudioChannel, LineNoise
from callbench.bundle.models import Bundle, ChannelProgram
from callbench.models.scripted.models import create_scripted
from callbench.sim.channel import Channel
from callbench.sim.episode import run_episode
from callbench.sim.latency import turn_latency
from callbench.sim.speech_rate import spoken_seconds
from callbench.sim.views import SILENCE, caller_messages
from callbench.sim.voice.line import Audio
from callbench.sim.voice.pipeline import AgentSpeechMode, VoiceLine, VoicePipeline
from callbench.trace import RequestLatency, Trace

pytest.importorskip("soxr", reason="the voice channel resamples with soxr: pip install 'callbench[audio]'")
NOISY = AudioChannel(noise=LineNoise(kind="white", snr_db=20))


def _tone_seconds(spoken: str) -> float:
    """The fake voice's duration of ``spoken`` (tests/fakes/voice_engines.py)."""
    return int(RATE * max(1.0, 0.3 * len(spoken.split()))) / RATE


async def _episode(bundle: Bundle, dairy, pipe: VoicePipeline, mode: AgentSpeechMode,  # type: ignore[no-untyped-def]
                   caller: Recorder | None = None, candidate: str = "scripted:reference") -> Trace:
    agent, scen = dairy
    return await run_episode(
        agent, scen, candidate=create_scripted(candidate, None, bundle),
        caller=caller or create_scripted("scripted:plan", None, bundle), bundle_name="b",
        bundle_version="1", bundle_hash="h", episode_id="ep-agent", run_seed=3, repeat=0,
        voice=VoiceLine(pipe, NOISY, agent=mode),
    )


async def test_tts_measures_each_turns_spoken_time(bundle: Bundle, dairy, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    tts = ToneTTS()
    pipe = VoicePipeline(tts=tts, asr=ToneASR(tts), cache_dir=tmp_path)
    trace = await _episode(bundle, dairy, pipe, "tts")
    assert not trace.skipped and trace.latency is not None
    spoken = {a.turn: a for a in trace.agent_speech}
    talking = [t for t in trace.latency.turns if t.words]
    assert talking and set(spoken) == {t.turn for t in talking}
    for t in talking:
        a = spoken[t.turn]
        assert a.mode == "tts" and a.heard is None and a.tts["name"] == "tone-tts"
        assert a.seconds == pytest.approx(sum(_tone_seconds(p.spoken) for p in a.parts), abs=1e-3)
        assert t.spoken_source == "measured" and t.spoken_s == pytest.approx(a.seconds, abs=1e-3)
        estimate = sum(spoken_seconds(p.text) for p in a.parts)
        assert t.spoken_s != pytest.approx(estimate)  # the fake voice is slower than 2.5 words/s
    again = Trace.model_validate_json(trace.canonical_json())
    assert again.agent_speech == trace.agent_speech


async def test_line_gives_the_caller_what_the_recogniser_heard(bundle: Bundle, dairy, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    tts = ToneTTS()
    pipe = VoicePipeline(tts=tts, asr=ToneASR(tts, truncate=True), cache_dir=tmp_path)  # hears 2 words
    caller = Recorder(create_scripted("scripted:plan", None, bundle))
    trace = await _episode(bundle, dairy, pipe, "line", caller)
    assert not trace.skipped and trace.agent_speech
    heard = {a.turn: a.heard for a in trace.agent_speech}
    for a in trace.agent_speech:
        assert a.heard is not None and a.heard.intended == " ".join(p.text for p in a.parts)
        assert a.heard.observed == " ".join(a.heard.spoken.split()[:2]) and a.heard.truncated
        assert a.heard.line["noise"]["kind"] == "white" and a.heard.line_audio_sha256
    # every caller request shows each earlier candidate turn as heard over the line, never the clean text
    for req in caller.requests:
        shown = [m.content for m in req.messages if m.role == "user"]
        for turn, text in enumerate(shown):
            h = heard.get(turn)
            assert text == (h.observed if h is not None else SILENCE)
    rebuilt = caller_messages(trace.caller_view.system_prompt, trace.messages, trace.tool_events,
                              trace.caller_turns[:1], heard={t: h.observed for t, h in heard.items() if h})
    assert [m.content for m in rebuilt] == [m.content for m in caller.requests[1].messages]


def _speak(pipe: VoicePipeline, parts: list[str], seed: int = 11, mode: AgentSpeechMode = "line") -> Channel:
    ch = Channel(ChannelProgram(), seed, {}, voice=VoiceLine(pipe, NOISY, agent=mode), language="en")
    return ch


def test_the_agents_line_is_paired_seeded_apart_and_cached(tmp_path: Path) -> None:
    text = "Your account 4 8 2 1 5 is active"
    a_tts, b_tts = ToneTTS(), ToneTTS()
    a = VoicePipeline(tts=a_tts, asr=ToneASR(a_tts), cache_dir=tmp_path / "a")
    b = VoicePipeline(tts=b_tts, asr=ToneASR(b_tts), cache_dir=tmp_path / "b")
    seen_a = _speak(a, [text]).speak_agent([text], 1).heard
    seen_b = _speak(b, [text]).speak_agent([text], 4).heard  # another candidate, another turn
    other = _speak(b, [text], seed=12).speak_agent([text], 1).heard  # another scenario or repeat
    assert seen_a is not None and seen_b is not None and other is not None
    assert seen_a.line_audio_sha256 == seen_b.line_audio_sha256 and seen_a.observed == seen_b.observed
    assert other.line_audio_sha256 != seen_a.line_audio_sha256
    # the caller saying the same text on the same episode's line meets other draws
    caller = _speak(a, [text]).render(text, 1, []).voice
    assert caller is not None and caller.line_audio_sha256 != seen_a.line_audio_sha256
    # said again in the same call: the next occurrence, its own draws
    ch = _speak(a, [text])
    first, second = ch.speak_agent([text], 1).heard, ch.speak_agent([text], 2).heard
    assert first is not None and second is not None and first.line_audio_sha256 != second.line_audio_sha256
    # a replay on the same cache runs no engine and hears the same
    calls = (a_tts.calls, a.asr.calls)  # type: ignore[attr-defined]
    again = _speak(a, [text]).speak_agent([text], 1).heard
    assert again == seen_a and (a_tts.calls, a.asr.calls) == calls  # type: ignore[attr-defined]


def test_tts_mode_synthesises_only(tmp_path: Path) -> None:
    tts = ToneTTS()
    asr = ToneASR(tts)
    pipe = VoicePipeline(tts=tts, asr=asr, cache_dir=tmp_path)
    out = _speak(pipe, [], mode="tts").speak_agent(["Hello there.", "Your ID is 48215."], 0)
    assert out.heard is None and asr.calls == 0 and tts.calls == 2
    assert [p.spoken for p in out.parts] == ["Hello there.", "Your ID is 4 8 2 1 5."]
    assert out.seconds == pytest.approx(1.0 + 0.3 * 8, abs=1e-3)


def test_a_turn_of_several_parts_is_synthesised_once_per_part_on_the_line(tmp_path: Path) -> None:
    from callbench.report.model.audio import AudioFiles
    from callbench.sim.voice.pipeline import PART_PAUSE_S
    from callbench.sim.voice.score import speakable

    tts = ToneTTS()
    asr = ToneASR(tts)
    pipe = VoicePipeline(tts=tts, asr=asr, cache_dir=tmp_path)
    parts = ["Let me check that for you.", "Your ID 48215 is active.", "Anything else?"]
    out = _speak(pipe, parts).speak_agent(parts, 2)
    # each part synthesised once to measure it; the line carries those syntheses joined
    assert tts.calls == 3 and asr.calls == 1
    heard = out.heard
    assert heard is not None and heard.intended == " ".join(parts)
    assert heard.tts["joined"] == [speakable(p) for p in parts] and heard.tts["pause_s"] == PART_PAUSE_S
    assert heard.audio_seconds == pytest.approx(
        sum(_tone_seconds(speakable(p)) for p in parts) + 2 * PART_PAUSE_S, abs=1e-3)
    assert out.seconds == pytest.approx(sum(_tone_seconds(speakable(p)) for p in parts), abs=1e-3)
    # the report finds the joined audio by the record the trace keeps
    found = AudioFiles((str(tmp_path),)).find(heard, "en")
    assert found is not None and found.parent.name == "tts"
    # a replay on the same cache runs no engine and hears the same; one part alone is not "joined"
    again = _speak(pipe, parts).speak_agent(parts, 2).heard
    assert again == heard and (tts.calls, asr.calls) == (3, 1)
    single = _speak(pipe, parts[:1]).speak_agent(parts[:1], 3).heard
    assert single is not None and "joined" not in single.tts and tts.calls == 3  # its part: cached


def _req(speech: bool, waited: float) -> RequestLatency:
    return RequestLatency(role="candidate", turn=1, start_s=0.0, first_token_s=waited, waited_s=waited,
                          speech=speech, first_speech_s=waited if speech else None)


def test_turn_latency_uses_measured_durations_and_says_so() -> None:
    items = [(_req(True, 0.5), "One two three."), (_req(True, 0.2), "Four five.")]
    est = turn_latency(1, items)
    assert est.spoken_source == "estimated" and est.spoken_s == pytest.approx(5 / 2.5)
    both = turn_latency(1, items, {"One two three.": 3.0, "Four five.": 1.5})
    assert both.spoken_source == "measured" and both.spoken_s == pytest.approx(4.5)
    # the second answer is ready at 0.7 s, while the first still plays until 3.5 s: no dead air
    assert both.dead_air_s == 0.0 and est.dead_air_s == 0.0
    half = turn_latency(1, items, {"One two three.": 3.0})
    assert half.spoken_source == "estimated" and half.spoken_s == pytest.approx(3.0 + 2 / 2.5)


async def test_a_deployed_agents_side_is_spoken_too(tmp_path: Path) -> None:
    from tests.sim.deployed_helpers import reference_agent_module, scripted_brain, serve, starter

    from callbench.models.base import ModelSettings
    from callbench.models.deployed import create_deployed
    from callbench.models.deployed.base import WebhookConfig

    bundle = starter()
    agent, scen = bundle.scenario("clinic_ortho_reschedule")
    tts = ToneTTS()
    pipe = VoicePipeline(tts=tts, asr=ToneASR(tts, truncate=True), cache_dir=tmp_path)
    async with serve(reference_agent_module().make_app(scripted_brain(bundle))) as url:
        cand = create_deployed(f"deployed:http:{url}", f"http:{url}", ModelSettings(), WebhookConfig())
        try:
            trace = await run_episode(
                agent, scen, candidate=cand, caller=create_scripted("scripted:plan", None, bundle),
                bundle_name="b", bundle_version="1", bundle_hash="h", episode_id="d-r0", run_seed=1, repeat=0,
                voice=VoiceLine(pipe, NOISY, agent="line"),
            )
        finally:
            await cand.aclose()
    assert not trace.skipped and trace.deployed is not None and trace.agent_speech
    assert all(a.heard is not None and a.heard.truncated for a in trace.agent_speech)


class _BusyTTS(ToneTTS):
    """Spends ``cpu_s`` of its own thread's CPU on each synthesis (counted by ``time.thread_time``,
    so a loaded machine makes it slower, never cheaper)."""

    def __init__(self, cpu_s: float) -> None:
        super().__init__()
        self.cpu_s = cpu_s

    def synthesize(self, text: str, language: str) -> Audio:
        import time

        t0 = time.thread_time()
        while time.thread_time() - t0 < self.cpu_s:
            pass
        return super().synthesize(text, language)


async def test_the_agents_synthesis_counts_as_harness_cpu(bundle: Bundle, dairy, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # the caller's voice work is counted (the voice channel runs on a worker thread through the
    # meter); the agent's side is the same kind of harness work and must be counted too
    tts = _BusyTTS(0.05)
    pipe = VoicePipeline(tts=tts, asr=ToneASR(tts), cache_dir=tmp_path)
    trace = await _episode(bundle, dairy, pipe, "tts")
    assert trace.latency is not None and trace.agent_speech
    turns = {t.turn: t for t in trace.latency.turns}
    for a in trace.agent_speech:
        cpu = turns[a.turn].harness_cpu_s
        assert cpu is not None and cpu >= 0.05 * len(a.parts), (a.turn, cpu)
