"""The HTML trace viewer plays each voice-channel caller turn's audio, what the line delivered (the
recogniser's input) first and the clean synthesis after, each labelled: embedded as ``data:`` URIs
of the kept WAVs in the single file (while the report's audio stays under the bound), copied to
``calls/audio/<sha256>.wav`` in the folder report; a text-channel run is unchanged. A real run
(scripted engines) is played from its own cache and, made with ``--cache``, from the copy it kept."""

from __future__ import annotations

import base64
import hashlib
import html as html_lib
import io
import json
import re
import wave
from pathlib import Path

import pytest

from callbench.report.html import viewer
from callbench.report.html.folder import start_html_folder, write_html_folder
from callbench.report.html.page import render_html
from callbench.report.html.viewer import call_data
from callbench.report.model.build import build_report
from callbench.report.model.load import load_run, load_runs
from callbench.sim.voice.keys import tts_key
from callbench.trace import VoiceEvent

from .conftest import LANGS, write_run

TTS = {"name": "tone", "version": "1", "settings": {"rate": 8000}}
SPOKEN = "my id is 4 8 2"


def tiny_wav() -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(bytes(range(256)) * 4)  # 512 samples: 64 ms
    return buf.getvalue()


WAV = tiny_wav()
SHA = hashlib.sha256(WAV).hexdigest()
LINE_WAV = tiny_wav()[:-2] + b"\x7f\x7f"  # stands for the line's output: other bytes
LINE_SHA = hashlib.sha256(LINE_WAV).hexdigest()


def _event(sha: str, line_sha: str | None) -> VoiceEvent:
    return VoiceEvent(turn=1, intended=SPOKEN, spoken=SPOKEN, observed="my id is 4 8", tts=TTS, asr=TTS,
                      line={}, audio_sha256=sha, audio_seconds=0.064, line_audio_sha256=line_sha)  # fmt: skip


def voice_run(root: Path, *, sha: str = SHA, cached: bytes | None = WAV, line: bytes | None = LINE_WAV,
              line_sha: str | None = LINE_SHA, folder: str = "voice-cache") -> Path:  # fmt: skip
    run = write_run(root, agents=1, scenarios=1, repeats=1, voice=lambda c, a, s, r: _event(sha, line_sha))
    if cached is not None:
        path = run / folder / "tts" / f"{tts_key(SPOKEN, LANGS[0], TTS)}.wav"
        path.parent.mkdir(parents=True)
        path.write_bytes(cached)
    if line is not None:
        (run / folder / "line").mkdir(parents=True)
        (run / folder / "line" / f"{LINE_SHA}.wav").write_bytes(line)
    return run


def _labels(html: str) -> list[str]:
    return re.findall(r'<div class="audio"><div class="ci">([^<]*)</div>', html)


def _srcs(html: str) -> list[str]:
    return re.findall(r'<audio controls="" preload="none" src="([^"]*)"></audio>', html)


def _decoded(src: str) -> bytes:
    assert src.startswith("data:audio/wav;base64,")
    return base64.b64decode(src.removeprefix("data:audio/wav;base64,"))


@pytest.mark.parametrize("folder", ["voice-cache", "voice-audio"])
def test_single_file_embeds_the_line_audio_then_the_clean(tmp_path: Path, folder: str) -> None:
    runs = load_runs([voice_run(tmp_path, folder=folder)])
    html = render_html(build_report(runs, n_samples=20), runs)
    # one voice turn per episode, one episode per candidate: the line's output first, then clean
    assert [_decoded(s) for s in _srcs(html)] == [LINE_WAV, WAV, LINE_WAV, WAV]
    labels = [html_lib.unescape(x) for x in _labels(html)]
    assert labels == [viewer.LINE_LABEL, viewer.CLEAN_LABEL] * 2
    assert "audio not in the run" not in html and "audio in the folder report" not in html


def test_a_trace_without_the_line_audio_says_so_and_plays_the_clean(tmp_path: Path) -> None:
    runs = load_runs([voice_run(tmp_path, line=None, line_sha=None)])
    html = html_lib.unescape(render_html(build_report(runs, n_samples=20), runs))
    assert [_decoded(s) for s in _srcs(html)] == [WAV, WAV]
    assert html.count(f'<div class="ci">{viewer.LINE_NOT_KEPT}</div>') == 2


