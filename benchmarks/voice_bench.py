"""CPU cost and word error rate of the voice channel, per engine set and line condition.

Nine English caller turns of a typical call (greeting, account and phone numbers, a name, an
amount, an address, short replies) go through TTS -> line -> ASR three times per condition:

- ``cold``: an empty cache (the first candidate of a run pays synthesis and recognition);
- ``warm``: the same turns again on the same cache (a second candidate on the same scenarios
  and seed: nothing is recomputed);
- the recogniser's load time is reported apart (once per process).

CPU seconds are this process's user+system time, plus its finished children's (espeak-ng runs
once per turn) and the live piper process's (read from ``/proc``), per second of caller audio
and per nine-turn call; starting the engines (the recogniser, the piper process and its first
synthesis) is reported apart as ``engine load``. The cold column is split into synthesis
(``tts``), recognition (``asr``) and the rest (the line, alignment and the cache). The engines
run with one thread (``CALLBENCH_VOICE_THREADS``, default 1) as in a run. WER and entity survival
are over these nine turns only: a smoke figure, not a recogniser evaluation.

``--asr base`` measures the larger packaged recogniser (tiny.en is the default), ``--asr-model
DIR`` a CTranslate2 whisper folder of yours; ``--piper-noise`` synthesises with the voice's own
unseeded noise scales (0.667, 0.8) instead of the deterministic 0, to compare.

``--starter N`` speaks the first N caller plan lines of the starter's English scenarios instead
of the nine turns (CPU-s then are per N turns).

Run: ``python benchmarks/voice_bench.py [--engines offline espeak] [--conditions clean pcmu ...]``.
Needs the ``[audio]`` extra (and espeak-ng for ``espeak``); no network.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from callbench.bundle.audio import AudioChannel, LineNoise, PacketLoss
from callbench.sim.voice.pipeline import VoicePipeline
from callbench.sim.voice.piper import PiperTTS
from callbench.sim.voice.setup import VoiceSettings, build_engines

TURNS = [
    "Hello, I'm calling about my electricity bill.",
    "My account number is 48215733.",
    "Yes, the name on the account is Priya Sharma.",
    "I was charged $142.50 but I usually pay around $60.",
    "My phone number is 9876543210.",
    "The address is 14 Lake View Road, Pune.",
    "No, I did not change my plan.",
    "Can you cancel my subscription to the paper bill?",
    "Okay, thank you. That's all.",
]
CONDITIONS = {
    "clean": AudioChannel(band_pass=False, codec="none"),
    "pcmu": AudioChannel(),
    "pcma": AudioChannel(codec="pcma"),
    "white10": AudioChannel(noise=LineNoise(kind="white", snr_db=10)),
    "babble10": AudioChannel(noise=LineNoise(kind="babble", snr_db=10)),
    "loss5": AudioChannel(packet_loss=PacketLoss(rate=0.05, mean_burst=3)),
}


LIVE: list[int] = []  # pids of long-lived engine processes (piper)


def _proc_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime + sum(map(_proc_cpu, LIVE))


class Timed:
    """An engine wrapper that adds the CPU seconds of each call to ``spent``."""

    def __init__(self, engine: Any, method: str) -> None:
        self.engine, self.method, self.spent = engine, method, 0.0
        self.info, self.languages = engine.info, engine.languages
        setattr(self, method, self._call)

    def _call(self, *args: Any) -> Any:
        c0 = cpu()
        try:
            return getattr(self.engine, self.method)(*args)
        finally:
            self.spent += cpu() - c0


def starter_lines(n: int) -> list[str]:
    """The first ``n`` caller plan lines (``brief.plan[].meaning``) of the starter's English
    scenarios, in file order: a larger, fixed set for comparing recognisers' error rates."""
    root = Path(__file__).parents[1] / "examples" / "starter" / "agents"
    lines: list[str] = []
    for path in sorted(root.glob("*/scenarios/*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if str(data.get("language", "")).lower().startswith("en"):
            lines += [" ".join(str(step["meaning"]).split()) for step in data["brief"]["plan"]]
    return lines[:n]


def one_pass(
    pipe: VoicePipeline, cfg: AudioChannel, seed: int, turns: list[str]
) -> tuple[float, float, list]:
    start_cpu, start_wall = cpu(), time.perf_counter()
    events = [
        pipe.observe(t, "en-US", cfg, channel_seed=seed, occurrence=0, turn=i + 1)
        for i, t in enumerate(turns)
    ]
    return cpu() - start_cpu, time.perf_counter() - start_wall, events


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", nargs="+", default=["offline"], choices=["offline", "espeak"])
    ap.add_argument("--conditions", nargs="+", default=["clean", "pcmu", "white10", "babble10", "loss5"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--asr", default="tiny.en", choices=["base", "tiny.en"], help="packaged recogniser")
    ap.add_argument("--asr-model", type=Path, help="a CTranslate2 whisper folder instead")
    ap.add_argument("--starter", type=int, default=0, help="N starter plan lines instead of the nine turns")
    ap.add_argument("--piper-noise", action="store_true", help="the voice's own unseeded noise scales")
    args = ap.parse_args()
    os.environ.setdefault("CALLBENCH_VOICE_THREADS", "1")
    turns = starter_lines(args.starter) if args.starter else TURNS
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; cores: {os.cpu_count()}")
    for engines in args.engines:
        c0 = cpu()
        settings = VoiceSettings(engines=engines, asr=args.asr, asr_model=args.asr_model)
        tts, asr = build_engines(settings)
        if args.piper_noise and isinstance(tts, PiperTTS):
            tts = PiperTTS(tts.model, noise_scale=0.667, noise_w_scale=0.8)
        tts.synthesize("Hello.", "en")  # start a long-lived engine process before timing turns
        proc = getattr(tts, "_proc", None)
        if proc is not None:
            LIVE.append(proc.pid)
        print(
            f"\n== {engines}: {tts.info.name} {tts.info.version} -> {asr.info.name} {asr.info.version}; "
            f"engine load {cpu() - c0:.2f} CPU-s"
        )
        c0 = cpu()
        for t in turns:
            tts.synthesize(t, "en-US")
        print(
            f"synthesis alone: {cpu() - c0:.2f} CPU-s for the {len(turns)} turns "
            "(the rest of 'cold': line and ASR)"
        )
        print(
            f"{'condition':<10} {'audio s':>8} {'cold CPU-s':>10} {'/audio s':>9} {'warm CPU-s':>10} "
            f"{'WER':>6} {'entities':>9} {'trunc':>5} {'tts':>5} {'asr':>5} {'rest':>5}"
        )
        for name in args.conditions:
            cfg = CONDITIONS[name]
            with tempfile.TemporaryDirectory(prefix="voice-bench-") as tmp:
                ttt, tasr = Timed(tts, "synthesize"), Timed(asr, "transcribe")
                pipe = VoicePipeline(tts=ttt, asr=tasr, cache_dir=Path(tmp))  # type: ignore[arg-type]
                cold, _, events = one_pass(pipe, cfg, args.seed, turns)
                warm, _, again = one_pass(pipe, cfg, args.seed, turns)
            assert [e.observed for e in again] == [e.observed for e in events]
            secs = sum(e.audio_seconds for e in events)
            ref = sum(1 for e in events for o in e.alignment if o.op != "ins")
            errs = sum(1 for e in events for o in e.alignment if o.op != "ok")
            ents = [x.survived for e in events for x in e.entities]
            trunc = sum(e.truncated for e in events)
            print(
                f"{name:<10} {secs:>8.1f} {cold:>10.2f} {cold / secs:>9.3f} {warm:>10.3f} "
                f"{errs / ref:>6.1%} {sum(ents):>4}/{len(ents):<4} {trunc:>5} "
                f"{ttt.spent:>5.2f} {tasr.spent:>5.2f} {cold - ttt.spent - tasr.spent:>5.2f}"
            )
            if name == args.conditions[-1]:
                for e in events:
                    print(f"   said: {e.intended}\n  heard: {e.observed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
