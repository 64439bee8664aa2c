"""Timings of one model request, measured where the request is sent.

A client that measures its requests returns a :class:`ResponseTiming` with its
:class:`~callbench.models.base.ModelResponse`: one :class:`AttemptTiming` per HTTP attempt (a
retried request keeps each attempt's timings), every time in seconds from the moment the first
attempt was sent, read from ``time.perf_counter`` (a monotonic clock: wall-clock changes never
make a duration negative). ``waited_s`` is what the caller of the request waited in all: every
attempt, and the backoff between attempts, included.

Inside an attempt the adapter marks the moments it observes through :func:`mark_first_byte` and
:func:`mark_first_token` (a context variable holds the attempt's clock, so concurrent requests on
one client never mix their marks). Without streaming the first content token is only seen when
the whole answer has arrived, so ``first_token_s`` equals ``finished_s`` and ``streamed`` is False.

Timings are measurements, not content: they never change what a model said, so they are kept out
of cache keys, candidate ids and the trace's content hash (``callbench/trace``).
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import dataclass

from pydantic import BaseModel, Field


class AttemptTiming(BaseModel):
    """One HTTP attempt. Seconds from the first attempt's send (``sent_s`` is 0 for the first).

    ``first_byte_s``: the first byte of the response body (None when not observed: a response
    read whole by the transport); ``first_token_s``: the first content token (text or tool-call
    delta) of a streamed answer, else None; ``finished_s``: the answer complete or the attempt
    failed; ``fault``: the fault kind of a failed attempt (``models/faults.py``), None when it
    succeeded."""

    sent_s: float
    first_byte_s: float | None = None
    first_token_s: float | None = None
    first_speech_s: float | None = None
    """The first token of speech (text the caller would hear), when the stream showed one."""
    finished_s: float
    fault: str | None = None


class ResponseTiming(BaseModel):
    """The timings of one request (all its attempts). See the module docstring."""

    attempts: list[AttemptTiming] = Field(default_factory=list)
    streamed: bool = False
    """True when the answer arrived as a stream whose first tokens were timed."""

    @property
    def waited_s(self) -> float:
        """Seconds from the first send to the end of the last attempt (retries and backoff
        included): what the caller of the request waited."""
        return self.attempts[-1].finished_s if self.attempts else 0.0

    @property
    def first_token_s(self) -> float:
        """The first content token of the answer that was used (the last attempt), counted from
        the first send: retries before it are part of the wait. Not streamed: ``waited_s``."""
        last = self.attempts[-1] if self.attempts else None
        if last is None:
            return 0.0
        return last.first_token_s if last.first_token_s is not None else last.finished_s

    @property
    def first_speech_s(self) -> float | None:
        """The first token of speech of the answer used, counted from the first send; None when
        the stream showed none (a non-streamed answer: the whole answer, ``waited_s``)."""
        last = self.attempts[-1] if self.attempts else None
        return last.first_speech_s if last is not None else None


@dataclass
class AttemptClock:
    """The marks of one attempt in progress, in ``perf_counter`` seconds (absolute)."""

    sent: float
    first_byte: float | None = None
    first_token: float | None = None
    first_speech: float | None = None
    streamed: bool = False

    def timing(self, origin: float, finished: float, fault: str | None) -> AttemptTiming:
        """This attempt relative to ``origin`` (the first attempt's send)."""
        def rel(t: float | None) -> float | None:
            return None if t is None else max(0.0, t - origin)

        return AttemptTiming(sent_s=max(0.0, self.sent - origin), first_byte_s=rel(self.first_byte),
                             first_token_s=rel(self.first_token), first_speech_s=rel(self.first_speech),
                             finished_s=max(0.0, finished - origin), fault=fault)


_clock: ContextVar[AttemptClock | None] = ContextVar("callbench_attempt_clock", default=None)


def start_attempt() -> tuple[AttemptClock, object]:
    """A clock for a new attempt, set as the current one; returns it and the token that
    :func:`end_attempt` takes."""
    clock = AttemptClock(sent=time.perf_counter())
    return clock, _clock.set(clock)


def end_attempt(token: object) -> None:
    """Unset the clock :func:`start_attempt` set."""
    _clock.reset(token)  # type: ignore[arg-type]


def mark_first_byte() -> None:
    """Note the first byte of the response body of the current attempt (first call wins)."""
    clock = _clock.get()
    if clock is not None and clock.first_byte is None:
        clock.first_byte = time.perf_counter()


def mark_first_token(*, speech: bool) -> None:
    """Note a content token of a streamed answer (first call wins); ``speech``: the token is text
    the caller would hear (not a tool call)."""
    clock = _clock.get()
    if clock is None:
        return
    now = time.perf_counter()
    clock.streamed = True
    if clock.first_token is None:
        clock.first_token = now
    if speech and clock.first_speech is None:
        clock.first_speech = now


def mark_streamed() -> None:
    """Note that the current attempt's answer arrives as a stream (even before any token)."""
    clock = _clock.get()
    if clock is not None:
        clock.streamed = True
