"""The voice cache's keys (:mod:`callbench.sim.voice.pipeline`), kept apart from the engines and
numpy so that a reader of a run folder (the HTML report, finding a caller turn's audio) computes
them without importing either."""

from __future__ import annotations

import hashlib
import json
from typing import Any

TTS_FOLDER = "tts"
"""Synthesised audio inside a voice cache folder: ``<cache>/tts/<tts_key>.wav``."""
LINE_FOLDER = "line"
"""The line's output (what the recogniser was given) inside a voice cache folder:
``<cache>/line/<SHA-256 of the WAV>.wav``."""


def cache_key(obj: Any) -> str:
    """SHA-256 hex of ``obj`` as sorted-key JSON with non-ASCII kept (UTF-8)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def tts_key(spoken: str, language: str, tts: dict[str, Any]) -> str:
    """The key of the synthesised audio of ``spoken`` (the text as spoken, after
    :func:`~callbench.sim.voice.score.speakable`) in ``language`` (BCP 47) by the TTS engine whose
    name, version and settings are ``tts`` (``EngineInfo.as_dict()``, as a ``VoiceEvent`` records
    it)."""
    return cache_key({"text": spoken, "language": language, "tts": tts})
