"""The voice channel's records in a trace: a caller turn as spoken and recognised
(:class:`VoiceEvent`), and the candidate's side spoken (:class:`AgentSpeech`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer


class WordOp(BaseModel):
    """One step of a word alignment of intended to observed caller words: ``ok`` (same word),
    ``sub``, ``del`` (intended word missing), ``ins`` (observed word never said)."""

    op: Literal["ok", "sub", "del", "ins"]
    intended: str | None = None
    observed: str | None = None


class Entity(BaseModel):
    """A digit string, amount or name the caller said, and whether it reached the candidate intact."""

    kind: Literal["digits", "amount", "name"]
    text: str
    survived: bool


class VoiceEvent(BaseModel):
    """The voice channel on one caller turn (:mod:`callbench.sim.voice`): the text as spoken, the
    engines with their versions and settings, the line's settings and lost 20 ms frames, what the
    recogniser heard (``observed``, before any VAD split; ``truncated`` when its decode hit the
    output bound), the word alignment, WER (None: no intended words) and entity survival.
    ``replaced`` lists the authored ASR events of the turn that the recogniser's output replaced."""

    turn: int
    intended: str
    spoken: str
    observed: str
    truncated: bool = False
    tts: dict[str, Any]
    asr: dict[str, Any]
    line: dict[str, Any]
    audio_sha256: str
    audio_seconds: float
    lost_frames: int = 0
    frames: int = 0
    wer: float | None = None
    alignment: list[WordOp] = Field(default_factory=list)
    entities: list[Entity] = Field(default_factory=list)
    replaced: list[str] = Field(default_factory=list)
    line_audio_sha256: str | None = None
    """SHA-256 of the WAV the recogniser was given (the line's output, 16 kHz); None in traces
    saved before the voice channel kept it."""

    @model_serializer(mode="wrap")
    def _leave_out_unknown_line_audio(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """``line_audio_sha256`` is left out when None, so a trace saved before the channel kept the
        line's audio serialises (and hashes) to the bytes it was graded on."""
        data: dict[str, Any] = handler(self)
        if data.get("line_audio_sha256", "") is None:
            del data["line_audio_sha256"]
        return data


class SpokenPart(BaseModel):
    """One piece of the candidate's speech synthesised by the voice channel's TTS engine: the
    ``text`` as the candidate wrote it, as ``spoken`` (digit runs read out), the audio's SHA-256 and
    its measured duration (seconds)."""

    text: str
    spoken: str
    audio_sha256: str
    audio_seconds: float


class AgentSpeech(BaseModel):
    """The candidate's side of one candidate turn spoken by the voice channel (``run
    --agent-speech``). ``mode``: ``tts`` (synthesised to measure its speaking time) or ``line``
    (also carried over the line and recognised: the caller simulator was given ``heard``, the
    recogniser's text, instead of the clean speech). ``parts``: each answer's speech (and a
    call-ending tool's concluding message), in order; ``seconds``: their summed duration.
    ``heard``: the turn's speech joined, as the caller side's :class:`VoiceEvent` records a caller
    turn (``intended``, ``observed``, WER, entities); None in ``tts`` mode."""

    turn: int
    mode: Literal["tts", "line"]
    tts: dict[str, Any]
    parts: list[SpokenPart]
    seconds: float
    heard: VoiceEvent | None = None
