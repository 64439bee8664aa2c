import random
import unicodedata

from callbench.bundle.models import AsrEvent, ChannelProgram, VadSplit
from callbench.sim.channel import Channel
from callbench.sim.noise import eligible_words, seeded_slip, slip_word
from callbench.sim.text import find_span, letter_count

FACTS = {"name": "Meena Patel", "farmer_id": "F-2231"}


def _channel(seed: int = 1, **program: object) -> Channel:
    return Channel(ChannelProgram.model_validate(program), seed, FACTS)


def test_drop_by_turn() -> None:
    ch = _channel(asr_events=[{"turn": 2, "kind": "drop", "span": "this evening"}])
    r1 = ch.render("No milk will come this evening.", 1, [])
    assert r1.fragments == ["No milk will come this evening."] and r1.events == []
    r2 = ch.render("No milk will come this evening.", 2, [])
    assert r2.fragments == ["No milk will come."]
    (ev,) = r2.events
    assert (ev.kind, ev.source, ev.turn, ev.applied, ev.span) == ("drop", "authored", 2, True, "this evening")


def test_double_by_step_is_case_insensitive() -> None:
    ch = _channel(asr_events=[{"step": "s2", "kind": "double", "span": "NO MILK"}])
    assert ch.render("No milk today.", 1, ["s1"]).events == []
    r = ch.render("No milk today.", 2, ["s2"])
    assert r.fragments == ["No milk No milk today."]
    assert r.events[0].applied and r.events[0].span == "No milk" and "doubled" in r.events[0].detail


def test_substitute_prefers_whole_words_and_uses_nfc() -> None:
    ch = _channel(
        asr_events=[{"turn": 1, "kind": "substitute", "span": "cafe\u0301", "replacement": "coffee"}]
    )
    r = ch.render("The caf\u00e9s near the caf\u00e9 are shut.", 1, [])
    assert r.fragments == ["The caf\u00e9s near the coffee are shut."]


def test_unmatched_span_is_recorded_not_applied() -> None:
    ch = _channel(asr_events=[{"turn": 1, "kind": "drop", "span": "mastitis"}])
    r = ch.render("No milk today.", 1, [])
    assert r.fragments == ["No milk today."]
    assert not r.events[0].applied and "not found" in r.events[0].detail


def test_unreached_events_are_reported() -> None:
    ch = _channel(
        asr_events=[{"step": "s9", "kind": "drop", "span": "x"}], vad_splits=[{"turn": 5, "after": ["a"]}]
    )
    ch.render("Hello there.", 1, ["s1"])
    un = ch.unreached()
    assert [(e.kind, e.applied) for e in un] == [("drop", False), ("vad_split", False)]
    assert "step 's9'" in un[0].detail and "turn 5" in un[1].detail and un[1].turn == 5


def test_vad_split_into_three_fragments() -> None:
    ch = _channel(vad_splits=[{"turn": 1, "after": ["is 4471", "and"]}])
    r = ch.render("My account is 447192 and my name is Meena.", 1, [])
    assert r.fragments == ["My account is 4471", "92 and", "my name is Meena."]
    assert r.events[0].kind == "vad_split" and r.events[0].applied


def test_vad_split_partial_and_missing_anchor() -> None:
    ch = _channel(vad_splits=[{"turn": 1, "after": ["account", "zebra"]}, {"turn": 2, "after": ["nothing"]}])
    r = ch.render("My account is 447192.", 1, [])
    assert r.fragments == ["My account", "is 447192."]
    assert r.events[0].applied and "not found: 'zebra'" in r.events[0].detail
    r2 = ch.render("Hello.", 2, [])
    assert r2.fragments == ["Hello."] and not r2.events[0].applied


def test_second_vad_event_on_a_split_turn_is_not_applied() -> None:
    ch = _channel(vad_splits=[{"turn": 1, "after": ["one"]}, {"turn": 1, "after": ["two"]}])
    r = ch.render("one two three", 1, [])
    assert r.fragments == ["one", "two three"]
    assert [e.applied for e in r.events] == [True, False]


def test_asr_then_vad_in_order() -> None:
    ch = _channel(
        asr_events=[{"turn": 1, "kind": "substitute", "span": "four", "replacement": "for"}],
        vad_splits=[{"turn": 1, "after": ["for"]}],
    )
    r = ch.render("I have four cows at home.", 1, [])
    assert r.fragments == ["I have for", "cows at home."]
    assert [e.kind for e in r.events] == ["substitute", "vad_split"]


