"""The candidate's side spoken by the voice channel (``run --agent-speech``).

Each candidate turn's speech (every answer's text and a call-ending tool's concluding message, in
order: what the caller hears) is synthesised piece by piece with the run's TTS engine; the measured
durations replace the words-per-second estimate of the turn's spoken time
(:func:`callbench.sim.latency.turn_latency`). In ``line`` mode the turn's speech is also carried
over the scenario's line and recognised (:meth:`VoicePipeline.observe`: the pieces' audio put
end to end, not the joined text synthesised again), and the caller
simulator is given what the recogniser heard instead of the clean text, so a caller can mishear
the agent.

The line's draws for the agent's side come from :func:`agent_seed` of the episode's channel seed
(itself from the run seed, scenario and repeat, not the candidate), the hash of the text and how
often the agent said it before in the call: two candidates saying the same text at the same
point meet the same line, and the caller's and the agent's sides never share draws.

Only the first :data:`MAX_TURN_CHARS` characters of a turn's speech are synthesised
(:func:`said_within`): piper took 8.9 s of wall time for 100 words on a loaded machine, so a turn
of some 1,500 words ran past the engine's time limit and failed the episode as a voice-channel
fault. A part cut short records the said prefix as its ``spoken`` text (shorter than the whole
text as :func:`~callbench.sim.voice.score.speakable` reads it), later parts are not spoken
(``spoken`` empty, 0 s), the caller hears the said prefix in ``line`` mode, and the turn's talk
time stays estimated from its words (:meth:`callbench.sim.conversation.Conversation.speak_agent`).
"""

from __future__ import annotations

import hashlib
import re

from callbench.sim.voice.pipeline import VoiceLine
from callbench.trace import AgentSpeech

MAX_TURN_CHARS = 2000
"""Characters of a candidate turn's speech (parts joined by one space) that are synthesised: about
330 words, two minutes of speech."""


def said_within(parts: list[str], limit: int = MAX_TURN_CHARS) -> list[str]:
    """What is said of each of ``parts`` when the turn may say ``limit`` characters (the parts
    joined by one space): whole parts while they fit, then the longest prefix of the next that
    ends at a word boundary (possibly empty), then nothing."""
    out: list[str] = []
    left = limit
    for part in parts:
        if len(part) <= left:
            out.append(part)
            left -= len(part) + 1
            continue
        m = re.match(rf"[\s\S]{{0,{max(0, left)}}}(?=\s|$)", part) if left > 0 else None
        out.append(m.group().rstrip() if m else "")
        left = -1
    return out


def agent_seed(channel_seed: int) -> int:
    """The line seed of the agent's side of an episode: the first 8 bytes (big-endian, shifted
    right by one bit) of SHA-256 over ``callbench-agent-speech|<channel seed>``."""
    digest = hashlib.sha256(f"callbench-agent-speech|{int(channel_seed)}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def speak_turn(
    voice: VoiceLine, parts: list[str], *, turn: int, language: str, channel_seed: int, occurrence: int
) -> AgentSpeech:
    """Speak candidate turn ``turn`` whose speech is ``parts`` (non-empty texts, in order) in
    ``language`` (at most :data:`MAX_TURN_CHARS` of it: :func:`said_within`); ``occurrence``: how
    often the agent said the joined text before in the call.
    Raises ``ValueError`` for an ``off`` line or no parts, and
    :class:`~callbench.sim.voice.engines.VoiceEngineError` when an engine fails."""
    if voice.agent == "off" or not parts:
        raise ValueError(f"candidate turn {turn}: nothing to speak ({voice.agent}, {len(parts)} parts)")
    pipe = voice.pipeline
    said = said_within(parts)
    spoken = [pipe.measure(p, language, keep=voice.keep_dir, said=s)
              for p, s in zip(parts, said, strict=True)]
    heard = None
    if voice.agent == "line":
        said_parts = [s for s in said if s]
        heard = pipe.observe(  # the parts' syntheses joined: none is synthesised twice
            " ".join(said_parts), language, voice.config, channel_seed=agent_seed(channel_seed),
            occurrence=occurrence, turn=turn, keep=voice.keep_dir, parts=said_parts,
        )
    return AgentSpeech(
        turn=turn, mode=voice.agent, tts=pipe.tts.info.as_dict(), parts=spoken,
        seconds=round(sum(p.audio_seconds for p in spoken), 3), heard=heard,
    )
