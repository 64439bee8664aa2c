"""Robust, strict reading of a judge's JSON reply.

Robust about form: a reply inside a code fence or after a sentence of prose, with a byte-order
mark or zero-width characters, with keys or labels in odd case or spelling (``"Met"``,
``"NOT MET"``, ``"not-met"``, ``"Cited_Messages"``, ``"citedMessages"``), with items given as a
list of objects carrying ``id`` instead of an object keyed by id, still parses.

Strict about content: an unknown label, a rating that is not a whole number from 1 to
5, a cited index that is not a message index of the trace, a label, rating or citation list given
twice in one item, or a missing item is *rejected*, never clamped or guessed. Rejections are per
item, so one bad item does not void the others; the judge runner retries once and records what
stays unusable as a judge error.

Strict about the reply as a kind: a reply that gives any JSON key twice
(``object_pairs_hook``; Python's ``json`` keeps the last silently, so ``not_met`` then ``met`` was
stored as met), gives one item twice in the list form, or judges items it was not asked about is
rejected whole (:class:`ReplyError`) and retried like unparseable text.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, Field

from callbench.grade.models import Label
from callbench.models.output_limits import (
    REPLY_LIMITS,
    OutputLimitError,
    check_depth,
    check_strings,
    safe_value,
)

Kind = Literal["criteria", "ratings"]
ItemKey = tuple[Kind, str]

_INVISIBLE = dict.fromkeys(map(ord, "\ufeff\u200b\u200c\u200d\u2060\u180e\u00ad"), None)
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript)?[ \t]*\r?\n?(.*?)```", re.DOTALL)

_LABELS: dict[str, Label] = {
    "met": Label.MET,
    "partial": Label.PARTIAL,
    "partially_met": Label.PARTIAL,
    "not_met": Label.NOT_MET,
    "notmet": Label.NOT_MET,
    "not_applicable": Label.NOT_APPLICABLE,
    "notapplicable": Label.NOT_APPLICABLE,
    "n_a": Label.NOT_APPLICABLE,
    "na": Label.NOT_APPLICABLE,
}
_FIELD_ALIASES: dict[str, str] = {
    "label": "label",
    "rating": "rating",
    "score": "rating",
    "reason": "reason",
    "reasoning": "reason",
    "explanation": "reason",
    "citedmessages": "cited_messages",
    "cited": "cited_messages",
    "citations": "cited_messages",
    "citedindices": "cited_messages",
    "messageindices": "cited_messages",
    "evidence": "cited_messages",
}


class ReplyError(ValueError):
    """The reply as a whole cannot be used (not JSON, not an object)."""


class ItemReply(BaseModel):
    """One usable judgement: a label (criteria) or a rating (ratings), cited message indices, reason."""

    label: Label | None = None
    rating: int | None = None
    cited_messages: list[int] = Field(default_factory=list)
    reason: str = ""


class ParsedReply(BaseModel):
    """Usable items by (kind, id) and the rejection reason of every other expected item."""

    items: dict[str, ItemReply] = Field(default_factory=dict)  # key: "<kind>.<id>"
    errors: dict[str, str] = Field(default_factory=dict)


def key_str(key: ItemKey) -> str:
    """``("criteria", "greets")`` -> ``"criteria.greets"``."""
    return f"{key[0]}.{key[1]}"


def clean_text(text: str) -> str:
    """Remove byte-order marks, zero-width characters and soft hyphens."""
    return text.translate(_INVISIBLE)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` that refuses a key given twice in one object (RFC 8259 section 4: names
    SHOULD be unique; with duplicates the behaviour is unpredictable)."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ReplyError(f"the reply gives the key {k!r} twice in one object; give each key once")
        out[k] = v
    return out


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys)


def extract_json(text: str | None) -> dict[str, Any]:
    """The JSON object in a reply: from a code fence if there is one, else the whole text, else the
    first ``{...}`` value in it. Raises :class:`ReplyError` saying what is wrong, including a key
    given twice in one object, or an output limit exceeded (:mod:`callbench.models.output_limits`).
    Strings come back through ``safe_text``."""
    if text is None or not text.strip():
        raise ReplyError("the reply is empty")
    s = clean_text(text).strip()
    fence = _FENCE.search(s)
    if fence:
        s = fence.group(1).strip()
    try:  # the output limits (depth, size; strings below): a judge output error, never a RecursionError
        if len(s) > REPLY_LIMITS.max_chars:
            raise OutputLimitError(f"{len(s)} characters (at most {REPLY_LIMITS.max_chars})")
        check_depth(s, REPLY_LIMITS.max_depth)
    except OutputLimitError as e:
        raise ReplyError(f"the reply exceeds the output limits: {e}") from None
    try:
        value = _DECODER.decode(s)
    except json.JSONDecodeError:
        start = s.find("{")
        if start < 0:
            raise ReplyError("the reply contains no JSON object") from None
        try:
            value, _ = _DECODER.raw_decode(s, start)
        except json.JSONDecodeError as e:
            raise ReplyError(f"the reply is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise ReplyError(f"the reply is a JSON {type(value).__name__}, not an object")
    try:
        check_strings(value, REPLY_LIMITS.max_string_chars)
    except OutputLimitError as e:
        raise ReplyError(f"the reply exceeds the output limits: {e}") from None
    safe: dict[str, Any] = safe_value(value)  # lone surrogates escaped: the grade file can be saved
    return safe


def _norm(s: str) -> str:
    return re.sub(r"[^0-9a-z]", "", clean_text(s).casefold())


def normalize_label(value: Any) -> Label | None:
    """A label in any usual case or separator (``Met``, ``NOT MET``, ``not-met``, ``N/A``), or None
    when it is not one of met / partial / not_met / not_applicable."""
    if not isinstance(value, str):
        return None
    s = re.sub(r"[\s\-_/]+", "_", clean_text(value).strip().casefold()).strip("_")
    return _LABELS.get(s)


def parse_rating(value: Any) -> int | None:
    """A whole number 1..5 (``4``, ``4.0`` or ``"4"``), or None: never clamped or rounded."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        v = clean_text(value).strip()
        if not re.fullmatch(r"[0-9]+", v):
            return None
        value = int(v)
    if isinstance(value, float):
        if not value.is_integer():
            return None
        value = int(value)
    if isinstance(value, int) and 1 <= value <= 5:
        return value
    return None


