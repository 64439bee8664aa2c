"""Digit-script-insensitive and grouping-insensitive span/anchor matching in the channel."""

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callbench.bundle.models import ChannelProgram
from callbench.sim.channel import Channel
from callbench.sim.text import digit_script, digits_like, find_span, find_span_match, fold_digits

# (script name, the digits 0-9 in that script, a sentence frame in that language)
SCRIPTS = [
    ("Devanagari", "०१२३४५६७८९", "माझा नंबर {} आहे आणि नाव सुमन"),
    ("Tamil", "௦௧௨௩௪௫௬௭௮௯", "என் எண் {} மற்றும் பெயர் மீனா"),
    ("Gujarati", "૦૧૨૩૪૫૬૭૮૯", "મારો નંબર {} છે અને નામ મીના"),
    ("Bengali", "০১২৩৪৫৬৭৮৯", "আমার নম্বর {} আর নাম মীনা"),
]


def native(ascii_digits: str, zero_to_nine: str) -> str:
    return "".join(zero_to_nine[int(c)] if c.isdigit() else c for c in ascii_digits)


def render(
    text: str, **program: list[dict[str, object]]
) -> tuple[list[str], list[str], list[bool], list[str]]:
    """Render ``text`` as caller turn 1 under ``program`` (each event aimed at turn 1); return the
    fragments and the events' details, applied flags and spans."""
    aimed = {k: [{"turn": 1, **ev} for ev in v] for k, v in program.items()}
    r = Channel(ChannelProgram.model_validate(aimed), 0, {}).render(text, 1, [])
    return (
        r.fragments,
        [e.detail for e in r.events],
        [e.applied for e in r.events],
        [e.span for e in r.events],
    )


@pytest.mark.parametrize(("script", "digits", "frame"), SCRIPTS)
def test_ascii_span_drops_native_digits(script: str, digits: str, frame: str) -> None:
    num = native("2514", digits)
    frags, details, applied, spans = render(frame.format(num), asr_events=[{"kind": "drop", "span": "2514"}])
    assert frags == [frame.format("").replace("  ", " ")]
    assert applied == [True] and spans == [num]
    assert details == [
        f"dropped {num!r} (digit normalisation: {script} digits in the turn read as the span's ASCII digits)"
    ]


@pytest.mark.parametrize(("script", "digits", "frame"), SCRIPTS)
def test_ascii_span_doubles_the_callers_own_grouped_digits(script: str, digits: str, frame: str) -> None:
    num = native("25 14", digits)
    frags, details, applied, spans = render(
        frame.format(num), asr_events=[{"kind": "double", "span": "2514"}]
    )
    assert frags == [frame.format(f"{num} {num}")]
    assert applied == [True] and spans == [num]
    assert script in details[0] and "digit grouping differs from the span" in details[0]


@pytest.mark.parametrize(("script", "digits", "frame"), SCRIPTS)
def test_substitute_writes_the_replacement_in_the_callers_digits(
    script: str, digits: str, frame: str
) -> None:
    num = native("2514", digits)
    ch = Channel(
        ChannelProgram.model_validate(
            {"asr_events": [{"turn": 1, "kind": "substitute", "span": "2514", "replacement": "2541"}]}
        ),
        0,
        {},
    )
    r = ch.render(frame.format(num), 1, [])
    assert r.fragments == [frame.format(native("2541", digits))]
    (ev,) = r.events
    assert ev.applied and ev.span == num and ev.replacement == native("2541", digits)
    assert f"{script} digits" in ev.detail


@pytest.mark.parametrize(("script", "digits", "frame"), SCRIPTS)
def test_vad_cuts_after_the_callers_digits(script: str, digits: str, frame: str) -> None:
    num = native("83-291", digits)
    text = frame.format(num)
    frags, details, applied, _ = render(text, vad_splits=[{"after": ["83291"]}])
    head = text[: text.index(num) + len(num)]
    assert frags == [head, text[len(head) :].strip()]
    assert applied == [True]
    assert f"anchor '83291' matched {num!r}" in details[0] and script in details[0]


def test_native_span_and_anchors_match_ascii_text() -> None:
    frags, details, applied, spans = render(
        "my number is 2514 okay", asr_events=[{"kind": "drop", "span": "௨௫௧௪"}]
    )
    assert frags == ["my number is okay"] and spans == ["2514"]
    assert "ASCII digits in the turn read as the span's Tamil digits" in details[0]
    frags, _, applied, _ = render("আমার PNR 842 561 7390", vad_splits=[{"after": ["৮৪২", "৫৬১"]}])
    assert frags == ["আমার PNR 842", "561", "7390"] and applied == [True]


def test_exact_ascii_match_has_no_normalisation_note() -> None:
    _, details, _, _ = render("number 2514 okay", asr_events=[{"kind": "drop", "span": "2514"}])
    assert details == ["dropped '2514'"]
    _, details, _, _ = render("नंबर २५१४ ठीक", asr_events=[{"kind": "drop", "span": "२५१४"}])
    assert details == ["dropped '२५१४'"]
    _, details, _, _ = render("number 2514 okay here", vad_splits=[{"after": ["2514"]}])
    assert details == ["split into 2 fragments: 'number 2514' / 'okay here'"]


