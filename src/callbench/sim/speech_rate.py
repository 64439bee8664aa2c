"""Spoken time: how long the agent's speech would take to say, estimated from its text.

A voice agent's turn is heard, not read: the caller waits while it is spoken, and a long answer
delays the next thing the caller can say. Until the audio channel measures it from synthesised
audio, the speaking time of a text is estimated from published speech rates:

- Latin-script words (English, and the English words of code-mixed Indian speech) at
  **2.5 words per second** (150 words per minute). The US National Center for Voice and Speech
  gives 150-160 words per minute as the comfortable rate for reading aloud (audiobooks,
  broadcast); conversational American English measured in the Fisher and Switchboard corpora
  (Yuan, Liberman and Cieri, "Towards an integrated understanding of speaking rate in
  conversation", Interspeech 2006) is faster, so the estimate errs long rather than short.
- Brahmic-script text (Hindi, Marathi, Gujarati, Bengali, Tamil, Telugu, Kannada, Malayalam,
  Punjabi, Odia) by **orthographic syllable** (akshara: a vowel letter, or a consonant with its
  vowel sign or inherent vowel; a consonant joined by a virama to the next adds none) at
  **5.0 aksharas per second**. Syllable rates of read speech lie between 5.2 (Mandarin) and 7.8
  (Spanish, Japanese) syllables per second in Pellegrino, Coupé and Marsico, "A cross-language
  perspective on speech information rate", Language 87(3), 2011; Wilson and Netsell (Missouri
  State University, 2009) report about 6.5 syllables per second for conversational Tamil; Savithri
  and Jayaram, "Rate of speech/reading in Dravidian languages", JAIISH 27(1), 2008, give normative
  rates for Kannada, Tamil, Telugu and Malayalam read speech. 5.0 sits at the slow end of those
  ranges, as a text-to-speech voice on a phone line speaks slowly and clearly. The same rate is
  used for every Brahmic script: no published study compares these languages on one protocol.
- digits are read out: a run of digits counts as one word per digit (a phone agent reads
  numbers digit by digit more often than as one long numeral).

Pauses between sentences are not added. These are estimates, for comparing candidates on the
same scenarios; a report labels them as estimated.
"""

from __future__ import annotations

import re
import unicodedata

WORDS_PER_SECOND = 2.5
"""Latin-script (and other space-separated) words per second."""
AKSHARAS_PER_SECOND = 5.0
"""Orthographic syllables of Brahmic scripts per second."""
RATES: dict[str, tuple[str, float]] = {
    "en": ("words", WORDS_PER_SECOND),
    **{lang: ("aksharas", AKSHARAS_PER_SECOND)
       for lang in ("hi", "mr", "gu", "bn", "ta", "te", "kn", "ml", "pa", "or", "as", "ne")},
}
"""The rate used for a language (primary subtag): what is counted and how many per second. Every
text is counted by script whatever its language (a Hindi turn may hold English words); this table
names the rate a report shows for the language."""

_BRAHMIC = (0x0900, 0x0DFF)  # Devanagari .. Sinhala: the Indic blocks
_DIGITS = re.compile(r"\d")
_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")


def _is_brahmic(ch: str) -> bool:
    return _BRAHMIC[0] <= ord(ch) <= _BRAHMIC[1]


def count_aksharas(text: str) -> int:
    """Orthographic syllables of the Brahmic-script letters in ``text``: every independent vowel
    and every consonant not followed by a virama (which joins it to the next consonant).
    Vowel signs, nasalisation marks and the virama itself add none."""
    count = 0
    for i, ch in enumerate(text):
        if not _is_brahmic(ch) or " LETTER " not in unicodedata.name(ch, ""):
            continue  # vowel signs, virama, nukta, nasalisation marks, digits
        j = i + 1
        while j < len(text) and "NUKTA" in unicodedata.name(text[j], ""):
            j += 1
        if j < len(text) and _is_brahmic(text[j]) and "VIRAMA" in unicodedata.name(text[j], ""):
            continue  # a consonant joined to the next: one syllable with it
        count += 1
    return count


def count_words(text: str) -> int:
    """Words of non-Brahmic letters in ``text`` plus one per digit (numbers are read out)."""
    latin = "".join(" " if _is_brahmic(ch) else ch for ch in text)
    return len(_WORD.findall(latin)) + len(_DIGITS.findall(latin))


def spoken_seconds(text: str | None) -> float:
    """The estimated time, in seconds, to say ``text`` (see the module docstring); 0 for None or
    empty text."""
    if not text:
        return 0.0
    return count_words(text) / WORDS_PER_SECOND + count_aksharas(text) / AKSHARAS_PER_SECOND


def word_count(text: str | None) -> int:
    """Words in ``text`` as a listener counts them: whitespace-separated tokens (any script)."""
    return len(text.split()) if text else 0


def rate_label(language: str) -> str:
    """The rate a report shows for ``language`` (a BCP 47 tag such as ``hi-IN``), e.g.
    ``hi: 5.0 aksharas/s (latin words 2.5/s)``; an unlisted language reads as counted by script."""
    primary = language.split("-")[0].lower()
    unit, rate = RATES.get(primary, ("words", WORDS_PER_SECOND))
    if unit == "words":
        return f"{primary}: {rate:g} words/s"
    return f"{primary}: {rate:g} {unit}/s (latin-script words {WORDS_PER_SECOND:g}/s)"