def test_seeded_noise_changes_one_eligible_word_of_the_first_turn_only() -> None:
    text = "Hello this is Meena Patel speaking from Anand village"
    ch = _channel(seed=3, seeded_noise=True)
    r = ch.render(text, 1, [])
    (ev,) = r.events
    assert ev.kind == "seeded_substitute" and ev.source == "seeded" and ev.applied
    before, after = text.split(), r.fragments[0].split()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert changed == [(ev.span, ev.replacement)]
    assert letter_count(ev.span) >= 4 and ev.span not in {"Meena", "Patel", "is"}
    assert ch.render(text, 2, []).fragments == [text]


def test_seeded_noise_is_deterministic_and_depends_on_the_seed() -> None:
    text = "Hello this is Meena Patel speaking from Anand village about evening milk"
    outs = {
        seed: _channel(seed=seed, seeded_noise=True).render(text, 1, []).fragments[0] for seed in range(12)
    }
    assert outs[5] == _channel(seed=5, seeded_noise=True).render(text, 1, []).fragments[0]
    assert len(set(outs.values())) > 3


def test_seeded_noise_never_touches_known_fact_values() -> None:
    words = eligible_words("Meena Patel here, farmer F-2231, calling about milk", FACTS)
    assert [w for _, _, w in words] == ["here", "farmer", "calling", "about", "milk"]
    chosen = set()
    for seed in range(40):
        slip = seeded_slip("Meena Patel here, farmer F-2231, calling about milk", FACTS, seed)
        assert slip is not None and slip.word in {"here", "farmer", "calling", "about", "milk"}
        chosen.add(slip.word)
    assert len(chosen) >= 4  # the seed really chooses among the eligible words


def test_seeded_noise_without_an_eligible_word_is_not_applied() -> None:
    r = _channel(seeded_noise=True).render("Yes, I am Meena Patel.", 1, [])
    assert r.fragments == ["Yes, I am Meena Patel."]
    assert not r.events[0].applied and "no eligible word" in r.events[0].detail


def test_slip_in_indic_scripts_swaps_a_confusable_sound() -> None:
    for word in ["દૂધ", "નમસ્તે", "பால்காரர்", "দুধওয়ালা", "किसान"]:
        new, how = slip_word(word, random.Random(0))
        assert new != word and unicodedata.is_normalized("NFC", new)
        assert len(new) == len(word) and "heard as" in how
    assert letter_count("नमस्ते") == 4


def test_slip_falls_back_to_clipping_the_ending() -> None:
    new, how = slip_word("سلامت", random.Random(0))
    assert new == "سلام" and "clipped" in how


def test_find_span_prefers_whole_words() -> None:
    text = "cowshed and cow"
    assert find_span(text, "cow") == (12, 15)
    assert find_span(text, "cow", whole_words=False) == (0, 3)
    assert find_span("a   b", "A B") == (0, 5)
    assert find_span("abc", "x") is None
    assert find_span("id NB 27 73 01 48", "2773") == (6, 11)  # digits grouped as spoken
    assert find_span("id NB 27 73", "27 73") == (6, 11)


def test_vad_anchor_inside_a_number_grouped_as_spoken() -> None:
    ch = _channel(vad_splits=[{"turn": 1, "after": ["NB2773"]}])
    r = ch.render("It is NB 27 73 01 48.", 1, [])
    assert r.fragments == ["It is NB 27 73", "01 48."]


def test_program_model_types_are_used() -> None:
    prog = ChannelProgram(
        asr_events=[AsrEvent(turn=1, kind="drop", span="a")], vad_splits=[VadSplit(turn=1, after=["b"])]
    )
    r = Channel(prog, 0, {}).render("a b c", 1, [])
    assert r.fragments == ["b", "c"]


def test_authored_events_name_their_program_field() -> None:
    ch = _channel(
        asr_events=[{"turn": 2, "kind": "drop", "span": "x"}, {"turn": 1, "kind": "drop", "span": "milk"},
                    {"step": "s9", "kind": "double", "span": "y"}],
        vad_splits=[{"turn": 1, "after": ["no"]}, {"turn": 1, "after": ["today"]},
                    {"turn": 7, "after": ["a"]}],
        seeded_noise=True,
    )
    r = ch.render("no milk today please", 1, [])
    assert [(e.kind, e.program_path) for e in r.events] == [
        ("drop", "channel.asr_events.1"), ("seeded_substitute", None),
        ("vad_split", "channel.vad_splits.0"), ("vad_split", "channel.vad_splits.1"),
    ]
    r2 = ch.render("x marks", 2, [])
    assert [(e.program_path, e.applied) for e in r2.events] == [("channel.asr_events.0", True)]
    assert [e.program_path for e in ch.unreached()] == ["channel.asr_events.2", "channel.vad_splits.2"]