def _container(obj: dict[str, Any], kind: Kind, ids: list[str], only_kind: bool) -> dict[str, Any] | None:
    for k, v in obj.items():
        if _norm(k) == kind:
            if isinstance(v, list):
                out: dict[str, Any] = {}
                for entry in v:
                    if isinstance(entry, dict):
                        ident = next((x for kk, x in entry.items() if _norm(kk) == "id"), None)
                        if isinstance(ident, str):
                            if ident in out:
                                raise ReplyError(f"the reply gives {kind} item {ident!r} twice")
                            out[ident] = entry
                return out
            return v if isinstance(v, dict) else None
    if only_kind and any(_find_id(obj, i) is not None for i in ids):
        return obj  # items given at the top level
    return None


def _find_id(container: dict[str, Any], item_id: str) -> str | None:
    if item_id in container:
        return item_id
    want = clean_text(item_id).strip().casefold()
    hits = [k for k in container if isinstance(k, str) and clean_text(k).strip().casefold() == want]
    return hits[0] if len(hits) == 1 else None


def _cited(value: Any, valid: set[int]) -> tuple[list[int], str | None]:
    if value is None:
        return [], None
    if not isinstance(value, list):
        value = [value]
    out: list[int] = []
    for v in value:
        if isinstance(v, str) and re.fullmatch(r"\s*\[?\s*[0-9]+\s*\]?\s*", clean_text(v)):
            v = int(re.sub(r"[^0-9]", "", v))
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            return [], f"cited message {v!r} is not a message index"
        if v not in valid:
            lo, hi = (min(valid), max(valid)) if valid else (0, -1)
            return [], f"cites message {v}, which is not in the transcript (indices {lo}..{hi})"
        if v not in out:
            out.append(v)
    return sorted(out), None


def _item(raw: Any, kind: Kind, valid: set[int]) -> tuple[ItemReply | None, str | None]:
    if not isinstance(raw, dict):
        return None, "is not an object"
    fields: dict[str, Any] = {}
    for k, v in raw.items():
        name = _FIELD_ALIASES.get(_norm(k)) if isinstance(k, str) else None
        if name in ("label", "rating", "cited_messages") and name in fields:
            return None, f"gives its {name} twice (as {k!r} too)"
        if name is not None and name not in fields:
            fields[name] = v
    cited, err = _cited(fields.get("cited_messages"), valid)
    if err:
        return None, err
    reason = fields.get("reason")
    reason = clean_text(reason).strip() if isinstance(reason, str) else ""
    if kind == "criteria":
        if "label" not in fields:
            return None, "has no label"
        label = normalize_label(fields["label"])
        if label is None:
            return None, (
                f"has unknown label {fields['label']!r} (use met, partial, not_met or not_applicable)"
            )
        return ItemReply(label=label, cited_messages=cited, reason=reason), None
    if "rating" not in fields:
        return None, "has no rating"
    rating = parse_rating(fields["rating"])
    if rating is None:
        return None, f"has rating {fields['rating']!r}, which is not a whole number from 1 to 5"
    return ItemReply(rating=rating, cited_messages=cited, reason=reason), None


def parse_judge_reply(text: str | None, expected: list[ItemKey], valid_indices: set[int]) -> ParsedReply:
    """Parse a judge reply against the expected items and the trace's message indices.

    Returns usable items and, for every other expected item, why it was rejected. Raises
    :class:`ReplyError` when the reply as a whole is unusable: not a JSON object, a key given twice,
    an item given twice, or an item that was not asked for (in a ``criteria`` / ``ratings`` object).
    """
    obj = extract_json(text)
    kinds = {k for k, _ in expected}
    out = ParsedReply()
    containers: dict[str, dict[str, Any] | None] = {
        kind: _container(obj, kind, [i for k, i in expected if k == kind], len(kinds) == 1) for kind in kinds
    }
    for kind, box in containers.items():
        if box is None or box is obj:  # items at the top level sit beside other fields
            continue
        asked = [i for k, i in expected if k == kind]
        extra = sorted(str(k) for k in box if not any(_find_id({k: None}, i) for i in asked))
        if extra:
            raise ReplyError(
                f"the reply judges {kind} that were not asked: {', '.join(extra)} "
                f"(asked: {', '.join(asked)})"
            )
    for key in expected:
        kind, item_id = key
        ks = key_str(key)
        box = containers[kind]
        if box is None:
            out.errors[ks] = f"{ks}: missing (the reply has no {kind!r} object)"
            continue
        found = _find_id(box, item_id)
        if found is None:
            out.errors[ks] = f"{ks}: missing from the reply"
            continue
        item, err = _item(box[found], kind, valid_indices)
        if item is None:
            out.errors[ks] = f"{ks}: {err}"
        else:
            out.items[ks] = item
    return out
