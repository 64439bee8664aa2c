"""NFC in pieces (callbench.bundle.normalize.nfc / is_nfc): exactly unicodedata's
answer, however the text is cut."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from callbench.bundle.loader import canonical
from callbench.bundle.normalize import is_nfc, nfc, nfc_joined

_ALPHABET = ("ab e\n\u0301\u0327\u00e9\u0928\u093c\u0929\u0bc6\u0bbe\u0b92\u0bd7"
             "\u1100\u1161\u11a8\uac00\u212b\u0344")
"""ASCII, combining marks that compose with ASCII letters, Devanagari and Tamil letters with the
signs that compose with them, Hangul jamo, and characters NFC never keeps (U+212B, U+0344)."""


@settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet=_ALPHABET, max_size=60), piece=st.integers(1, 8))
def test_nfc_in_pieces_is_unicodedatas(text: str, piece: int) -> None:
    """Cut before ASCII characters into pieces of any size: the same answer as unicodedata over
    the whole text; an NFC text comes back as itself."""
    assert nfc(text, piece) == unicodedata.normalize("NFC", text)
    assert is_nfc(text, piece) is unicodedata.is_normalized("NFC", text)
    composed = unicodedata.normalize("NFC", text)
    assert is_nfc(composed, piece) and nfc(composed, piece) is composed


@settings(max_examples=500, deadline=None)
@given(chunks=st.lists(st.text(alphabet=_ALPHABET, max_size=8), max_size=8))
def test_nfc_of_chunks_is_the_nfc_of_their_text(chunks: list[str]) -> None:
    """A rendered template's chunks normalised one by one (cached) give the NFC of the whole text,
    also when a chunk starts with a mark that composes with the end of the chunk before it."""
    assert nfc_joined(chunks) == unicodedata.normalize("NFC", "".join(chunks))


def test_long_text_with_a_mark_after_a_piece_boundary() -> None:
    """A combining mark far into a long text, right after an ASCII letter: found and composed."""
    text = "\u0928\u093c " * 2000 + "e\u0301" + " \u0bc6\u0bbe" * 700
    assert not is_nfc(text) and nfc(text) == unicodedata.normalize("NFC", text)
    assert "\u00e9" in nfc(text) and "\u0bca" in nfc(text)


def test_canonical_hash_text_is_nfc_either_way() -> None:
    """canonical() gives the same text for data written composed or decomposed."""
    decomposed = {"name": "Jose\u0301 " + "\u0928\u093c" * 3000, "k\u0301": ["e\u0301"] * 50}
    composed = {unicodedata.normalize("NFC", k): v for k, v in {
        "name": unicodedata.normalize("NFC", decomposed["name"]), "k\u0301": ["\u00e9"] * 50}.items()}
    assert canonical(decomposed) == canonical(composed)
    assert "Jos\u00e9" in canonical(decomposed)


@settings(max_examples=400, deadline=None)
@given(a=st.text(alphabet="ab\u0301", max_size=30), b=st.text(alphabet="ab\u0301", max_size=30))
def test_common_prefix_len_is_commonprefix(a: str, b: str) -> None:
    """The binary search gives what os.path.commonprefix gives, for any two texts."""
    import os

    from callbench.bundle.render import common_prefix_len

    assert common_prefix_len(a, b) == len(os.path.commonprefix([a, b]))  # noqa: RUF071
    assert common_prefix_len(a, a + b) == len(a)