def test_single_file_over_the_bound_points_to_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = load_runs([voice_run(tmp_path)])
    # two turns of this WAV as base64 URIs: each 22 + 4 * ceil(len / 3) characters
    one = len("data:audio/wav;base64,") + 4 * ((len(WAV) + 2) // 3)
    bound = 2 * one + 2 * (len("data:audio/wav;base64,") + 4 * ((len(LINE_WAV) + 2) // 3))
    monkeypatch.setattr(viewer, "AUDIO_EMBED_MAX_BYTES", bound - 1)
    html = render_html(build_report(runs, n_samples=20), runs)
    assert _srcs(html) == [] and "data:audio" not in html
    assert html.count('<div class="ci">audio in the folder report</div>') == 4
    monkeypatch.setattr(viewer, "AUDIO_EMBED_MAX_BYTES", bound)
    assert len(_srcs(render_html(build_report(runs, n_samples=20), runs))) == 4


@pytest.mark.parametrize("case", ["missing", "other bytes"])
def test_audio_not_found_is_said(tmp_path: Path, case: str) -> None:
    cached = None if case == "missing" else WAV + b"\0\0"  # a file whose hash is not the event's
    line = None if case == "missing" else LINE_WAV + b"\0\0"
    runs = load_runs([voice_run(tmp_path, cached=cached, line=line)])
    html = render_html(build_report(runs, n_samples=20), runs)
    assert _srcs(html) == []
    assert html.count("<div class=\"ci\">audio not in the run&#39;s voice cache</div>") == 4


@pytest.mark.parametrize("how", ["calls", "runs", "while reading"])
def test_folder_report_copies_the_wav_and_refers_to_it(tmp_path: Path, how: str) -> None:
    run = voice_run(tmp_path / "r")
    folder = tmp_path / "report"
    if how == "while reading":
        build = start_html_folder(folder)
        runs = [load_run(run, workers=1, calls=lambda n: build.while_reading())]
        build.finish(build_report(runs, n_samples=20), folder, reason="test")
    else:
        runs = load_runs([run])
        report = build_report(runs, n_samples=20)
        if how == "calls":
            write_html_folder(report, call_data(runs), folder, reason="test")
        else:
            write_html_folder(report, None, folder, reason="test", runs=runs)
    assert (folder / "calls" / "audio" / f"{SHA}.wav").read_bytes() == WAV
    assert (folder / "calls" / "audio" / f"{LINE_SHA}.wav").read_bytes() == LINE_WAV
    copied = sorted(p.name for p in (folder / "calls" / "audio").iterdir())
    assert copied == sorted([f"{SHA}.wav", f"{LINE_SHA}.wav"])
    scripts = sorted((folder / "calls").glob("e*.js"))
    assert len(scripts) == 2
    for script in scripts:
        text = script.read_text(encoding="utf-8")
        line = (f'{{"label": {json.dumps(viewer.LINE_LABEL)}, '
                f'"src": "calls/audio/{LINE_SHA}.wav", "note": null}}')
        clean = f'{{"label": {json.dumps(viewer.CLEAN_LABEL)}, "src": "calls/audio/{SHA}.wav", "note": null}}'
        assert f'"audio": [{line}, {clean}]' in text
    assert "data:audio" not in (folder / "index.html").read_text(encoding="utf-8")


def test_text_channel_run_is_unchanged(tmp_path: Path) -> None:
    runs = load_runs([write_run(tmp_path / "t", agents=1, scenarios=1, repeats=1)])
    report = build_report(runs, n_samples=20)
    html = render_html(report, runs)
    assert "<audio" not in html and "audio not in" not in html and "audio in the folder" not in html
    folder = tmp_path / "report"
    write_html_folder(report, None, folder, reason="test", runs=runs)
    assert not (folder / "calls" / "audio").exists()
    for script in (folder / "calls").glob("e*.js"):
        assert '"audio"' not in script.read_text(encoding="utf-8")


@pytest.mark.parametrize("shared_cache", [False, True])
def test_a_run_plays_the_line_model_output_of_each_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_cache: bool
) -> None:
    """A run through the voice channel with scripted engines, in its own cache or (``--cache``)
    beside the response cache: the first player of every caller turn is the line model's output
    for that turn, recomputed here from the clean audio with the turn's seed."""
    pytest.importorskip("soxr", reason="the line resamples with soxr: pip install 'callbench[audio]'")
    import numpy as np
    from tests.fakes.voice_engines import ToneASR, ToneTTS
    from typer.testing import CliRunner

    from callbench.bundle.audio import AudioChannel
    from callbench.cli import app
    from callbench.sim.voice import setup
    from callbench.sim.voice.line import read_wav, run_line, write_wav

    tts = ToneTTS()
    monkeypatch.setattr(setup, "_built", {})
    monkeypatch.setattr(setup, "build_engines", lambda settings: (tts, ToneASR(tts)))
    out = tmp_path / "r"
    bundle = Path(__file__).parents[1] / "sim" / "data" / "dairy_bundle"
    args = ["run", str(bundle), "--candidate", "scripted:reference", "--caller", "scripted:plan",
            "--task-judge", "scripted:met", "--conversation-judge", "scripted:met", "--channel", "audio",
            "--no-preflight", "--seed", "5", "--out", str(out)]  # fmt: skip
    if shared_cache:
        args += ["--cache", str(tmp_path / "responses.sqlite")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (out / "voice-cache").exists() != shared_cache and (out / "voice-audio").exists() == shared_cache
    runs = load_runs([out])
    html = render_html(build_report(runs, n_samples=20), runs)
    played = [_decoded(s) for s in _srcs(html)]
    (trace,) = [c.trace for c in call_data(runs)]
    assert trace is not None
    expected: list[bytes] = []
    said: dict[str, int] = {}
    for turn in trace.caller_turns:
        ev = turn.voice
        assert ev is not None
        clean = tts.synthesize(ev.spoken, trace.language)
        occurrence = said.get(ev.intended, 0)
        said[ev.intended] = occurrence + 1
        text_sha = hashlib.sha256(ev.spoken.encode("utf-8")).digest()
        seed = [trace.seeds.channel, int.from_bytes(text_sha[:8], "big"), occurrence]
        clean_bytes = write_wav(clean)
        line = run_line(read_wav(clean_bytes), AudioChannel.model_validate(ev.line),
                        np.random.default_rng(seed), None).audio  # fmt: skip
        expected += [write_wav(line), clean_bytes]
    assert played == expected and played[0] != played[1]
    with wave.open(io.BytesIO(played[0])) as w:
        assert w.getframerate() == 16000  # the 8 kHz line, resampled for the recogniser
