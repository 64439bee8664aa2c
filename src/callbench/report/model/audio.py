"""Where the HTML report finds a caller turn's audio: the voice channel's audio kept with the run.

The voice channel caches what its TTS engine synthesised for each turn under ``tts/<key>.wav``
(the key from :func:`callbench.sim.voice.keys.tts_key` over the spoken text, the language and the
engine) and what the line delivered to the recogniser under ``line/<sha256>.wav``
(:mod:`callbench.sim.voice.pipeline`); the turn's ``VoiceEvent`` records both SHA-256s. A run
folder holds that layout in ``voice-cache`` (its own cache) and, when its cache lay beside a
shared response cache (``run --cache``: ``<cache>.voice/``), in ``voice-audio``, the copy of its
own turns' audio the run keeps (docs/decisions.md, "The audio of a run with a shared cache").
A file is used only when its bytes have the recorded hash, so the report never plays audio
other than what the line carried or the recogniser was given.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from callbench.sim.voice.keys import LINE_FOLDER, TTS_FOLDER, tts_key
from callbench.trace import VoiceEvent

VOICE_CACHE = "voice-cache"
"""The run folder's voice cache (``callbench.runs.voice.CACHE_FOLDER``)."""
VOICE_AUDIO = "voice-audio"
"""The run folder's copy of its turns' audio (``callbench.runs.voice.KEPT_FOLDER``)."""


@dataclass(frozen=True)
class AudioFiles:
    """The audio of one run's turns, found by content. ``roots`` are plain strings so that the
    object pickles cheaply into a report worker; each holds ``tts/`` and ``line/``."""

    roots: tuple[str, ...]

    @classmethod
    def of_run(cls, run_dir: Path | str) -> AudioFiles:
        """The audio in the run folder ``run_dir``: its own voice cache, then its kept copy."""
        return cls((str(Path(run_dir) / VOICE_CACHE), str(Path(run_dir) / VOICE_AUDIO)))

    def _first(self, sub: str, name: str, sha256: str) -> Path | None:
        for root in self.roots:
            path = Path(root) / sub / name
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if hashlib.sha256(data).hexdigest() == sha256:
                return path
        return None

    def find(self, event: VoiceEvent, language: str) -> Path | None:
        """The clean synthesis of ``event``'s turn spoken in ``language`` (the trace's), or None
        when no root holds a file whose bytes hash to ``event.audio_sha256``."""
        name = f"{tts_key(event.spoken, language, event.tts)}.wav"
        return self._first(TTS_FOLDER, name, event.audio_sha256)

    def find_line(self, event: VoiceEvent) -> Path | None:
        """What the line delivered of ``event``'s turn (the WAV the recogniser was given), or None
        when the trace records none (saved before it was kept) or no root holds it."""
        sha = event.line_audio_sha256
        return None if sha is None else self._first(LINE_FOLDER, f"{sha}.wav", sha)
