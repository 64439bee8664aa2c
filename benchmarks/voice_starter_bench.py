"""The starter through the voice channel: wall time and CPU of real ``callbench run`` calls.

``benchmarks/voice_bench.py`` times the voice pipeline on fixed sentences; this runs the real
path, ``callbench run examples/starter --channel audio`` with the offline engines (piper and
whisper tiny.en), the scripted reference candidate, the scripted plan caller and scripted judges
(grading included; no network), on the starter's English scenarios: by default the first English
scenario of each agent (in scenario-id order, computed from the loaded bundle: ``run`` has no
one-per-agent filter, so they are passed as ``--scenarios``), with ``--all-english`` every one.

Each stage is one ``callbench run`` subprocess (engine start, bundle load and grading included)
into its own run folder; the voice cache is shared through ``--cache`` (it lies beside the
response cache, ``<cache>.voice/``). CPU seconds are the subprocess's user+system time and its
waited-for children's (``RUSAGE_CHILDREN``): the piper process is closed and waited for at exit,
so its CPU is counted. Stages, in order:

- ``text``: ``--channel text``, the harness alone (no engine);
- ``cold``: ``--channel audio`` on an empty voice cache (the first candidate of a run);
- ``rerun``: the same command into a new folder on that cache (nothing to synthesise or hear);
- ``second``: a second candidate (``scripted:talk``) on the same scenarios and seed: it pays only
  for the caller turns whose text (or its occurrence in the call) the first candidate's calls did
  not have; the benchmark counts those from the traces and the engine calls from the cache files;
- ``tts`` / ``line``: ``--agent-speech tts`` / ``line`` on a copy of the cold cache (the caller's
  side warm, the agent's cold): their CPU over ``rerun``'s (also warm on the caller's side) is the
  cost of speaking the agent's side.

Per stage: episodes, caller turns, seconds of caller audio, agent turns spoken and their seconds,
syntheses and recognitions done (new files in the cache's ``tts/`` and ``asr/``), wall s and
CPU-s (per call and per second of caller audio). The recogniser runs on one thread, as in a
run (``CALLBENCH_VOICE_THREADS``); piper's onnxruntime takes the cores it finds.

``--voice espeak`` speaks with the espeak-ng stress voice, ``--asr base`` recognises with whisper
base. The starter's scenarios set no ``channel.audio``, so the line is the default one: 300-3400
Hz band-pass and G.711 mu-law, no noise, no loss.

Run: ``python benchmarks/voice_starter_bench.py [--all-english] [--stages cold second ...]``.
Needs the ``[audio]`` extra; no network.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from callbench.bundle import load_bundle

STARTER = Path(__file__).parents[1] / "examples" / "starter"
STAGES = ("text", "cold", "rerun", "second", "tts", "line")


def english_scenarios(root: Path, one_per_agent: bool) -> list[str]:
    """The active agents' English scenario ids (language ``en`` or ``en-*``), in (agent id,
    scenario id) order; with ``one_per_agent`` the first of each agent only."""
    bundle = load_bundle(root)
    pairs = sorted(
        (a.config.id, s.id)
        for a, s in bundle.scenarios()
        if a.config.active and s.language.split("-")[0].lower() == "en"
    )
    out: list[str] = []
    seen: set[str] = set()
    for agent, sid in pairs:
        if one_per_agent and agent in seen:
            continue
        seen.add(agent)
        out.append(sid)
    return out


def cache_files(voice: Path) -> tuple[int, int]:
    """Syntheses and recognitions held by a voice cache folder."""
    return len(list(voice.glob("tts/*.wav"))), len(list(voice.glob("asr/*.json")))


def traces(out: Path) -> list[dict[str, Any]]:
    return [json.loads(gzip.decompress(p.read_bytes())) for p in sorted((out / "traces").glob("*.json.gz"))]


def said(tr: list[dict[str, Any]]) -> set[tuple[str, str, int]]:
    """(scenario, caller text, occurrence in the call): what keys a caller turn's line and so its
    recognition (the channel seed does not depend on the candidate)."""
    keys: set[tuple[str, str, int]] = set()
    for t in tr:
        count: dict[str, int] = {}
        for turn in t["caller_turns"]:
            v = turn.get("voice")
            if v is None:
                continue
            n = count.get(v["spoken"], 0)
            count[v["spoken"]] = n + 1
            keys.add((t["scenario_id"], v["spoken"], n))
    return keys


def run_stage(
    args: argparse.Namespace,
    scenarios: list[str],
    out: Path,
    cache: Path,
    candidate: str,
    channel: str,
    agent_speech: str = "off",
) -> dict[str, Any]:
    cmd = [
        sys.executable, "-m", "callbench", "run", str(STARTER), "--candidate", candidate,
        "--caller", "scripted:plan", "--task-judge", "scripted:met", "--conversation-judge",
        "scripted:met", "--scenarios", ",".join(scenarios), "--channel", channel, "--out", str(out),
        "--no-preflight", "--seed", str(args.seed), "--max-turns", str(args.max_turns),
        "--concurrency", str(args.concurrency), "--cache", str(cache),
    ]  # fmt: skip
    if agent_speech != "off":
        cmd += ["--agent-speech", agent_speech]
    if channel == "audio":
        cmd += ["--voice", args.voice, "--voice-asr", args.asr]
    voice = cache.with_name(cache.name + ".voice")
    tts0, asr0 = cache_files(voice)
    w0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output, _ = proc.communicate()
    wall = time.perf_counter() - w0
    if proc.returncode != 0:
        sys.exit(f"{out.name}: callbench run exited {proc.returncode}\n{output.decode(errors='replace')}")
    tts1, asr1 = cache_files(voice)
    tr = traces(out)
    turns = [v for t in tr for c in t["caller_turns"] if (v := c.get("voice")) is not None]
    agent = [s for t in tr for s in t.get("agent_speech", [])]
    heard = [s["heard"]["wer"] for s in agent if s.get("heard") and s["heard"]["wer"] is not None]
    return {
        "episodes": len(tr),
        "skipped": sum(t["end_reason"] == "skipped" for t in tr),
        "caller_turns": sum(len(t["caller_turns"]) for t in tr),
        "spoken": len(turns),
        "audio_s": sum(v["audio_seconds"] for v in turns),
        "wer": (sum(v["wer"] or 0 for v in turns) / len(turns)) if turns else None,
        "agent_turns": len(agent),
        "agent_s": sum(s["seconds"] for s in agent),
        "agent_wer": sum(heard) / len(heard) if heard else None,
        "tts": tts1 - tts0,
        "asr": asr1 - asr0,
        "wall": wall,
        "traces": tr,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all-english", action="store_true", help="every English scenario, not one per agent")
    ap.add_argument("--stages", nargs="+", default=list(STAGES), choices=STAGES)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-turns", type=int, default=30)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--voice", default="offline", choices=["offline", "espeak"], help="voice engines")
    ap.add_argument("--asr", default="tiny.en", choices=["tiny.en", "base"], help="packaged recogniser")
    ap.add_argument("--keep", type=Path, help="keep the run folders and caches here")
    args = ap.parse_args()
    os.environ.setdefault("CALLBENCH_VOICE_THREADS", "1")
    scenarios = english_scenarios(STARTER, one_per_agent=not args.all_english)
    print(f"scenarios ({len(scenarios)}): {', '.join(scenarios)}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; cores: {os.cpu_count()}")
    base = args.keep or Path(tempfile.mkdtemp(prefix="voice-starter-"))
    base.mkdir(parents=True, exist_ok=True)
    cold_cache = base / "cold" / "responses.sqlite"
    cold_cache.parent.mkdir(exist_ok=True)
    plan: dict[str, tuple[str, str, str, Path]] = {
        "text": ("scripted:reference", "text", "off", base / "text" / "responses.sqlite"),
        "cold": ("scripted:reference", "audio", "off", cold_cache),
        "rerun": ("scripted:reference", "audio", "off", cold_cache),
        "second": ("scripted:talk", "audio", "off", cold_cache),
        "tts": ("scripted:reference", "audio", "tts", base / "tts" / "responses.sqlite"),
        "line": ("scripted:reference", "audio", "line", base / "line" / "responses.sqlite"),
    }
    results: dict[str, dict[str, Any]] = {}
    print(
        f"{'stage':<7} {'calls':>5} {'turns':>5} {'audio s':>7} {'agent':>5} {'agent s':>7} {'tts':>4} "
        f"{'asr':>4} {'wall s':>7} {'CPU-s':>7} {'CPU/call':>8} {'CPU/audio s':>11} {'WER':>6} {'load':>5}"
    )
    for stage in args.stages:
        candidate, channel, speech, cache = plan[stage]
        cache.parent.mkdir(parents=True, exist_ok=True)
        if stage in ("tts", "line") and "cold" in results:  # the caller's side warm, the agent's cold
            shutil.copytree(
                cold_cache.with_name(cold_cache.name + ".voice"),
                cache.with_name(cache.name + ".voice"),
                dirs_exist_ok=True,
            )
        c0 = os.times()
        r = run_stage(args, scenarios, base / f"run-{stage}", cache, candidate, channel, speech)
        c1 = os.times()
        r["cpu"] = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
        results[stage] = r
        calls = max(r["episodes"], 1)
        per_audio = f"{r['cpu'] / r['audio_s']:.3f}" if r["audio_s"] else "-"
        wer = f"{r['wer']:.1%}" if r["wer"] is not None else "-"
        print(
            f"{stage:<7} {r['episodes']:>5} {r['caller_turns']:>5} {r['audio_s']:>7.1f} "
            f"{r['agent_turns']:>5} {r['agent_s']:>7.1f} {r['tts']:>4} {r['asr']:>4} "
            f"{r['wall']:>7.1f} {r['cpu']:>7.1f} "
            f"{r['cpu'] / calls:>8.2f} {per_audio:>11} {wer:>6} {os.getloadavg()[0]:>5.1f}",
            flush=True,
        )
        if r["skipped"] or r["spoken"] != (r["caller_turns"] if channel == "audio" else 0):
            print(f"  !! {r['skipped']} skipped episodes; {r['spoken']} of {r['caller_turns']} turns spoken")
    if "cold" in results and "second" in results:
        first = said(results["cold"]["traces"])
        new = said(results["second"]["traces"]) - first
        texts = {s for _, s, _ in first}
        print(
            f"second candidate: {len(new)} caller turns the first candidate's calls did not have "
            f"({len({s for _, s, _ in new} - texts)} new texts); it ran {results['second']['tts']} "
            f"syntheses and {results['second']['asr']} recognitions"
        )
        for key in sorted(new):
            print(f"  new: {key}")
    for stage in ("tts", "line"):
        if stage in results and "rerun" in results:  # both with the caller's side warm
            r, c = results[stage], results["rerun"]
            print(
                f"agent speech {stage}: +{(r['cpu'] - c['cpu']) / max(r['episodes'], 1):.2f} CPU-s and "
                f"+{(r['wall'] - c['wall']) / max(r['episodes'], 1):.2f} wall s per call over 'rerun'; "
                f"{r['agent_turns']} agent turns, {r['agent_s']:.1f} s spoken"
                + (
                    f"; the caller heard them at a mean WER of {r['agent_wer']:.1%}"
                    if r["agent_wer"] is not None
                    else ""
                )
            )
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
