"""Word alignment, WER and entity survival of the voice channel."""

from callbench.sim.voice.score import align, entities, speakable, wer, words


def test_words_read_digits_however_grouped() -> None:
    assert words("My number is 4821.") == ["my", "number", "is", "4", "8", "2", "1"]
    assert words("4-8-2-1") == words("four eight two one") == ["4", "8", "2", "1"]
    assert words("$1,250.00") == ["1", "2", "5", "0", "0", "0"]


def test_alignment_and_wer() -> None:
    ops = align(words("cancel my subscription now"), words("cancel myself's encryption now please"))
    assert [o.op for o in ops] == ["ok", "sub", "sub", "ok", "ins"]
    assert wer(ops) == 3 / 4
    assert wer(align([], ["hello"])) is None
    assert wer(align(words("a b c"), words("a c"))) == 1 / 3


def test_entity_survival() -> None:
    said = "My account is 4 8 2 1 5, the amount was $12.50 and my name is Priya Sharma."
    heard = "My account is 48216, the amount was $12.50 and my name is Priya Sharma."
    got = {(e.kind, e.text): e.survived for e in entities(said, heard, {"name": "Priya Sharma"})}
    assert got == {("digits", "4 8 2 1 5"): False, ("amount", "$12.50"): True, ("name", "Priya Sharma"): True}
    heard2 = "my account is 4 8 2 1 5 the amount was 12 dollars and my name is pria sharma"
    got2 = {(e.kind, e.text): e.survived for e in entities(said, heard2, {"name": "Priya Sharma"})}
    assert got2 == {
        ("digits", "4 8 2 1 5"): True,
        ("amount", "$12.50"): False,
        ("name", "Priya Sharma"): False,
    }


def test_speakable_spaces_long_digit_runs_only() -> None:
    assert (
        speakable("Card 4111222233334444, PIN 12, pay $1500.")
        == "Card 4 1 1 1 2 2 2 2 3 3 3 3 4 4 4 4, PIN 12, pay $1500."
    )
