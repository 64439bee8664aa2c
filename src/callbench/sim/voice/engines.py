"""Speech engines behind one interface: a :class:`TTSEngine` speaks text, an :class:`ASREngine`
recognises audio. Each records ``name``, ``version`` and ``settings`` (:class:`EngineInfo`), which
key the voice cache and go into the trace and the manifest.

Local engines here:

- :class:`EspeakTTS`: espeak-ng (Debian package ``espeak-ng``) as a subprocess. A formant voice:
  a recogniser makes errors on it that real callers do not cause, so it is the labelled *stress
  channel*, never the default;
- :class:`~callbench.sim.voice.piper.PiperTTS` (in :mod:`.piper`): piper-tts run as a long-lived
  subprocess (``python -m piper``; piper is GPL, so it is never imported), with a voice ``.onnx``;
- :class:`WhisperASR`: faster-whisper (CTranslate2) with fixed language, beam 1, temperature 0
  only (no sampled re-decode), no conditioning on previous text, each utterance decoded on its
  own, and an output bound of :func:`max_tokens` so that a looping decode ends truncated.

Remote engines (OpenAI-compatible ``audio/speech`` and ``audio/transcriptions``) are in
:mod:`callbench.sim.voice.remote`.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from callbench.sim.voice.line import ASR_RATE, Audio, read_wav, resample

SUBPROCESS_TIMEOUT_S = 120.0


class VoiceEngineError(RuntimeError):
    """An engine could not start or failed on an utterance (message says which and why)."""


@dataclass(frozen=True)
class EngineInfo:
    """What identifies an engine's output: ``name``, ``version`` and the ``settings`` it ran with
    (no secrets; JSON-serialisable)."""

    name: str
    version: str
    settings: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "settings": dict(sorted(self.settings.items()))}


@dataclass(frozen=True)
class Recognition:
    """A recogniser's transcript of one utterance. ``truncated``: decoding stopped at the output
    bound (a looping decode), so ``text`` is cut short."""

    text: str
    truncated: bool = False
    tokens: int = 0


class TTSEngine(Protocol):
    """Speaks ``text`` in ``language`` (a BCP-47 tag such as ``en`` or ``hi-IN``)."""

    info: EngineInfo
    languages: frozenset[str] | None  # primary subtags it can speak; None: any (a remote engine)

    def synthesize(self, text: str, language: str) -> Audio: ...


class ASREngine(Protocol):
    """Recognises one utterance of ``audio`` in ``language``."""

    info: EngineInfo
    languages: frozenset[str] | None

    def transcribe(self, audio: Audio, language: str) -> Recognition: ...


def primary(language: str) -> str:
    """The primary subtag of a BCP-47 tag, lower case (``en-US`` -> ``en``)."""
    return language.split("-")[0].split("_")[0].lower()


def _run(cmd: list[str], *, what: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(
            cmd, input=stdin, capture_output=True, timeout=SUBPROCESS_TIMEOUT_S, check=False
        )
    except FileNotFoundError:
        raise VoiceEngineError(f"{what}: {cmd[0]} is not installed") from None
    except subprocess.TimeoutExpired:
        raise VoiceEngineError(f"{what}: no result within {SUBPROCESS_TIMEOUT_S:.0f} s") from None
    if done.returncode != 0:
        err = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise VoiceEngineError(f"{what} exited {done.returncode}: {err[-1] if err else 'no message'}")
    return done.stdout


# ------------------------------------------------------------------ espeak-ng (stress channel)


class EspeakTTS:
    """espeak-ng as a subprocess: ``espeak-ng -v <voice> -s <wpm> --stdout <text>``.

    ``voices`` maps a primary language subtag to an espeak voice (default ``en`` -> ``en-us``; any
    other language uses its subtag as the voice name). Raises :class:`VoiceEngineError` when
    espeak-ng is not on PATH (Debian: ``apt-get install espeak-ng``)."""

    stress_channel = True

    def __init__(
        self, *, wpm: int = 160, voices: dict[str, str] | None = None, binary: str = "espeak-ng"
    ) -> None:
        path = shutil.which(binary)
        if path is None:
            raise VoiceEngineError(
                f"espeak-ng is not installed ({binary} not on PATH; Debian: apt-get install espeak-ng)"
            )
        self.binary = path
        self.voices = {"en": "en-us", **(voices or {})}
        version = _run([path, "--version"], what="espeak-ng --version").decode().split()
        ver = next((w for w in version if w[:1].isdigit()), "unknown")
        self.info = EngineInfo("espeak-ng", ver, {"wpm": wpm, "voices": self.voices, "stress_channel": True})
        self.languages: frozenset[str] | None = None  # espeak speaks many; quality is the caveat
        self.wpm = wpm

    def synthesize(self, text: str, language: str) -> Audio:
        voice = self.voices.get(primary(language), primary(language))
        wav = _run([self.binary, "-v", voice, "-s", str(self.wpm), "--stdout", text], what="espeak-ng")
        return read_wav(wav, where="espeak-ng output")


# ------------------------------------------------------------------ faster-whisper


SKIP_RULES = {"no_speech_threshold": 0.6, "log_prob_threshold": -1.0, "compression_ratio_threshold": 2.4}
"""faster-whisper 1.2's defaults, pinned. With temperature 0 only, the compression-ratio rule
selects no re-decode; the other two drop a window as silence. Measured on 56 piper renditions of the
starter's caller turns through G.711: no-speech probability at most 0.15, so no turn was dropped."""


