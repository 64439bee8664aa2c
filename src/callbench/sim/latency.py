"""Timing of the episode loop's requests, and the caller's view of each candidate turn.

:class:`LatencyRecorder` times every ``complete`` call of the loop (``sim/conversation.py``):
the loop's own send and return on ``perf_counter`` from the episode's start, with the client's
per-attempt timings (``models/timing.py``) when it measured them. :func:`turn_latency` lays a
candidate turn's requests end to end as the caller lives them (see
:class:`~callbench.trace.TurnLatency`): the timeline is rebuilt from each request's own durations
and the gaps between them, so a replayed turn is laid out with its replayed durations.

Harness CPU: the loop calls :meth:`LatencyRecorder.segment` before it builds each request; the CPU
its :class:`~callbench.sim.harness_cpu.CpuMeter` counted from there to the next segment (or the
end of the conversation) is the harness CPU of the request recorded in between: building it, the
client's own work, handling the answer (tool calls, the caller's checks and channel).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence

from callbench.models.base import ModelResponse
from callbench.models.timing import AttemptTiming, ResponseTiming
from callbench.sim.harness_cpu import CpuMeter
from callbench.sim.speech_rate import rate_label, spoken_seconds, word_count
from callbench.trace import EpisodeLatency, RequestLatency, TurnLatency


def _source(cached: bool, timing: ResponseTiming | None) -> str:
    if cached:
        return "replayed"
    return "harness" if timing is None else "measured"


class LatencyRecorder:
    """Collects the :class:`RequestLatency` of one conversation. ``clock`` is a monotonic clock
    in seconds (``time.perf_counter``; injectable for tests)."""

    def __init__(self, language: str, clock: object = time.perf_counter) -> None:
        self.clock = clock
        self.origin: float = self._now()
        self.started_at = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
        self.language = language
        self.requests: list[RequestLatency] = []
        self.speech: list[str | None] = []  # the speech of each request's answer, for spoken time
        self._turn_end: dict[int, float] = {}  # candidate turn -> when its last request returned
        self.measured: dict[str, float] = {}  # speech (stripped) -> seconds of its synthesis
        self.cpu = CpuMeter()  # harness CPU of the conversation (driven by Conversation.run)
        self._segment_cpu: float | None = None  # the meter at the start of the open segment
        self._segment_first = 0  # the first request recorded in the open segment

    def segment(self) -> None:
        """The loop starts on a new request (before building it): close the open segment, giving
        its CPU to the request recorded in it (the last, should there be several). Nothing is
        given when the meter was never driven (``CpuMeter.driven``)."""
        now = self.cpu.reading()
        if self.cpu.driven and self._segment_cpu is not None and len(self.requests) > self._segment_first:
            self.requests[-1].harness_cpu_s = max(0.0, now - self._segment_cpu)
        self._segment_cpu, self._segment_first = now, len(self.requests)

    def _now(self) -> float:
        return float(self.clock())  # type: ignore[operator]

    def begin(self) -> float:
        """The loop is about to send a request: the time to pass to :meth:`record`."""
        return self._now()

    def record(self, *, role: str, turn: int, attempt: int, began: float, response: ModelResponse | None,
               timing: ResponseTiming | None, cached: bool = False) -> RequestLatency:
        """Record one request sent at ``began`` (from :meth:`begin`) that has just returned
        ``response`` (None: it raised a ModelOutputError, whose ``timing`` is given). The
        client's ``timing`` is used when present (``source`` measured, or replayed when served
        from the cache); otherwise the loop's own measurement (``harness``)."""
        ended = self._now()
        content = response.content if response is not None else None
        calls = len(response.tool_calls) if response is not None else 0
        speech = role == "candidate" and bool(content and content.strip())  # the caller's is JSON
        if timing is not None and timing.attempts:
            waited, first_token = timing.waited_s, timing.first_token_s
            first_speech = timing.first_speech_s if timing.streamed else None
            if speech and first_speech is None:
                first_speech = waited if not timing.streamed else first_token
            attempts, streamed = timing.attempts, timing.streamed
        else:
            waited = first_token = max(0.0, ended - began)
            first_speech = waited if speech else None
            attempts = [AttemptTiming(sent_s=0.0, finished_s=waited)]
            streamed = False
        gap = 0.0
        if role == "candidate" and turn in self._turn_end:
            gap = max(0.0, began - self._turn_end[turn])
        if role == "candidate":
            self._turn_end[turn] = ended
        usage = response.usage if response is not None else None
        item = RequestLatency(
            role=role, turn=turn, attempt=attempt, start_s=max(0.0, began - self.origin), gap_s=gap,
            first_token_s=first_token, first_speech_s=first_speech if speech else None, waited_s=waited,
            streamed=streamed, source=_source(cached, timing), attempts=attempts,
            input_tokens=usage.input_tokens if usage else 0,
            output_tokens=usage.output_tokens if usage else 0,
            speech=speech, tool_calls=calls)
        self.requests.append(item)
        self.speech.append(content if speech else None)
        return item

    def episode(self) -> EpisodeLatency:
        """The :class:`EpisodeLatency` of everything recorded, with one :class:`TurnLatency` per
        candidate turn. Closes the open harness CPU segment."""
        self.segment()
        turns: dict[int, list[tuple[RequestLatency, str | None]]] = {}
        for req, speech in zip(self.requests, self.speech, strict=True):
            if req.role == "candidate":
                turns.setdefault(req.turn, []).append((req, speech))
        sources = {r.source for r in self.requests}
        return EpisodeLatency(
            started_at=self.started_at, speech_rate=rate_label(self.language),
            source=(sources.pop() if len(sources) == 1 else "mixed") if sources else "measured",
            requests=list(self.requests),
            turns=[turn_latency(t, items, self.measured) for t, items in sorted(turns.items())])


