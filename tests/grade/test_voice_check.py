"""The voice channel's conversation check: asking back or reading back after a garbled entity."""

from __future__ import annotations

from collections.abc import Sequence

from callbench.bundle.models import Diagnostic, Pillar
from callbench.grade.models import Label
from callbench.grade.scoring import item_value
from callbench.grade.voice_check import CHECK_ID, grade_voice_confirmation, handled
from callbench.trace import (
    CallerTurn,
    CallerView,
    CandidateView,
    EndReason,
    Entity,
    EpisodeSeeds,
    RoleInfo,
    Trace,
    TraceMessage,
    VoiceEvent,
)


def _voice(turn: int, said: str, heard: str, entities: list[Entity]) -> VoiceEvent:
    return VoiceEvent(turn=turn, intended=said, spoken=said, observed=heard, tts={}, asr={}, line={},
                      audio_sha256="0" * 64, audio_seconds=1.0, entities=entities)


def _trace(turns: Sequence[tuple[str, str, list[Entity] | None, str]]) -> Trace:
    """``(said, heard, entities or None for the text channel, candidate reply)`` per caller turn."""
    messages = [TraceMessage(index=0, role="assistant", content="Hello, gas helpline.", candidate_turn=0)]
    caller_turns = []
    for n, (said, heard, ents, reply) in enumerate(turns, start=1):
        at = len(messages)
        messages.append(TraceMessage(index=at, role="user", content=heard, caller_turn=n, fragment=0))
        voice = None if ents is None else _voice(n, said, heard, ents)
        caller_turns.append(
            CallerTurn(index=n, intended=said, observed=[heard], message_indices=[at], voice=voice))
        messages.append(TraceMessage(index=at + 1, role="assistant", content=reply, candidate_turn=n))
    return Trace(
        episode_id="e1", bundle_name="b", bundle_version="1", bundle_hash="b" * 64, agent_id="ag",
        scenario_id="sc", language="en-IN", difficulty="medium", repeat=0,
        seeds=EpisodeSeeds(run=1, episode=2, channel=3, backend=4, caller=5, candidate=6),
        candidate=RoleInfo(spec="scripted:x"), caller=RoleInfo(spec="scripted:plan"),
        candidate_view=CandidateView(instructions_sha256="0" * 64, tools=[]),
        caller_view=CallerView(system_prompt="caller"), messages=messages, caller_turns=caller_turns,
        end_reason=EndReason.CALLER_DONE,
    )


GARBLED = [Entity(kind="digits", text="4 8 2 1 5", survived=False)]
INTACT = [Entity(kind="digits", text="4 8 2 1 5", survived=True)]


def test_the_read_back_and_the_question_count_going_on_does_not() -> None:
    assert handled("So that is 48215, right", [("digits", "4 8 2 1 5")])
    assert handled("Could you repeat the number?", [("digits", "4 8 2 1 5")])
    assert handled("Thank you, Meena PATEL.", [("name", "Meena Patel")])
    assert not handled("Booked your cylinder.", [("digits", "4 8 2 1 5")])
    assert not handled("Your number 48 is booked.", [("digits", "4 8 2 1 5")])


def test_met_partial_and_not_met_follow_the_garbled_turns() -> None:
    said = "My consumer number is 4 8 2 1 5"
    asks = (said, "My consumer number is 4 8 2 1", GARBLED, "Sorry, could you say the number again?")
    goes_on = (said, "My consumer number is 4 8 2 1", GARBLED, "Booked for consumer 4821.")
    fine = ("Book a cylinder", "Book a cylinder", INTACT, "Done.")  # nothing garbled: not counted
    cases = (([asks, fine], Label.MET), ([asks, goes_on], Label.PARTIAL), ([goes_on], Label.NOT_MET))
    for turns, label in cases:
        [item] = grade_voice_confirmation(_trace(turns))
        assert (item.id, item.label, item.pillar, item.diagnostic) == (
            CHECK_ID, label, Pillar.CONVERSATION, Diagnostic.CHANNEL_AND_CLOSING)
        assert item.source == "action_check" and item.weight == 1
        assert item_value(item) == {Label.MET: 1.0, Label.PARTIAL: 0.5, Label.NOT_MET: 0.0}[label]
    [item] = grade_voice_confirmation(_trace([asks, goes_on]))
    assert item.cited_messages == [2, 4] and "1 of 2" in item.reason and "4 8 2 1 5" in item.reason


def test_not_applicable_without_a_garbled_entity_and_absent_on_the_text_channel() -> None:
    [item] = grade_voice_confirmation(_trace([("Book a cylinder", "Book a cylinder", INTACT, "Done.")]))
    assert item.label == Label.NOT_APPLICABLE and item_value(item) is None
    assert grade_voice_confirmation(_trace([("Book a cylinder", "Book a cylinder", None, "Done.")])) == []
