"""Writing systems by their Unicode Script property (Unicode Standard Annex #24, data from the
Unicode Character Database's ``Scripts.txt`` as fontTools ships it: ``fontTools.unicodedata``).

A brief names its caller's script in words (``script: Gujarati``); :func:`script_codes` turns that
into the ISO 15924 codes whose letters belong to it, and :func:`script_of` gives the script of one
character of speech. Characters of no particular script (Unicode's ``Common``: digits, punctuation,
the modifier apostrophe; ``Inherited``: combining accents, variation selectors, which take their
base letter's script) belong to none, so a decomposed ``e`` + U+0301 is one Latin letter, not a
Latin letter and a mark of some other script.
"""

from __future__ import annotations

from fontTools import unicodedata as ucd

NO_SCRIPT = frozenset({"Zyyy", "Zinh", "Zzzz"})
"""ISO 15924 codes that name no writing system: Common, Inherited and Unknown."""

ALIASES: dict[str, frozenset[str]] = {
    "bangla": frozenset({"Beng"}),
    "odia": frozenset({"Orya"}),
    "roman": frozenset({"Latn"}),
    "perso-arabic": frozenset({"Arab"}),
    "nastaliq": frozenset({"Arab"}),
    "shahmukhi": frozenset({"Arab"}),
    "chinese": frozenset({"Hani", "Bopo"}),
    "simplified chinese": frozenset({"Hani"}),
    "traditional chinese": frozenset({"Hani", "Bopo"}),
    "japanese": frozenset({"Hani", "Hira", "Kana"}),
    "korean": frozenset({"Hang", "Hani"}),
    "meitei mayek": frozenset({"Mtei"}),
    "katakana or hiragana": frozenset({"Hira", "Kana"}),
}
"""Names in use that are not Unicode script names (or name several scripts written together)."""

_CODES: dict[str, frozenset[str]] = {
    "Jpan": frozenset({"Hani", "Hira", "Kana"}), "Kore": frozenset({"Hang", "Hani"}),
    "Hans": frozenset({"Hani"}), "Hant": frozenset({"Hani", "Bopo"}), "Hanb": frozenset({"Hani", "Bopo"}),
    "Hrkt": frozenset({"Hira", "Kana"}), "Jamo": frozenset({"Hang"}), "Aran": frozenset({"Arab"}),
    "Latf": frozenset({"Latn"}), "Latg": frozenset({"Latn"}), "Cyrs": frozenset({"Cyrl"}),
    "Syre": frozenset({"Syrc"}), "Syrj": frozenset({"Syrc"}), "Syrn": frozenset({"Syrc"}),
    "Geok": frozenset({"Geor"}),
}
"""ISO 15924 codes of no Unicode script of their own (composites and variants) -> the Unicode
scripts their letters have (``Hrkt``, Unicode's "Katakana_Or_Hiragana", is on no character)."""


def script_codes(name: str) -> frozenset[str] | None:
    """The ISO 15924 codes of the letters a script ``name`` covers: a Unicode script name in any
    case, with spaces or underscores (``Ol Chiki``, ``ol_chiki``), a four-letter ISO 15924 code
    (``Deva``, ``Jpan``; composites and variants as :data:`_CODES`) or one of :data:`ALIASES`
    (``Bangla``, ``Odia``, ``Japanese``). None when the name is none of these."""
    text = " ".join(name.replace("_", " ").split())
    key = text.lower()
    if key in ALIASES:
        return ALIASES[key]
    if len(text) == 4 and text.isalpha():
        code = text[0].upper() + text[1:].lower()
        if code in _CODES:
            return _CODES[code]
        if ucd.script_name(code, None) is not None and code not in NO_SCRIPT:
            return frozenset({code})
    code = ucd.script_code(text, None)
    if code is None or code in NO_SCRIPT:
        return None
    return _CODES.get(code, frozenset({code}))


def script_of(ch: str) -> str | None:
    """The ISO 15924 code of the script of a letter or mark (``"Taml"``, ``"Latn"``), or None for
    anything else and for characters of no particular script (:data:`NO_SCRIPT`)."""
    if not ucd.category(ch).startswith(("L", "M")):
        return None
    code = ucd.script(ch)
    return None if code in NO_SCRIPT else code


def script_label(code: str) -> str:
    """The Unicode name of a script code for messages (``"Olck"`` -> ``"Ol Chiki"``)."""
    return str(ucd.script_name(code, code)).replace("_", " ")
