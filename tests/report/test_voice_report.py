"""The report's voice section: channel figures per candidate and voice retention between a text run
and an audio run of the same bundle, seed and roles, recomputed here from what the runs were
written with."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from callbench.report.html.page import render_html
from callbench.report.model.build import build_report
from callbench.report.model.load import load_runs
from callbench.report.terminal.tables import render_terminal
from callbench.trace import AgentSpeech, Entity, SpokenPart, VoiceEvent

MakeRun = Callable[..., Path]
AUDIO = {"channel": "audio", "engines": "offline"}
GRID = {"agents": 3, "scenarios": 4, "repeats": 2}


def _event(cand: str, a: int, s: int, r: int) -> VoiceEvent:
    return VoiceEvent(
        turn=1, intended="my id is 4 8 2, Meena", spoken="my id is 4 8 2, Meena", observed="my id is 4 8",
        truncated=(a, s, r) == (0, 0, 0), tts={"name": "tone", "version": "1", "settings": {}},
        asr={"name": "tone", "version": "1", "settings": {}}, line={},
        audio_sha256="0" * 64, audio_seconds=1.5,
        wer=None if s == 3 else 0.1 * (a + 1),
        entities=[Entity(kind="digits", text="482", survived=s % 2 == 0),
                  Entity(kind="name", text="Meena", survived=a != 1)],
    )


def _text_score(cand: str, a: int, s: int, r: int) -> float:
    return 50.0 + 10 * a - 5 * s + (10.0 if cand.endswith("a") else 0.0) + r


def _voice_score(cand: str, a: int, s: int, r: int) -> float:
    # not proportional to the text score, so the ratio of means is not a ratio of each pair
    return _text_score(cand, a, s, r) - (15.0 if s % 2 else 3.0) - (5.0 if cand.endswith("b") else 0.0)


def _runs(make_run: MakeRun, **audio_kw: object) -> list:
    text = make_run("rt", **GRID, score=_text_score)
    audio = make_run("ra", **GRID, score=_voice_score, voice=_event, manifest_voice=AUDIO, **audio_kw)
    return load_runs([text, audio])


def test_channel_figures_per_candidate(make_run: MakeRun) -> None:
    report = build_report(_runs(make_run), n_samples=200)
    assert report.voice is not None
    figs = {f.candidate: f for f in report.voice.figures}
    assert sorted(figs) == ["cand-a [ra]", "cand-b [ra]"]  # text-run episodes have no voice record
    f = figs["cand-a [ra]"]
    cells = [(a, s, r) for a in range(3) for s in range(4) for r in range(2)]
    wers = [0.1 * (a + 1) for a, s, _ in cells if s != 3]
    assert (f.episodes, f.turns, f.truncated) == (24, 24, 1)
    assert f.mean_wer is not None and abs(f.mean_wer - sum(wers) / len(wers)) < 1e-12
    kept = {e.kind: (e.survived, e.said, e.rate) for e in f.entities}
    assert kept == {"digits": (12, 24, 0.5), "name": (16, 24, 16 / 24)}


def test_voice_retention_pairs_the_same_episodes(make_run: MakeRun) -> None:
    report = build_report(_runs(make_run), n_samples=2000)
    assert report.voice is not None
    ret = {r.candidate: r for r in report.voice.retention}
    assert sorted(ret) == ["cand-a", "cand-b"]
    for cand, r in ret.items():
        grid = [(a, s) for a in range(3) for s in range(4)]
        text = {(a, s): np.mean([_text_score(cand, a, s, k) for k in range(2)]) for a, s in grid}
        voice = {(a, s): np.mean([_voice_score(cand, a, s, k) for k in range(2)]) for a, s in grid}
        want = np.mean(list(voice.values())) / np.mean(list(text.values()))
        counts = (r.text_run, r.audio_run, r.n_scenarios, r.n_agents, r.n_episode_pairs)
        assert counts == ("rt", "ra", 12, 3, 24)
        assert r.retention is not None and abs(r.retention - want) < 1e-12
        assert r.low is not None and r.high is not None and r.low < want < r.high and not r.too_few
        # an independent check of the interval's width: a plain scenario bootstrap of the same ratio
        rng = np.random.default_rng(0)
        keys = sorted(text)
        t, v = np.array([text[k] for k in keys]), np.array([voice[k] for k in keys])
        idx = rng.integers(0, len(keys), size=(4000, len(keys)))
        flat = v[idx].mean(axis=1) / t[idx].mean(axis=1)
        lo, hi = np.percentile(flat, [2.5, 97.5])
        assert 0.25 < (r.high - r.low) / (hi - lo) < 4.0
    assert ret["cand-b"].retention < ret["cand-a"].retention  # type: ignore[operator]


def test_no_retention_when_runs_differ_beyond_the_channel(make_run: MakeRun) -> None:
    report = build_report(_runs(make_run, seed=8), n_samples=50)
    assert report.voice is not None and report.voice.retention == []
    assert any(n.startswith("no voice retention") for n in report.voice.notes)


def test_text_only_reports_have_no_voice_section(make_run: MakeRun) -> None:
    report = build_report(load_runs([make_run("rt", **GRID)]), n_samples=50)
    assert report.voice is None and "Voice channel" not in _terminal(report)


def _terminal(report: object) -> str:
    buf = io.StringIO()
    render_terminal(report, Console(file=buf, width=200))  # type: ignore[arg-type]
    return buf.getvalue()


def test_every_output_shows_the_voice_section(make_run: MakeRun) -> None:
    runs = _runs(make_run)
    report = build_report(runs, n_samples=200)
    assert report.voice is not None
    r = next(x for x in report.voice.retention if x.candidate == "cand-a")
    shown = f"{100 * r.retention:.1f}%"  # type: ignore[operator]
    term = _terminal(report)
    assert "Voice retention" in term and shown in term and "12/24 (50.0%)" in term
    page = render_html(report, runs, include_traces=False)
    assert 'id="voice-channel"' in page and shown in page and "12/24 (50.0%)" in page
    data = json.loads(report.model_dump_json())
    assert data["voice"]["retention"][0]["retention"] == report.voice.retention[0].retention
    assert data["voice"]["figures"][0]["entities"][0]["rate"] == 0.5


def test_the_agents_side_is_noted_per_candidate(make_run: MakeRun) -> None:
    def spoken(cand: str, a: int, s: int, r: int) -> list[AgentSpeech]:
        # cand-a: two turns over the line (WER 0.5 and, on scenario 0, 0.0); cand-b: one turn, tts only
        tts = {"name": "tone", "version": "1", "settings": {}}
        part = SpokenPart(text="Hello.", spoken="Hello.", audio_sha256="1" * 64, audio_seconds=1.0)
        if cand.endswith("b"):
            return [AgentSpeech(turn=0, mode="tts", tts=tts, parts=[part], seconds=1.0)]
        heard = [_event(cand, a, s, r).model_copy(update={"turn": t, "wer": w})
                 for t, w in ((0, 0.5), (1, 0.0 if s == 0 else 0.5))]  # fmt: skip
        return [AgentSpeech(turn=h.turn, mode="line", tts=tts, parts=[part], seconds=1.0, heard=h)
                for h in heard]  # fmt: skip

    audio = make_run("ra", **GRID, score=_voice_score, voice=_event, manifest_voice=AUDIO,
                     agent_speech=spoken)  # fmt: skip
    report = build_report(load_runs([audio]), n_samples=50)
    assert report.voice is not None
    figs = {f.candidate: f for f in report.voice.figures}
    episodes = 3 * 4 * 2
    a, b = figs["cand-a"], figs["cand-b"]
    assert (a.agent_turns, a.agent_heard) == (2 * episodes, 2 * episodes)
    # scenario 0 (a quarter of the episodes) hears its second turn at 0.0, every other turn at 0.5
    assert a.agent_mean_wer == pytest.approx((2 * episodes - episodes / 4) * 0.5 / (2 * episodes))
    assert (b.agent_turns, b.agent_heard, b.agent_mean_wer) == (episodes, 0, None)
    assert [n for n in report.voice.notes if "agent's side" in n] == [
        f"cand-a: the agent's side was spoken on {2 * episodes} turns (talk time measured from the "
        f"synthesis); {2 * episodes} went over the line to the caller simulator, heard at a mean WER "
        "of 43.8%",
        f"cand-b: the agent's side was spoken on {episodes} turns (talk time measured from the synthesis)",
    ]
