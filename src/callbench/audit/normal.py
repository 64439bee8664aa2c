"""Normalised forms of values and text, shared by the leak audit and the causal reference audit:
the same value written in another case, with other spacing or
separators, in another script's digits, or as another numeric form of the same amount.

- :func:`fold`: Unicode NFKC, case folded (``str.casefold``), every decimal digit of any script
  mapped to its ASCII digit (``unicodedata.digit``, so ``३३०९`` and ``௩௩௦௯`` read ``3309``), then
  everything that is not a letter, a digit or a combining mark dropped (spaces, hyphens, slashes,
  dots, commas, underscores): ``SB 3309 418826``, ``sb-3309-418826`` and ``SB3309418826`` all
  fold to ``sb3309418826``.
- :func:`amounts`: every number written in a text as a :class:`~decimal.Decimal` (grouping commas
  in the Western or the Indian style, a decimal part, any script's digits): ``1500``, ``1,500``,
  ``1500.00`` and ``₹1,500.0`` are the same amount.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

_EDGE = r"(?<![0-9A-Za-z])(?<![0-9]\.)"
_NUMBER = re.compile(
    _EDGE + r"(?:[0-9]{1,3}(?:,[0-9]{2,3})+|[0-9]+)(?:\.[0-9]+)?(?![0-9])"
)
"""A number standing alone (not part of a code such as ``TXN48213``): grouped or plain digits and
an optional decimal part."""
_WHOLE_AMOUNT = re.compile(r"^(?:₹|rs\.?|inr|\$|€|£)?\s*([0-9][0-9,]*(?:\.[0-9]+)?)\s*(?:/-)?$")


class _CharTable(dict[int, str | None]):
    """A ``str.translate`` table filled on first sight of each character by ``rule`` (the cached
    answer is then a C-level dict hit): per-character Python loops over every document made the
    starter's audit spend ~2 s here."""

    def __init__(self, rule: Any) -> None:
        super().__init__()
        self.rule = rule

    def __missing__(self, key: int) -> str | None:
        value: str | None = self.rule(chr(key))
        self[key] = value
        return value


def _digit_rule(ch: str) -> str:
    d = unicodedata.digit(ch, None)
    return ch if d is None or ch.isascii() else str(d)


def _keep_rule(ch: str) -> str | None:
    return ch if ch.isalnum() or unicodedata.category(ch).startswith("M") else None


_DIGITS = _CharTable(_digit_rule)
_KEEP = _CharTable(_keep_rule)


def ascii_digits(text: str) -> str:
    """``text`` with every character that has a decimal digit value (``unicodedata.digit``) in any
    script replaced by its ASCII digit; other characters kept."""
    return text if text.isascii() else text.translate(_DIGITS)


@functools.lru_cache(maxsize=1 << 16)
def fold(text: str) -> str:
    """The folded form of ``text`` (module docstring): NFKC, case folded, ASCII digits, and only
    letters, digits and combining marks kept."""
    return ascii_digits(unicodedata.normalize("NFKC", text).casefold()).translate(_KEEP)


def _decimal(s: str) -> Decimal | None:
    try:
        d = Decimal(s.replace(",", ""))
    except InvalidOperation:
        return None
    return d.normalize() if d.is_finite() else None


@functools.lru_cache(maxsize=1 << 16)
def amounts(text: str) -> frozenset[Decimal]:
    """Every number written in ``text`` (module docstring), normalised (``1500.00`` -> ``1.5E+3``
    compares equal to ``1500``). Cached: the same documents are searched for every scenario."""
    t = ascii_digits(unicodedata.normalize("NFKC", text))
    return frozenset(d for m in _NUMBER.finditer(t) if (d := _decimal(m.group())) is not None)


def amount_of(value: Any) -> Decimal | None:
    """The amount ``value`` stands for: an int or float, or a string that is one number (optionally
    with a currency sign or ``Rs``, grouping commas, a decimal part, any script's digits); else None.
    Booleans are not amounts."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return _decimal(repr(value) if isinstance(value, float) else str(value))
    if isinstance(value, str):
        m = _WHOLE_AMOUNT.match(ascii_digits(unicodedata.normalize("NFKC", value)).strip().casefold())
        return _decimal(m.group(1)) if m else None
    return None


def significant_digits(d: Decimal) -> int:
    """How many digits an amount is written with at the least (``1500.00`` -> 4, ``18450.75`` -> 7)."""
    _, digits, exp = d.normalize().as_tuple()
    n = len(digits)
    return n + exp if isinstance(exp, int) and exp > 0 else n


@dataclass
class Seen:
    """Text the candidate sees, searchable in normalised forms: ``folded`` (:func:`fold` of every
    piece, joined with a separator no folded value holds) and ``numbers`` (:func:`amounts`)."""

    folded: str = ""
    numbers: set[Decimal] = field(default_factory=set)

    def add(self, text: str) -> None:
        """Add one piece of text."""
        self.folded += "\x00" + fold(text)
        self.numbers |= amounts(text)

    def holds(self, value: Any) -> bool:
        """True when ``value`` (a string or a number) is written in the text in a normalised form: its
        folded form inside the folded text, or, for an amount, the same number."""
        amount = amount_of(value)
        if amount is not None and amount in self.numbers:
            return True
        f = fold(str(value))
        return bool(f) and f in self.folded
