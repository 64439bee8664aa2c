"""The candidate's side spoken by the voice channel (``run --agent-speech``).

Each candidate turn's speech (every answer's text and a call-ending tool's concluding message, in
order: what the caller hears) is synthesised piece by piece with the run's TTS engine; the measured
durations replace the words-per-second estimate of the turn's spoken time
(:func:`callbench.sim.latency.turn_latency`). In ``line`` mode the turn's speech, joined, is also
carried over the scenario's line and recognised (:meth:`VoicePipeline.observe`), and the caller
simulator is given what the recogniser heard instead of the clean text, so a caller can mishear
the agent.

The line's draws for the agent's side come from :func:`agent_seed` of the episode's channel seed
(itself from the run seed, scenario and repeat, not the candidate), the hash of the text and how
often the agent said it before in the call: two candidates saying the same text at the same
point meet the same line, and the caller's and the agent's sides never share draws.
"""

from __future__ import annotations

import hashlib

from callbench.sim.voice.pipeline import VoiceLine
from callbench.trace import AgentSpeech


def agent_seed(channel_seed: int) -> int:
    """The line seed of the agent's side of an episode: the first 8 bytes (big-endian, shifted
    right by one bit) of SHA-256 over ``callbench-agent-speech|<channel seed>``."""
    digest = hashlib.sha256(f"callbench-agent-speech|{int(channel_seed)}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def speak_turn(
    voice: VoiceLine, parts: list[str], *, turn: int, language: str, channel_seed: int, occurrence: int
) -> AgentSpeech:
    """Speak candidate turn ``turn`` whose speech is ``parts`` (non-empty texts, in order) in
    ``language``; ``occurrence``: how often the agent said the joined text before in the call.
    Raises ``ValueError`` for an ``off`` line or no parts, and
    :class:`~callbench.sim.voice.engines.VoiceEngineError` when an engine fails."""
    if voice.agent == "off" or not parts:
        raise ValueError(f"candidate turn {turn}: nothing to speak ({voice.agent}, {len(parts)} parts)")
    pipe = voice.pipeline
    spoken = [pipe.measure(p, language, keep=voice.keep_dir) for p in parts]
    heard = None
    if voice.agent == "line":
        heard = pipe.observe(
            " ".join(parts), language, voice.config, channel_seed=agent_seed(channel_seed),
            occurrence=occurrence, turn=turn, keep=voice.keep_dir,
        )
    return AgentSpeech(
        turn=turn, mode=voice.agent, tts=pipe.tts.info.as_dict(), parts=spoken,
        seconds=round(sum(p.audio_seconds for p in spoken), 3), heard=heard,
    )
