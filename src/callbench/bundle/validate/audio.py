"""The voice channel's files in a scenario: ``channel.audio.noise.path`` must name a PCM WAV file
inside the bundle (stdlib ``wave`` reads its header; the samples are read when a run uses it).

Codes: ``channel.audio_file`` (missing, unreadable, not a PCM WAV, or no samples) and
``path.escape`` (the path leaves the bundle root).
"""

from __future__ import annotations

import wave
from pathlib import Path

from callbench.bundle.models import Scenario
from callbench.bundle.validate.tools import Report

FIELD = "channel.audio.noise.path"


def audit_audio(root: Path, s: Scenario, rep: Report) -> None:
    """Report a noise file that a voice run could not read."""
    audio = s.channel.audio
    if audio is None or audio.noise.kind != "file" or not audio.noise.path:
        return
    rel = audio.noise.path
    base = root.resolve()
    target = (base / rel).resolve()
    if Path(rel).is_absolute() or not target.is_relative_to(base):
        rep(FIELD, "path.escape", f"the noise file {rel!r} is outside the bundle")
        return
    if not target.is_file():
        rep(FIELD, "channel.audio_file", f"the noise file {rel!r} does not exist in the bundle")
        return
    try:
        with wave.open(str(target), "rb") as w:
            frames, width = w.getnframes(), w.getsampwidth()
    except (OSError, EOFError, wave.Error) as e:
        rep(FIELD, "channel.audio_file", f"the noise file {rel!r} is not a readable PCM WAV file: {e}")
        return
    if width not in (1, 2, 4) or frames == 0:
        rep(FIELD, "channel.audio_file", f"the noise file {rel!r} needs 8, 16 or 32-bit PCM samples")
