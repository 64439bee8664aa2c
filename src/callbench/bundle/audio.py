"""The voice channel's settings in a scenario (``channel.audio``): how the caller's speech is
spoken, carried over a phone line and recognised before the candidate sees it.

Only settings live here (the bundle knows no engine); :mod:`callbench.sim.voice` runs them. The
line model's stages and their order are documented in :mod:`callbench.sim.voice.line`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LineNoise(_Strict):
    """Additive noise at ``snr_db`` (dB, signal power over noise power over the whole utterance).
    ``white``: Gaussian; ``babble``: synthetic speech-shaped, syllable-modulated noise of six
    talkers; ``file``: a mono 16-bit WAV file, ``path`` relative to the bundle root, looped."""

    kind: Literal["none", "white", "babble", "file"] = "none"
    snr_db: float = Field(default=20.0, ge=-10.0, le=60.0)
    path: str | None = None

    @model_validator(mode="after")
    def _path_for_file(self) -> LineNoise:
        if self.kind == "file" and not self.path:
            raise ValueError(
                "noise kind 'file' needs a path (a mono 16-bit WAV, relative to the bundle root)"
            )
        if self.kind != "file" and self.path:
            raise ValueError(f"noise path is only read for kind 'file', not {self.kind!r}")
        return self


class PacketLoss(_Strict):
    """Lost 20 ms frames from a two-state Gilbert-Elliott chain: ``rate`` is the long-run fraction
    of frames lost, ``mean_burst`` the mean number of frames in a loss burst (1: independent
    losses). ``conceal``: a lost frame becomes silence (``zero``) or repeats the last good frame."""

    rate: float = Field(default=0.0, ge=0.0, le=0.5)
    mean_burst: float = Field(default=1.0, ge=1.0, le=50.0)
    conceal: Literal["zero", "repeat"] = "zero"


class AudioChannel(_Strict):
    """``channel.audio``: the caller is spoken (TTS), carried over a telephone line (noise,
    8 kHz, 300-3400 Hz band, G.711 ``codec``, packet loss) and recognised (ASR). Which engines
    speak and recognise is a run setting, not the bundle's (``callbench run --voice``)."""

    enabled: bool = True
    noise: LineNoise = Field(default_factory=LineNoise)
    band_pass: bool = True
    codec: Literal["pcmu", "pcma", "none"] = "pcmu"
    packet_loss: PacketLoss = Field(default_factory=PacketLoss)
