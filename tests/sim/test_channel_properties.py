"""Property tests of the channel: any text, any anchors, any seed."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from callbench.bundle.models import ChannelProgram
from callbench.sim.channel import Channel
from callbench.sim.noise import eligible_words
from callbench.sim.text import words

TEXT = st.text(alphabet=st.sampled_from(list("abcdefgh ABC 0123 ,.-નમસ્તેकिसान")), min_size=0, max_size=60)
FACTS = {"name": "Meena Patel", "id": "F-2231"}


def _squash(s: str) -> str:
    return re.sub(r"\s+", "", s)


@settings(max_examples=200, deadline=None)
@given(text=TEXT, a1=st.text(min_size=1, max_size=4), a2=st.text(min_size=1, max_size=4))
def test_vad_keeps_every_character_in_at_most_three_fragments(text: str, a1: str, a2: str) -> None:
    ch = Channel(ChannelProgram.model_validate({"vad_splits": [{"turn": 1, "after": [a1, a2]}]}), 0, {})
    r = ch.render(text, 1, [])
    assert 1 <= len(r.fragments) <= 3
    assert _squash("".join(r.fragments)) == _squash(text.strip()) or r.fragments == [text]
    assert r.events[0].applied == (len(r.fragments) > 1)


@settings(max_examples=200, deadline=None)
@given(text=TEXT, seed=st.integers(min_value=0, max_value=2**63 - 1))
def test_seeded_noise_changes_at_most_one_eligible_word(text: str, seed: int) -> None:
    ch = Channel(ChannelProgram(seeded_noise=True), seed, FACTS)
    r = ch.render(text, 1, [])
    (ev,) = r.events
    eligible = [w for _, _, w in eligible_words(text, FACTS)]
    assert ev.applied == bool(eligible)
    if ev.applied:
        assert ev.span in eligible and ev.replacement != ev.span
        before, after = [w for *_, w in words(text)], [w for *_, w in words(r.fragments[0])]
        diffs = [(a, b) for a, b in zip(before, after, strict=False) if a != b]
        assert len(diffs) <= 1
    else:
        assert r.fragments == [text]
    assert Channel(ChannelProgram(seeded_noise=True), seed, FACTS).render(text, 1, []) == r