@pytest.mark.parametrize(
    "written",
    [
        "2514",
        "25 14",
        "25-14",
        "25 - 14",
        "25\u00a014",
        "25\u202f14",
        "25\u201314",
        "25.14",
        "2,514",
        "2 5 1 4",
    ],
)
def test_groupings_that_match(written: str) -> None:
    text = f"id {written} ok"
    assert find_span(text, "2514") == (3, 3 + len(written))
    assert find_span(text, "25 14") == (3, 3 + len(written))  # the span's own grouping is ignored too
    assert find_span(text, "२५-१४") == (3, 3 + len(written))


@pytest.mark.parametrize(
    "written", ["25 and 14", "25, 14", "25. 14", "25  14", "25\n14", "25:14", "25 -- 14", "25/14", "25 १ 14"]
)
def test_no_match_across_a_non_digit_boundary(written: str) -> None:
    assert find_span(f"id {written} ok", "2514") is None
    assert find_span(f"id {written} ok", "2514", whole_words=False) is None


def test_anchor_does_not_join_numbers_separated_by_words() -> None:
    frags, details, applied, _ = render("सदस्य २५ आणि १४ आहेत", vad_splits=[{"after": ["2514"]}])
    assert frags == ["सदस्य २५ आणि १४ आहेत"] and applied == [False]
    assert "no anchor found" in details[0]


def test_identifier_grouped_as_spoken_in_native_digits() -> None:
    frags, details, _, _ = render("कार्ड NB २७ ७३ आहे", vad_splits=[{"after": ["NB2773"]}])
    assert frags == ["कार्ड NB २७ ७३", "आहे"]
    assert "Devanagari" in details[0] and "grouping" in details[0]


def test_whole_word_preference_skips_a_piece_of_a_longer_grouped_number() -> None:
    text = "call 98 25 14 77 or 25 14"
    assert find_span(text, "2514") == (20, 25)
    assert find_span(text, "2514", whole_words=False) == (8, 13)
    # the only match inside a longer run is still returned (first plain match)
    assert find_span("id NB 27 73 01 48", "2773") == (6, 11)


def test_case_and_nfc_behaviour_is_kept_with_digits() -> None:
    hit = find_span_match("Card nb-२७७३ CAF\u00c9", "NB2773 cafe\u0301")
    assert hit is not None and (hit.start, hit.end) == (5, 17)
    assert hit.scripts == ("Devanagari",) and hit.span_scripts == ("ASCII",) and hit.regrouped


def test_fold_and_script_helpers() -> None:
    text = "२५ ௧௪ ২৫ ૧૪ ２ 𝟗 ²"
    folded = fold_digits(text)
    assert folded == "25 14 25 14 2 9 ²" and len(folded) == len(text)  # superscript is not Nd
    assert [digit_script(c) for c in "२௧২૧2２"] == [
        "Devanagari",
        "Tamil",
        "Bengali",
        "Gujarati",
        "ASCII",
        "Fullwidth",
    ]
    assert digits_like("no. 2541", "२५१४") == "no. २५४१"
    assert digits_like("2541", "2514") == "2541"
    assert digits_like("2541", "२5१4") == "2541"  # mixed scripts: left as authored
    assert digits_like("2541", "none") == "2541"


DIGIT_BLOCKS = [d for _, d, _ in SCRIPTS] + ["0123456789"]
SEPARATORS = ["", " ", "-", " - ", "\u00a0", ".", ","]


@settings(max_examples=200, deadline=None)
@given(
    number=st.text(alphabet="0123456789", min_size=1, max_size=10),
    block=st.sampled_from(DIGIT_BLOCKS),
    seps=st.lists(st.sampled_from(SEPARATORS), min_size=9, max_size=9),
    kind=st.sampled_from(["drop", "double"]),
)
def test_any_script_any_grouping_is_found_and_edited_on_the_original(
    number: str, block: str, seps: list[str], kind: str
) -> None:
    written = native(number[0], block) + "".join(
        sep + native(d, block) for sep, d in zip(seps, number[1:], strict=False)
    )
    text = f"जी {written} धन्यवाद"
    hit = find_span_match(text, number)
    assert hit is not None and text[hit.start : hit.end] == written
    assert hit.regrouped == any(seps[: len(number) - 1])
    assert bool(hit.scripts) == (block != "0123456789")
    frags, _, applied, spans = render(text, asr_events=[{"kind": kind, "span": number}])
    assert applied == [True] and spans == [written]
    assert frags == (["जी धन्यवाद"] if kind == "drop" else [f"जी {written} {written} धन्यवाद"])
    assert all(unicodedata.is_normalized("NFC", f) for f in frags)
