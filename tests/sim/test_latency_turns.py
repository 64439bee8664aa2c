"""The caller's view of a candidate turn, rebuilt from request timings (sim/latency.py), and
spoken time (sim/speech_rate.py)."""

from __future__ import annotations

import pytest

from callbench.sim.latency import turn_latency
from callbench.sim.speech_rate import count_aksharas, spoken_seconds
from callbench.trace import RequestLatency, Trace


def _req(
    waited: float,
    *,
    speech: bool,
    calls: int = 0,
    first_speech: float | None = None,
    gap: float = 0.0,
    streamed: bool = False,
) -> RequestLatency:
    return RequestLatency(
        role="candidate",
        turn=1,
        start_s=0.0,
        gap_s=gap,
        first_token_s=waited,
        first_speech_s=first_speech if first_speech is not None else (waited if speech else None),
        waited_s=waited,
        streamed=streamed,
        speech=speech,
        tool_calls=calls,
    )


def test_tool_round_trips_count_toward_the_first_word() -> None:
    turn = turn_latency(
        1,
        [
            (_req(0.4, speech=False, calls=1), None),
            (_req(0.3, speech=False, calls=2, gap=0.05), None),
            (_req(0.5, speech=True, gap=0.05, first_speech=0.2, streamed=True), "Done."),
        ],
    )
    assert turn.time_to_first_word_s == pytest.approx(0.4 + 0.05 + 0.3 + 0.05 + 0.2)
    assert turn.completion_s == pytest.approx(0.4 + 0.05 + 0.3 + 0.05 + 0.5)
    assert turn.tool_round_trips_before_speech == 2 and turn.dead_air_s == 0.0
    assert not turn.streamed  # two of its requests were not


def test_dead_air_is_silence_after_speech_has_played() -> None:
    filler = "One moment please."  # 3 words: 1.2 s at 2.5 words/s
    turn = turn_latency(
        1,
        [
            (_req(0.5, speech=True, calls=1), filler),
            (_req(2.0, speech=True, gap=0.1), "Your booking is confirmed."),
        ],
    )
    assert turn.time_to_first_word_s == pytest.approx(0.5)
    # filler plays 0.5 .. 1.7; the answer is ready at 0.5 + 0.1 + 2.0 = 2.6: 0.9 s of silence
    assert turn.dead_air_s == pytest.approx(0.9)
    assert turn.spoken_s == pytest.approx(1.2 + 4 / 2.5) and turn.words == 7


def test_a_turn_without_speech_has_no_first_word() -> None:
    turn = turn_latency(1, [(_req(0.7, speech=False, calls=1), None)])
    assert turn.time_to_first_word_s is None and turn.completion_s == pytest.approx(0.7)


def test_spoken_time_by_script() -> None:
    assert count_aksharas("नमस्ते") == 3 and count_aksharas("வணக்கம்") == 3
    assert spoken_seconds("नमस्ते") == pytest.approx(3 / 5.0)
    assert spoken_seconds("Call 42 now") == pytest.approx(4 / 2.5)  # digits read one by one
    assert spoken_seconds(None) == 0.0


def test_old_traces_without_timings_load_and_keep_their_bytes(run, dairy) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    trace = asyncio.run(run(scenario=dairy[1], seed=3))
    assert trace.latency is not None and trace.latency.turns
    assert trace.latency.turns[0].turn == 0 and trace.latency.requests[0].role == "candidate"
    old = trace.model_copy(update={"latency": None})
    text = old.canonical_json()
    assert '"latency"' not in text  # a trace saved before timings has no such key
    loaded = Trace.model_validate_json(text)
    assert loaded.latency is None and loaded.canonical_json() == text
    assert loaded.sha256() == trace.sha256()  # the content hash ignores the timings
