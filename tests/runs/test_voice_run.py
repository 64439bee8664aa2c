"""``callbench run --channel audio``: the refusal of a language without an offline voice, and a
whole run through the voice channel with scripted engines (traces, manifest, pairing)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from tests.fakes.voice_engines import ToneASR, ToneTTS
from typer.testing import CliRunner

from callbench.cli import app
from callbench.sim.voice import setup

from .conftest import DAIRY

STARTER = Path(__file__).parents[2] / "examples" / "starter"
ROLES = ["--caller", "scripted:plan", "--task-judge", "scripted:met", "--conversation-judge", "scripted:met"]


def test_an_offline_voice_for_gujarati_is_refused_in_one_line(tmp_path: Path) -> None:
    args = [
        "run",
        str(STARTER),
        "--candidate",
        "scripted:reference",
        *ROLES,
        "--channel",
        "audio",
        "--scenarios",
        "dairy_callback_before_cutoff",
        "--out",
        str(tmp_path / "r"),
        "--no-grade",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert lines == [
        "error: scenario dairy_callback_before_cutoff is in gu-IN, and the offline voice channel "
        "is English only; use --voice openai with a provider, or --channel text"
    ]


def test_a_bad_channel_or_recogniser_name_is_refused(tmp_path: Path) -> None:
    args = [
        "run",
        str(DAIRY),
        "--candidate",
        "scripted:reference",
        *ROLES,
        "--channel",
        "phone",
        "--out",
        str(tmp_path / "r"),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "--channel 'phone': expected text or audio" in result.output
    args[-3:-2] = ["audio", "--voice-asr", "large"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "--voice-asr 'large': expected base or tiny.en" in result.output


def _traces(run: Path) -> list[dict]:
    return [json.loads(gzip.decompress(p.read_bytes())) for p in sorted((run / "traces").glob("*.json.gz"))]


def test_a_run_through_the_voice_channel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip(
        "soxr", reason="the voice channel resamples with soxr: pip install 'callbench[audio]'"
    )
    tts = ToneTTS()
    asr = ToneASR(tts)
    monkeypatch.setattr(setup, "_built", {})
    monkeypatch.setattr(setup, "build_engines", lambda settings: (tts, asr))
    out = tmp_path / "r"
    args = [
        "run",
        str(DAIRY),
        "--candidate",
        "scripted:reference",
        "--candidate",
        "scripted:talk",
        *ROLES,
        "--channel",
        "audio",
        "--out",
        str(out),
        "--no-grade",
        "--no-preflight",
        "--seed",
        "5",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["voice"]["channel"] == "audio" and manifest["voice"]["tts"]["name"] == "tone-tts"
    traces = _traces(out)
    assert len(traces) == 2
    for t in traces:
        turn = t["caller_turns"][0]
        assert turn["voice"]["intended"] == turn["intended"] and turn["observed"] == [
            turn["voice"]["observed"]
        ]
    # both candidates heard the caller's identical first turn identically; its audio was made once
    first = [t["caller_turns"][0] for t in traces]
    assert first[0]["intended"] == first[1]["intended"]
    assert first[0]["voice"] == first[1]["voice"]
    assert (out / "voice-cache" / "asr").is_dir()
    said = {ct["intended"] for t in traces for ct in t["caller_turns"]}
    assert tts.calls == len(said)


def test_a_second_run_folder_on_the_same_cache_never_reruns_the_engines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("soxr", reason="the line resamples with soxr: pip install 'callbench[audio]'")
    tts = ToneTTS()
    asr = ToneASR(tts)
    monkeypatch.setattr(setup, "_built", {})
    monkeypatch.setattr(setup, "build_engines", lambda settings: (tts, asr))
    cache = tmp_path / "responses.sqlite"
    base = ["run", str(DAIRY), "--candidate", "scripted:reference", *ROLES, "--channel", "audio",
            "--no-grade", "--no-preflight", "--seed", "5", "--cache", str(cache)]  # fmt: skip
    assert CliRunner().invoke(app, [*base, "--out", str(tmp_path / "r1")]).exit_code == 0
    calls = (tts.calls, asr.calls)
    assert calls[1] > 0 and (tmp_path / "responses.sqlite.voice" / "asr").is_dir()
    assert not (tmp_path / "r1" / "voice-cache").exists()
    assert CliRunner().invoke(app, [*base, "--out", str(tmp_path / "r2")]).exit_code == 0
    assert (tts.calls, asr.calls) == calls  # replayed from the cache: no synthesis, no recognition
    assert [t["caller_turns"] for t in _traces(tmp_path / "r1")] == [
        t["caller_turns"] for t in _traces(tmp_path / "r2")
    ]


def test_agent_speech_is_checked_recorded_and_replayed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("soxr", reason="the line resamples with soxr: pip install 'callbench[audio]'")
    tts = ToneTTS()
    asr = ToneASR(tts)
    monkeypatch.setattr(setup, "_built", {})
    monkeypatch.setattr(setup, "build_engines", lambda settings: (tts, asr))
    base = ["run", str(DAIRY), "--candidate", "scripted:reference", *ROLES, "--no-grade", "--no-preflight",
            "--seed", "5"]  # fmt: skip
    bad = CliRunner().invoke(app, [*base, "--agent-speech", "loud", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "--agent-speech 'loud': expected off, tts or line" in bad.output
    text = CliRunner().invoke(
        app, [*base, "--channel", "text", "--agent-speech", "tts", "--out", str(tmp_path / "t")]
    )
    assert text.exit_code == 2 and "no scenario of this run goes through it" in text.output
    cache = tmp_path / "responses.sqlite"
    spoken = [*base, "--channel", "audio", "--agent-speech", "line", "--cache", str(cache)]
    r1 = CliRunner().invoke(app, [*spoken, "--out", str(tmp_path / "r1")])
    assert r1.exit_code == 0, r1.output
    manifest = json.loads((tmp_path / "r1" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["voice"]["agent_speech"] == "line"
    (trace,) = _traces(tmp_path / "r1")
    said = trace["agent_speech"]
    assert said and all(a["mode"] == "line" and a["heard"]["observed"] for a in said)
    lat = {t["turn"]: t for t in trace["latency"]["turns"]}
    assert all(lat[a["turn"]]["spoken_source"] == "measured" for a in said)
    # the cache lies beside the response cache: the run folder keeps a copy of its turns' audio
    kept = tmp_path / "r1" / "voice-audio"
    lines = {a["heard"]["line_audio_sha256"] for a in said} | {
        t["voice"]["line_audio_sha256"] for t in trace["caller_turns"]
    }
    assert {p.stem for p in (kept / "line").glob("*.wav")} == lines
    calls = (tts.calls, asr.calls)
    r2 = CliRunner().invoke(app, [*spoken, "--out", str(tmp_path / "r2")])
    assert r2.exit_code == 0, r2.output
    assert (tts.calls, asr.calls) == calls  # replayed: no engine ran
    (again,) = _traces(tmp_path / "r2")
    assert again["agent_speech"] == said
    assert {p.stem for p in (tmp_path / "r2" / "voice-audio" / "line").glob("*.wav")} == lines
    # resuming with the agent's side spoken otherwise is refused
    other = CliRunner().invoke(
        app,
        [
            *base,
            "--channel",
            "audio",
            "--agent-speech",
            "tts",
            "--cache",
            str(cache),
            "--out",
            str(tmp_path / "r1"),
        ],
    )
    assert other.exit_code == 2 and "voice channel: agent_speech 'line' vs 'tts'" in other.output
    assert "'engines'" not in other.output  # only what differs, not both records whole


def test_a_changed_voice_record_names_only_what_differs() -> None:
    from callbench.runs.voice import voice_differences

    def record(model: str) -> dict[str, object]:
        return {"channel": "audio", "engines": "offline", "tts": {"name": "piper"},
                "asr": {"name": "whisper", "settings": {"model": model, "beam_size": 1}}}

    old, new = {**record("tiny.en"), "agent_speech": "line"}, record("base")
    assert voice_differences(old, new) == (
        "voice channel: agent_speech 'line' vs absent; asr.settings.model 'tiny.en' vs 'base'")
    assert voice_differences(None, {"channel": "audio"}) == "voice channel: channel absent vs 'audio'"
    assert voice_differences(old, old) is None
