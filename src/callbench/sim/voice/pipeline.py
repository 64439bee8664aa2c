"""The voice channel for one run: caller text -> TTS -> phone line -> ASR -> observed text, cached.

Cache (``<root>/tts/<key>.wav``, ``<root>/asr/<key>.json``, ``<root>/line/<sha256>.wav``; the run
uses ``<run>/voice-cache``):

- synthesised audio is keyed by SHA-256 over (spoken text, language, TTS engine name, version and
  settings);
- the line's output (what the recogniser was given, 16 kHz) is named by its own SHA-256, which
  the recogniser's cache entry and the turn's ``VoiceEvent`` record;
- the recogniser's text is keyed by SHA-256 over (that audio's SHA-256, line settings, line seed,
  ASR engine name, version and settings, language).

The line's random draws come from ``numpy.random.default_rng`` seeded with (the episode's channel
seed, SHA-256 of the spoken text, how many times this text was said before in the call): the same
caller text in the same scenario, repeat and run seed meets the same noise and packet loss for
every candidate, whichever turn it falls on, so candidates are compared on identical input, and a
second candidate pays only for turns whose text differs. A cached transcript is never
recomputed, so a replay of a run folder reads the recogniser's earlier output. Engine calls are
serialised by one lock (which also stops two episodes synthesising the same text at once).

Text with nothing to pronounce (:func:`~callbench.sim.voice.score.pronounceable`: no letter,
number or symbol) is an empty WAV without an engine call, and the recogniser hears nothing of it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from callbench.bundle.audio import AudioChannel
from callbench.sim.voice.engines import ASREngine, Recognition, TTSEngine, VoiceEngineError
from callbench.sim.voice.keys import LINE_FOLDER, TTS_FOLDER, cache_key, tts_key
from callbench.sim.voice.line import LINE_RATE, Audio, load_noise_file, read_wav, run_line, write_wav
from callbench.sim.voice.score import align, entities, pronounceable, speakable, wer, words
from callbench.trace import SpokenPart, VoiceEvent, atomic_write_bytes


@dataclass
class CacheStats:
    """How many syntheses and recognitions were served from the cache or computed."""

    tts_hits: int = 0
    tts_misses: int = 0
    asr_hits: int = 0
    asr_misses: int = 0
    audio_seconds: float = 0.0


PART_PAUSE_S = 0.0
"""Seconds of silence between the parts of a candidate turn carried over the line as one
utterance (:meth:`VoicePipeline.observe` with ``parts``): each part is already synthesised to
measure its speaking time, so their audio is joined rather than the joined text synthesised
again. None, as piper says a line of several sentences: its synthesis of the joined text was
byte-identical to the parts' syntheses put end to end on all 10 such turns checked (docs/voice.md,
"The starter through the voice channel")."""

AgentSpeechMode = Literal["off", "tts", "line"]
"""How the candidate's side is spoken (``run --agent-speech``): ``off`` not at all; ``tts``
synthesised to measure its speaking time; ``line`` also carried over the line and recognised for
the caller simulator (:mod:`callbench.sim.voice.agent`)."""


@dataclass(frozen=True)
class VoiceLine:
    """What an episode's channel needs to be a voice channel: the run's pipeline, the scenario's
    line settings, how the agent's side is spoken and where the run folder keeps its turns' audio
    (None: only in the cache)."""

    pipeline: VoicePipeline
    config: AudioChannel
    agent: AgentSpeechMode = "off"
    keep_dir: Path | None = None


@dataclass
class VoicePipeline:
    """Engines, cache folder and the bundle root (for noise files) of one run."""

    tts: TTSEngine
    asr: ASREngine
    cache_dir: Path
    bundle_root: Path | None = None
    stats: CacheStats = field(default_factory=CacheStats)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _noise: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _noise_sha: dict[str, str] = field(default_factory=dict, repr=False)

    def _noise_path(self, cfg: AudioChannel) -> Path | None:
        if cfg.noise.kind != "file" or cfg.noise.path is None:
            return None
        return (self.bundle_root or Path(".")) / cfg.noise.path

    def _noise_digest(self, cfg: AudioChannel) -> str | None:
        """SHA-256 of the noise file's bytes (the bundle's content hash does not cover it), so a
        changed recording is a new cache key and shows in the trace."""
        path = self._noise_path(cfg)
        if path is None:
            return None
        if str(path) not in self._noise_sha:
            try:
                self._noise_sha[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError as e:
                raise ValueError(f"{path}: cannot read the noise file: {e.strerror or e}") from None
        return self._noise_sha[str(path)]

    def _noise_file(self, cfg: AudioChannel, rate: int) -> np.ndarray | None:
        path = self._noise_path(cfg)
        if path is None:
            return None
        key = f"{path}@{rate}"
        if key not in self._noise:
            self._noise[key] = load_noise_file(path, rate)
        return self._noise[key]

    def _cached(self, key: str, make: Callable[[], Audio],
                keep: Path | None) -> tuple[Audio, str, bool]:
        """The audio at ``tts/<key>.wav`` of the cache, else ``make()`` written there (a damaged
        file, cut short or overwritten, is made again); a copy goes to ``keep``. Returns (audio,
        the WAV's SHA-256, whether it came from the cache)."""
        path = self.cache_dir / TTS_FOLDER / f"{key}.wav"
        if path.is_file():
            data = path.read_bytes()
            try:
                audio, hit = read_wav(data, where=str(path)), True
            except ValueError:
                hit = False
        else:
            hit = False
        if not hit:
            data = write_wav(make())
            atomic_write_bytes(path, data, sync=False)
            audio = read_wav(data, where=str(path))
        _keep(keep, TTS_FOLDER, path.name, data)
        return audio, hashlib.sha256(data).hexdigest(), hit

    def _synthesize(self, spoken: str, language: str, keep: Path | None = None) -> tuple[Audio, str]:
        def make() -> Audio:
            # nothing to pronounce ("...", "?!"): silence, no engine call (piper exits on such a line)
            if not pronounceable(spoken):
                return Audio(np.zeros(0, np.float32), LINE_RATE)
            return self.tts.synthesize(spoken, language)

        audio, sha, hit = self._cached(tts_key(spoken, language, self.tts.info.as_dict()), make, keep)
        if hit:
            self.stats.tts_hits += 1
        else:
            self.stats.tts_misses += 1
        return audio, sha

    def _joined(self, parts: list[str], spoken: str, language: str,
                keep: Path | None) -> tuple[Audio, str, dict[str, Any]]:
        """The audio of ``parts`` said in a row (each :func:`speakable` as :meth:`measure` synthesised
        it, :data:`PART_PAUSE_S` apart), cached under the key of ``spoken`` (their joined text) with
        the TTS record ``tts`` extended by ``joined`` (the parts as spoken) and ``pause_s``: never the
        key of a synthesis of the joined text itself, and the record a ``VoiceEvent`` keeps, so the
        report finds the file (``report/model/audio.py``). Returns (audio, its SHA-256, that
        record). Call with :attr:`_lock` held."""
        said = [speakable(p) for p in parts]
        info = {**self.tts.info.as_dict(), "joined": said, "pause_s": PART_PAUSE_S}

        def make() -> Audio:
            pieces = [self._synthesize(p, language, keep)[0] for p in said]
            rate = pieces[0].rate
            if any(a.rate != rate for a in pieces):
                rates = sorted({a.rate for a in pieces})
                raise VoiceEngineError(f"the TTS engine wrote {rates} Hz audio for the parts of one turn: "
                                       "they cannot be joined")
            gap = np.zeros(round(PART_PAUSE_S * rate), np.float32)
            joined: list[np.ndarray] = []
            for i, a in enumerate(pieces):
                joined += [gap, a.samples] if i else [a.samples]
            return Audio(np.concatenate(joined).astype(np.float32), rate)

        audio, sha, _ = self._cached(tts_key(spoken, language, info), make, keep)
        return audio, sha, info

    def measure(
        self, text: str, language: str, *, keep: Path | None = None, said: str | None = None
    ) -> SpokenPart:
        """Synthesise ``text`` (as :func:`speakable` reads it; ``said``: only this prefix of it) and
        measure its duration, from the cache when it was synthesised before. Raises
        :class:`~callbench.sim.voice.engines.VoiceEngineError` when the engine fails."""
        spoken = speakable(text if said is None else said)
        with self._lock:
            audio, sha = self._synthesize(spoken, language, keep)
            self.stats.audio_seconds += audio.seconds
        return SpokenPart(text=text, spoken=spoken, audio_sha256=sha, audio_seconds=round(audio.seconds, 3))

    def observe(
        self,
        intended: str,
        language: str,
        cfg: AudioChannel,
        *,
        channel_seed: int,
        occurrence: int,
        turn: int,
        facts: dict[str, object] | None = None,
        keep: Path | None = None,
        parts: list[str] | None = None,
    ) -> VoiceEvent:
        """Speak ``intended``, carry it over the line and recognise it; return the full record.
        ``keep``: a folder that also gets a copy of the clean and the line's audio (``tts/<key>.wav``
        and ``line/<sha256>.wav``, as in the cache), so a run folder whose cache lies elsewhere
        still holds the audio of its own turns. ``parts`` (two or more texts whose joining by
        spaces is ``intended``): what is spoken is their syntheses joined (:meth:`_joined`), not
        a new synthesis of ``intended``.

        Raises :class:`~callbench.sim.voice.engines.VoiceEngineError` when an engine fails."""
        spoken = speakable(intended)
        text_sha = hashlib.sha256(spoken.encode("utf-8")).digest()
        line_seed = [channel_seed, int.from_bytes(text_sha[:8], "big"), occurrence]
        line_settings: dict[str, Any] = cfg.model_dump(mode="json")
        noise_sha = self._noise_digest(cfg)
        if noise_sha is not None:
            line_settings["noise"]["sha256"] = noise_sha
        tts_info = self.tts.info.as_dict()
        with self._lock:
            if parts is not None and len(parts) > 1:
                audio, audio_sha, tts_info = self._joined(parts, spoken, language, keep)
            else:
                audio, audio_sha = self._synthesize(spoken, language, keep)
            self.stats.audio_seconds += audio.seconds
            akey = cache_key(
                {
                    "audio": audio_sha,
                    "line": line_settings,
                    "seed": line_seed,
                    "asr": self.asr.info.as_dict(),
                    "language": language,
                }
            )
            apath = self.cache_dir / "asr" / f"{akey}.json"
            cached = _transcript(apath)
            line_sha: str | None
            if not pronounceable(spoken):  # silence: the recogniser hears nothing, the line carries nothing
                rec, lost, frames, line_sha = Recognition("", False, 0), 0, 0, None
            elif cached is not None:
                self.stats.asr_hits += 1
                rec = Recognition(cached["text"], bool(cached["truncated"]), int(cached["tokens"]))
                lost, frames = int(cached["lost_frames"]), int(cached["frames"])
                line_sha = cached.get("line_sha256")  # absent in caches written before it was kept
                if keep is not None and isinstance(line_sha, str):
                    lpath = self.cache_dir / LINE_FOLDER / f"{line_sha}.wav"
                    if lpath.is_file():
                        _keep(keep, LINE_FOLDER, lpath.name, lpath.read_bytes())
            else:
                self.stats.asr_misses += 1
                rng = np.random.default_rng(line_seed)
                out = run_line(audio, cfg, rng, self._noise_file(cfg, audio.rate))
                heard = write_wav(out.audio)
                line_sha = hashlib.sha256(heard).hexdigest()
                lpath = self.cache_dir / LINE_FOLDER / f"{line_sha}.wav"
                if not lpath.is_file():
                    atomic_write_bytes(lpath, heard, sync=False)
                _keep(keep, LINE_FOLDER, lpath.name, heard)
                rec = self.asr.transcribe(out.audio, language)
                lost, frames = out.lost_frames, out.frames
                blob = {
                    "text": rec.text,
                    "truncated": rec.truncated,
                    "tokens": rec.tokens,
                    "lost_frames": lost,
                    "frames": frames,
                    "line_sha256": line_sha,
                }
                atomic_write_bytes(apath, json.dumps(blob, sort_keys=True).encode("utf-8"), sync=False)
        ops = align(words(intended), words(rec.text))
        return VoiceEvent(
            turn=turn,
            intended=intended,
            spoken=spoken,
            observed=rec.text,
            truncated=rec.truncated,
            tts=tts_info,
            asr=self.asr.info.as_dict(),
            line=line_settings,
            audio_sha256=audio_sha,
            audio_seconds=round(audio.seconds, 3),
            lost_frames=lost,
            frames=frames,
            wer=wer(ops),
            alignment=ops,
            entities=entities(intended, rec.text, facts),
            line_audio_sha256=line_sha,
        )


def _transcript(path: Path) -> dict[str, Any] | None:
    """The cached transcript record at ``path``, or None when there is none or it is not one (not
    JSON, or without the fields of a record as :meth:`VoicePipeline.observe` writes it): the cache
    is derived data, so a damaged entry is recognised again rather than failing the episode."""
    if not path.is_file():
        return None
    try:
        blob = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        return None
    fields = {"text": str, "truncated": bool, "tokens": int, "lost_frames": int, "frames": int}
    if not isinstance(blob, dict) or not all(isinstance(blob.get(k), t) for k, t in fields.items()):
        return None
    return blob


def _keep(folder: Path | None, sub: str, name: str, data: bytes) -> None:
    """Copy ``data`` to ``folder/sub/name`` unless it is there (names are content hashes or keys
    over the content's inputs, so a file already there is the same audio)."""
    if folder is None:
        return
    path = folder / sub / name
    if not path.is_file():
        atomic_write_bytes(path, data, sync=False)