def max_tokens(seconds: float) -> int:
    """The output bound for an utterance of ``seconds``: 8 tokens per second plus 16. Read speech
    runs at about 2.5-3.5 words (3-5 tokens) a second, so only a looping decode reaches it."""
    return math.ceil(8.0 * seconds) + 16


class WhisperASR:
    """faster-whisper on a CTranslate2 model folder (``model.bin``, ``config.json``,
    ``tokenizer.json``, vocabulary), CPU, int8 by default.

    Decoding: ``language`` fixed to the utterance's primary subtag, ``beam_size=1``,
    ``temperature=0`` only, ``condition_on_previous_text=False``, no initial prompt, no VAD filter,
    no timestamps, ``max_new_tokens`` = :func:`max_tokens`, and faster-whisper's skip rules passed
    explicitly (:data:`SKIP_RULES`: a window is dropped as silence when its no-speech probability
    is above 0.6 and its mean log-probability below -1.0), so they are recorded in ``info`` and a
    change of the library's defaults cannot change a transcript unrecorded. The model is loaded once; every
    utterance is a separate ``transcribe`` call, so no decoder state carries between utterances.
    Raises :class:`VoiceEngineError` when faster-whisper is missing or the folder is incomplete or
    cannot be loaded (not a CTranslate2 whisper model)."""

    def __init__(
        self,
        model_dir: Path,
        *,
        label: str,
        languages: frozenset[str] | None = frozenset({"en"}),
        compute_type: str = "int8",
        threads: int = 1,
    ) -> None:
        self.model_dir = Path(model_dir)
        missing = [
            f for f in ("model.bin", "config.json", "tokenizer.json") if not (self.model_dir / f).is_file()
        ]
        if missing:
            raise VoiceEngineError(f"whisper model folder {self.model_dir}: missing {', '.join(missing)}")
        try:
            import importlib.metadata as md

            from faster_whisper import WhisperModel
        except ImportError:
            raise VoiceEngineError(
                "faster-whisper is not installed: pip install 'callbench[audio]'"
            ) from None
        try:
            self._model = WhisperModel(str(self.model_dir), device="cpu", compute_type=compute_type,
                                       cpu_threads=threads, num_workers=1)
        except Exception as e:  # ctranslate2 and the tokenizer raise RuntimeError, ValueError and others
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise VoiceEngineError(
                f"whisper model folder {self.model_dir}: cannot load it: {first}") from None
        self.languages = languages
        self.info = EngineInfo(
            "faster-whisper",
            f"{md.version('faster-whisper')}+ct2-{md.version('ctranslate2')}",
            {
                "model": label,
                "compute_type": compute_type,
                "beam_size": 1,
                "temperature": 0.0,
                "condition_on_previous_text": False,
                "vad_filter": False,
                "max_tokens": "8/s+16",
                **SKIP_RULES,
            },
        )

    def transcribe(self, audio: Audio, language: str) -> Recognition:
        x = resample(audio.samples, audio.rate, ASR_RATE)
        bound = max_tokens(audio.seconds)
        segments, _ = self._model.transcribe(
            x,
            language=primary(language),
            task="transcribe",
            beam_size=1,
            best_of=1,
            temperature=0.0,
            condition_on_previous_text=False,
            initial_prompt=None,
            vad_filter=False,
            without_timestamps=True,
            max_new_tokens=bound,
            word_timestamps=False,
            log_progress=False,
            **SKIP_RULES,
        )
        texts, tokens, truncated = [], 0, False
        for seg in segments:
            texts.append(seg.text.strip())
            tokens += len(seg.tokens)
            truncated = truncated or len(seg.tokens) >= bound
        return Recognition(" ".join(t for t in texts if t), truncated=truncated, tokens=tokens)


def cpu_threads() -> int:
    """Threads for a local engine: ``$CALLBENCH_VOICE_THREADS`` or 1 (episodes run side by side)."""
    try:
        return max(1, int(os.environ.get("CALLBENCH_VOICE_THREADS", "1")))
    except ValueError:
        return 1
