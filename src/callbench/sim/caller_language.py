"""The caller speaks its language, in its script (paper: the caller speaks "its language, in native
script"): a caller turn written in another script, or in another language of the same script, is
rejected like meta-talk (``language: ...``; one more attempt, then a rerun).

Two checks, in order (choice of library: docs/decisions.md, "The caller's language"):

Script, from Unicode data
    Every letter and mark of the speech (in NFC, as the channel hands it on) is assigned its
    Unicode Script property (:func:`~callbench.bundle.scripts.script_of`; combining accents,
    variation selectors and other characters of no particular script count for none). A turn
    is rejected when it has
    :data:`MIN_FOREIGN` or more letters of a script that is neither the brief's script nor Latin
    (a Russian reply in a ``ta-IN`` call), or, in a call whose script is not Latin, when Latin
    letters are most of the turn and there are :data:`MIN_LATIN_RUN` or more of them (a fallback to
    English). Latin inside an Indic turn is allowed otherwise: English numbers, product names and
    the words Indian callers really mix in ("PIN", "OTP", "app") are code-switching, not a
    fallback. A call declared in Latin script for an Indic language (``hi-Latn``, script Latin:
    Hinglish) expects Latin, and its language is not checked further.
Language, by py3langid
    When the brief's script is written for several of the bundle's languages (Latin: English;
    Devanagari: Hindi and Marathi) and the turn has :data:`MIN_ID_LETTERS` letters or more, the
    language identifier (model shipped in its wheel, no download) restricted to
    :data:`ID_LANGUAGES` must not put more than :data:`ID_REJECT` of its probability on one other
    language. Short turns ("OK", "haan ji") are never judged by language: too few letters to tell.
"""

from __future__ import annotations

import functools
from typing import Any

from callbench.bundle.models import Brief
from callbench.bundle.scripts import script_codes, script_label, script_of
from callbench.sim.text import nfc

MIN_FOREIGN = 3
"""Letters of a third script (neither the call's nor Latin) that reject a turn: fewer may be a stray
symbol (a micro sign, a Greek letter in a unit)."""
MIN_LATIN_RUN = 12
"""Latin letters that, when they are most of a non-Latin call's turn, reject it (a sentence in
English); fewer is a word or two of code-switching."""
MIN_ID_LETTERS = 20
"""Letters a turn needs before its language is identified (short texts are unreliable)."""
ID_LANGUAGES = ("en", "hi", "mr", "bn", "gu", "ta", "te", "kn", "ml", "pa", "or", "ur", "ne", "fr", "de",
                "es", "pt", "it", "nl", "id", "ms", "tl", "sw", "ru", "tr", "pl", "ro", "vi")
"""Languages the identifier chooses among: the Indian languages py3langid knows and the other
languages of Latin script a caller model falls back to most; restricting the set keeps a short
English turn from being read as, say, Luxembourgish."""
ID_REJECT = 0.7
"""Probability on one other language that rejects a turn."""

_INDIC_LATN = "latn"
LATIN = "Latn"
DEVANAGARI = "Deva"


@functools.lru_cache(maxsize=1)
def _identifier() -> Any:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier  # the model ships in the wheel

    ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    ident.set_languages(list(ID_LANGUAGES))
    return ident


def _script_problem(speech: str, brief: Brief, want: frozenset[str]) -> str | None:
    counts: dict[str, int] = {}
    for ch in speech:
        s = script_of(ch)
        if s is not None:
            counts[s] = counts.get(s, 0) + 1
    letters = sum(counts.values())
    foreign = {s: n for s, n in counts.items() if s not in want and s != LATIN and n >= MIN_FOREIGN}
    if foreign:
        worst = max(foreign, key=lambda k: foreign[k])
        return (f"language: {foreign[worst]} letters in {script_label(worst)} script; this call is in "
                f"{brief.language}, written in {brief.script} script")
    latin = counts.get(LATIN, 0)
    if LATIN not in want and latin >= MIN_LATIN_RUN and latin * 2 > letters:
        return (f"language: the turn is mostly Latin script ({latin} of {letters} letters); this call "
                f"is in {brief.language}, written in {brief.script} script")
    return None


def language_problem(speech: str, brief: Brief) -> str | None:
    """``language: detail`` when ``speech`` does not fit the brief's language and script (module
    docstring), else None. The identifier's model loads once per process (about 1 s). A brief
    whose script has no Unicode name (:func:`~callbench.bundle.scripts.script_codes`; bundle
    validation rejects one) is not checked."""
    want = script_codes(brief.script)
    if want is None:
        return None
    speech = nfc(speech)  # as the channel hands the turn on (sim/channel.py)
    problem = _script_problem(speech, brief, want)
    if problem is not None:
        return problem
    tag = brief.language.lower().split("-")
    lang = tag[0]
    if _INDIC_LATN in tag[1:] or (want == {LATIN} and lang != "en"):
        return None  # declared romanised code-switching (hi-Latn, Hinglish): no identifier for it
    if want not in ({LATIN}, {DEVANAGARI}) or lang not in ID_LANGUAGES:
        return None  # the script alone names the language (Tamil, Bengali, Gujarati)
    letters = sum(1 for ch in speech if script_of(ch) is not None)
    if letters < MIN_ID_LETTERS:
        return None
    if want == {DEVANAGARI}:  # judge only the Devanagari part: English words are code-switching
        text = "".join(ch if script_of(ch) != LATIN else " " for ch in speech)
        if sum(1 for ch in text if script_of(ch) is not None) < MIN_ID_LETTERS:
            return None
    else:
        text = speech
    got, prob = _identifier().classify(text)
    if got != lang and prob > ID_REJECT:
        return (f"language: the turn reads as {got!r} (p={prob:.2f}); this call is in {brief.language}, "
                f"written in {brief.script} script")
    return None
