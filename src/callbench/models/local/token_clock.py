"""Timing the embedded model's answer token by token, without changing it.

The remote adapters time a streamed answer's first token as its chunk arrives
(``models/timing.py``). The embedded model runs in this process, so its tokens can be watched as
llama.cpp samples them instead: :class:`TokenClock` is passed to ``Llama.create_completion`` as a
stopping criterion that never stops. llama-cpp-python calls it right after sampling each token,
before the token is handed on, with the ids so far (the prompt and every earlier answer token), so
the time of each call is the time that token came out, and the token itself is known at the next
call (the last one at the call for the end-of-generation token).

Why not ``create_completion(stream=True)``: its chunks are not the non-streamed answer in every
case (the tokens left at the end are decoded one by one with undecodable bytes dropped, so a
character split over two final tokens is lost, and no usage is reported), and the answer must not
depend on whether it was timed. With the clock the call is the non-streamed one: same text, same
usage, same finish reason, byte for byte; only the times are added.

Speech: the candidate's answer is the JSON object ``{"speech": ..., "tool_calls": [...]}``
(``local/format.py``, speech first in the grammar); its first token of speech is the one that puts
the first non-blank character into the ``speech`` string (:func:`speech_started`). JSON-only roles
(caller, judges) have no speech.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from callbench.models.timing import AttemptTiming, ResponseTiming

_SPEECH = re.compile(r'^\s*\{\s*"speech"\s*:\s*"(?:\s|\\[nrt])*(?:[^\s"\\]|\\[^nrt])')


def speech_started(text: str) -> bool:
    """Whether the candidate answer's JSON text so far (``{"speech": "...``) has a non-blank
    character of speech: blanks and the escapes ``\\n``, ``\\r``, ``\\t`` do not count, any other
    escape (``\\u0915``, ``\\"``) does. False for ``{"speech": null`` and for text not yet that
    far."""
    return _SPEECH.match(text) is not None


class TokenClock:
    """A never-stopping stopping criterion that notes when the answer's tokens are sampled.

    ``prompt_len``: the number of prompt tokens (the ids the first call gets); ``detokenize``:
    ``ids -> bytes`` (``Llama.detokenize``); ``speech``: whether to look for speech (the
    candidate's answer format) or only the first token. ``clock``: seconds, monotonic
    (default ``time.perf_counter``). Times are absolute clock readings; :meth:`timing` makes them relative.
    """

    def __init__(self, prompt_len: int, detokenize: Callable[[list[int]], bytes], *, speech: bool,
                 clock: Callable[[], float] | None = None) -> None:
        self.prompt_len = prompt_len
        self.detokenize = detokenize
        self.speech = speech
        self.clock = clock or time.perf_counter  # looked up now: a test may have replaced it
        self.sampled: list[float] = []  # when each answer token was sampled, in order
        self.first_speech: float | None = None
        self._seen = prompt_len
        self._text = b""

    def __call__(self, input_ids: Sequence[int], logits: Any = None) -> bool:
        now = self.clock()
        new = [int(t) for t in input_ids[self._seen:]]
        if new and self.speech and self.first_speech is None:
            for k, token in enumerate(new):
                self._text += self.detokenize([token])
                if speech_started(self._text.decode("utf-8", "ignore")):
                    # token number (seen - prompt_len + k) was sampled at that call
                    index = self._seen - self.prompt_len + k
                    self.first_speech = self.sampled[index] if index < len(self.sampled) else now
                    break
        self._seen += len(new)
        self.sampled.append(now)
        return False

    def timing(self, origin: float, finished: float) -> ResponseTiming:
        """One streamed attempt from ``origin`` (the request's start) to ``finished``: the first
        token when one was sampled, the first speech when :meth:`__call__` saw it."""
        def rel(t: float | None) -> float | None:
            return None if t is None else max(0.0, t - origin)

        first = self.sampled[0] if self.sampled else None
        attempt = AttemptTiming(sent_s=0.0, first_token_s=rel(first), first_speech_s=rel(self.first_speech),
                                finished_s=max(0.0, finished - origin))
        return ResponseTiming(attempts=[attempt], streamed=True)


def whole_answer_timing(origin: float, finished: float) -> ResponseTiming:
    """An answer that was not timed token by token: its first token is the whole answer."""
    return ResponseTiming(attempts=[AttemptTiming(sent_s=0.0, finished_s=max(0.0, finished - origin))])
