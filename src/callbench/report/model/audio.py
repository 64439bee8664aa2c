"""Where the HTML report finds a caller turn's audio: the voice channel's cache in the run folder.

The voice channel keeps what its TTS engine synthesised for each caller turn under
``<run>/voice-cache/tts/<key>.wav`` (:mod:`callbench.sim.voice.pipeline`; the key from
:func:`callbench.sim.voice.keys.tts_key` over the spoken text, the language and the engine), and
the turn's ``VoiceEvent`` records that audio's SHA-256. A file is used only when its bytes have
that hash, so the report never plays audio other than what the recogniser was given (before the
line model). A run made with a shared voice cache (``run --cache``: ``<cache>.voice/``) keeps its
audio there, which the run folder does not record; such turns show that their audio was not found.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from callbench.sim.voice.keys import TTS_FOLDER, tts_key
from callbench.trace import VoiceEvent

VOICE_CACHE = "voice-cache"
"""The run folder's voice cache (``callbench.runs.voice.CACHE_FOLDER``)."""


@dataclass(frozen=True)
class AudioFiles:
    """The synthesised audio of one run's caller turns, found by content. ``tts_dir`` is a plain
    string so that the object pickles cheaply into a report worker."""

    tts_dir: str

    @classmethod
    def of_run(cls, run_dir: Path | str) -> AudioFiles:
        """The audio in the run folder ``run_dir``'s own voice cache."""
        return cls(str(Path(run_dir) / VOICE_CACHE / TTS_FOLDER))

    def find(self, event: VoiceEvent, language: str) -> Path | None:
        """The WAV file of ``event``'s turn spoken in ``language`` (the trace's), or None when it
        is not in the cache or its bytes do not hash to ``event.audio_sha256``."""
        path = Path(self.tts_dir) / f"{tts_key(event.spoken, language, event.tts)}.wav"
        try:
            data = path.read_bytes()
        except OSError:
            return None
        return path if hashlib.sha256(data).hexdigest() == event.audio_sha256 else None