def turn_latency(turn: int, items: Sequence[tuple[RequestLatency, str | None]],
                 measured: dict[str, float] | None = None) -> TurnLatency:
    """The caller's view of one candidate turn from its requests in order, each with the speech of
    its answer (None: none). Request k starts ``gap_s`` after request k-1 ended (the first at 0);
    its speech is available ``first_speech_s`` after its start and plays for its estimated
    speaking time (``speech_rate.spoken_seconds``); speech that is ready while earlier speech still
    plays waits for it. Dead air: the silences between the end of one piece of speech and the
    start of the next. ``measured`` (speech, stripped -> seconds of its synthesis, from
    ``run --agent-speech``) replaces the estimate of each speech it holds; the turn's
    ``spoken_source`` is ``measured`` when every piece of its speech was. Raises ValueError for an
    empty ``items``."""
    if not items:
        raise ValueError(f"candidate turn {turn}: no requests")
    at = 0.0  # end of the previous request on the turn's timeline
    first_word: float | None = None
    heard_until = 0.0
    dead_air = spoken = 0.0
    words = before = retries = 0
    estimated = measured_any = False
    for k, (req, speech) in enumerate(items):
        start = 0.0 if k == 0 else at + req.gap_s
        retries += req.retries
        if speech:
            ready = start + (req.first_speech_s if req.first_speech_s is not None else req.waited_s)
            got = (measured or {}).get(speech.strip())
            length = spoken_seconds(speech) if got is None else got
            estimated, measured_any = estimated or got is None, measured_any or got is not None
            if first_word is None:
                first_word = ready
                heard_until = ready + length
            else:
                dead_air += max(0.0, ready - heard_until)
                heard_until = max(heard_until, ready) + length
            spoken += length
            words += word_count(speech)
        elif first_word is None and req.tool_calls:
            before += 1
        at = start + req.waited_s
    sources = {r.source for r, _ in items}
    cpu = [r.harness_cpu_s for r, _ in items if r.harness_cpu_s is not None]
    return TurnLatency(
        turn=turn, start_s=items[0][0].start_s, time_to_first_word_s=first_word, dead_air_s=dead_air,
        completion_s=at, spoken_s=spoken,
        spoken_source="measured" if measured_any and not estimated else "estimated", words=words,
        tool_round_trips_before_speech=before,
        requests=len(items), retries=retries, streamed=all(r.streamed for r, _ in items),
        source=sources.pop() if len(sources) == 1 else "mixed", harness_cpu_s=sum(cpu) if cpu else None)
