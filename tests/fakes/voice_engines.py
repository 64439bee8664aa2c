"""Scripted speech engines for the voice channel's tests: no model, no subprocess.

:class:`ToneTTS` "speaks" a text as a pure tone whose frequency is derived from the text's hash;
:class:`ToneASR` finds the tone's frequency, looks the text up, and "mishears" the last digit of
each digit run as a digit derived from the SHA-256 of the samples it received, so what it hears
depends on the line's noise and losses exactly as a recogniser's output would."""

from __future__ import annotations

import hashlib
import re

import numpy as np

from callbench.sim.voice.engines import EngineInfo, Recognition
from callbench.sim.voice.line import Audio

RATE = 16000


def _freq(text: str) -> float:
    return 400.0 + 5.0 * (int(hashlib.sha256(text.encode()).hexdigest(), 16) % 500)


class ToneTTS:
    def __init__(self) -> None:
        self.info = EngineInfo("tone-tts", "1", {"rate": RATE})
        self.languages: frozenset[str] | None = None
        self.table: dict[float, str] = {}
        self.calls = 0

    def synthesize(self, text: str, language: str) -> Audio:
        self.calls += 1
        f = _freq(text)
        self.table[f] = text
        n = int(RATE * max(1.0, 0.3 * len(text.split())))
        t = np.arange(n) / RATE
        return Audio((0.3 * np.sin(2 * np.pi * f * t)).astype(np.float32), RATE)


class ToneASR:
    def __init__(self, tts: ToneTTS, *, mishear: bool = True, truncate: bool = False) -> None:
        self.tts, self.mishear, self.truncate = tts, mishear, truncate
        self.info = EngineInfo("tone-asr", "1", {"mishear": mishear})
        self.languages: frozenset[str] | None = frozenset({"en"})
        self.calls = 0

    def transcribe(self, audio: Audio, language: str) -> Recognition:
        self.calls += 1
        spec = np.abs(np.fft.rfft(audio.samples))
        peak = float(np.fft.rfftfreq(len(audio.samples), 1.0 / audio.rate)[int(np.argmax(spec))])
        nearest = min(self.tts.table, key=lambda f: abs(f - peak))
        text = self.tts.table[nearest]
        if self.mishear:
            digit = str(int(hashlib.sha256(audio.samples.tobytes()).hexdigest(), 16) % 10)
            text = re.sub(r"(\d)(?=\D*$)", digit, text, count=1) if re.search(r"\d", text) else text
        if self.truncate:
            return Recognition(" ".join(text.split()[:2]), truncated=True, tokens=99)
        return Recognition(text, tokens=len(text.split()))
