"""The timings in a trace (docs/latency.md): per model request, per candidate turn, per episode.
Measurements, not content: outside the trace's content hash."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from callbench.models.timing import AttemptTiming


class RequestLatency(BaseModel):
    """The timings of one model request of the episode (candidate or caller). Seconds.

    ``start_s`` is when the episode loop sent it, from the episode's start (``perf_counter``, a
    monotonic clock; the wall-clock anchor is :attr:`EpisodeLatency.started_at`). The other times
    count from that send: ``first_token_s`` (first content token; not streamed: the whole answer),
    ``first_speech_s`` (first token of speech, when the answer held speech; not streamed: the whole
    answer), ``waited_s`` (the answer complete: every attempt and the backoff between them
    included, so it is what the conversation waited). ``attempts`` keeps each HTTP attempt
    (``models/timing.py``). ``gap_s``: seconds between the end of the previous candidate request of
    the same turn and this one (the tool round trip in the harness); 0 for a turn's first.
    ``source``: ``measured`` (timed by the client), ``replayed`` (served from the response cache:
    the stored timings of the original request, not measured now), ``harness`` (a client that
    times nothing, e.g. scripted: the loop timed the call, no first token known).
    ``harness_cpu_s``: callbench's own CPU seconds for this request (``sim/harness_cpu.py``): from
    building it to having handled its answer (tool calls answered; a caller's turn checked and
    rendered by the channel), measured in this run even when the answer was replayed; None in
    traces written before it was recorded and for requests the loop did not drive. A CPU time is
    finite and not negative: any other value (a hand-edited trace) is refused when the trace is read."""

    model_config = ConfigDict(allow_inf_nan=False)  # a timing is a finite number (hand edits refused)

    role: str
    turn: int
    attempt: int = 0
    message_index: int | None = None
    start_s: float
    gap_s: float = 0.0
    first_token_s: float
    first_speech_s: float | None = None
    waited_s: float
    streamed: bool = False
    source: Literal["measured", "replayed", "harness"] = "measured"
    attempts: list[AttemptTiming] = Field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    speech: bool = False
    tool_calls: int = 0
    harness_cpu_s: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)

    @property
    def retries(self) -> int:
        return max(0, len(self.attempts) - 1)


class TurnLatency(BaseModel):
    """One candidate turn, as the caller lives it. Seconds from the end of the caller's turn as the
    candidate observed it (the send of the turn's first request; turn 0, the greeting: the call
    connecting). ``time_to_first_word_s``: until the first token of speech the caller would hear
    (tool round trips before any speech count toward it; None when the turn said nothing);
    ``dead_air_s``: silences after the first word while the agent worked (tools, further
    requests), the estimated playing time of earlier speech subtracted; ``completion_s``: until
    the turn's last answer was complete; ``spoken_s``: the speaking time of the turn's speech,
    ``spoken_source`` saying how it was had: ``estimated`` from its words (``sim/speech_rate.py``)
    or ``measured``, the duration of its synthesis (``run --agent-speech``);
    ``tool_round_trips_before_speech``: answers with tool calls
    before the first with speech. ``streamed`` is False when any of its requests was not streamed
    (its first word is then the whole answer: latency = completion time). ``harness_cpu_s``: the
    sum of its requests' harness CPU (None when none was recorded)."""

    model_config = ConfigDict(allow_inf_nan=False)  # a timing is a finite number (hand edits refused)

    turn: int
    start_s: float
    time_to_first_word_s: float | None = None
    dead_air_s: float = 0.0
    completion_s: float
    spoken_s: float = 0.0
    spoken_source: Literal["estimated", "measured"] = "estimated"
    words: int = 0
    tool_round_trips_before_speech: int = 0
    requests: int = 0
    retries: int = 0
    streamed: bool = False
    source: Literal["measured", "replayed", "harness", "mixed"] = "measured"
    harness_cpu_s: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)


class EpisodeLatency(BaseModel):
    """Timings of an episode: measurements, not content (never in a judge's prompt, never in the
    trace's content hash :meth:`Trace.sha256`). ``started_at``: the wall clock (UTC, ISO 8601) at
    the episode's start, the anchor of every ``start_s``; ``speech_rate``: the rate used for spoken
    time (``sim/speech_rate.py``), e.g. ``hi: 2.9 words/s``."""

    model_config = ConfigDict(allow_inf_nan=False)  # a timing is a finite number (hand edits refused)

    started_at: str
    clock: str = "perf_counter"
    speech_rate: str = ""
    source: Literal["measured", "replayed", "harness", "mixed"] = "measured"
    requests: list[RequestLatency] = Field(default_factory=list)
    turns: list[TurnLatency] = Field(default_factory=list)
