"""Judge-reply parsing: robust about form, strict about content."""

from __future__ import annotations

import json

import pytest

from callbench.grade.models import Label
from callbench.grade.parse import ReplyError, extract_json, normalize_label, parse_judge_reply, parse_rating

VALID = set(range(0, 11))
CRIT = [("criteria", "records_zero"), ("criteria", "no_pressure")]
RATE = [("ratings", "memory")]


def reply(**items):
    return json.dumps({"criteria": items})


GOOD = {
    "records_zero": {"reason": "ok", "cited_messages": [5], "label": "met"},
    "no_pressure": {"reason": "pushed", "cited_messages": [7, 3], "label": "not_met"},
}


def test_plain_reply():
    p = parse_judge_reply(reply(**GOOD), CRIT, VALID)
    assert p.errors == {}
    assert p.items["criteria.records_zero"].label == Label.MET
    assert p.items["criteria.no_pressure"].label == Label.NOT_MET
    assert p.items["criteria.no_pressure"].cited_messages == [3, 7]


@pytest.mark.parametrize(
    "wrap",
    [
        lambda s: f"```json\n{s}\n```",
        lambda s: f"```\n{s}\n```",
        lambda s: f"Here is my judgement:\n```JSON\n{s}```\nThanks.",
        lambda s: f"Sure. {s}",
        lambda s: "\ufeff" + s,
        lambda s: s.replace('"label"', '"la\u200bbel"').replace('{"criteria"', '\u200b{"criteria"'),
        lambda s: "\u2060" + s + "\u200d",
    ],
)
def test_form_variants_parse(wrap):
    p = parse_judge_reply(wrap(reply(**GOOD)), CRIT, VALID)
    assert p.errors == {}
    assert p.items["criteria.records_zero"].label == Label.MET
    assert p.items["criteria.no_pressure"].cited_messages == [3, 7]


@pytest.mark.parametrize(
    ("raw", "label"),
    [
        ("Met", Label.MET),
        ("MET", Label.MET),
        (" met ", Label.MET),
        ("NOT MET", Label.NOT_MET),
        ("not-met", Label.NOT_MET),
        ("Not_Met", Label.NOT_MET),
        ("notmet", Label.NOT_MET),
        ("Partial", Label.PARTIAL),
        ("partially met", Label.PARTIAL),
        ("N/A", Label.NOT_APPLICABLE),
        ("Not Applicable", Label.NOT_APPLICABLE),
        ("not\u200b_met", Label.NOT_MET),
    ],
)
def test_label_spellings(raw, label):
    assert normalize_label(raw) == label


@pytest.mark.parametrize("raw", ["yes", "pass", "judge_error", "mett", "", "unmet", None, 1, True])
def test_unknown_labels_rejected(raw):
    assert normalize_label(raw) is None
    bad = dict(GOOD, records_zero={"reason": "", "cited_messages": [], "label": raw})
    p = parse_judge_reply(reply(**bad), CRIT, VALID)
    assert "criteria.records_zero" in p.errors and "criteria.records_zero" not in p.items
    assert "criteria.no_pressure" in p.items  # one bad item does not void the others


def test_odd_key_case_and_list_form():
    text = json.dumps(
        {
            "Criteria": [
                {"ID": "Records_Zero", "Label": "MET", "Cited_Messages": [1], "Reason": "fine"},
                {"id": "no_pressure", "LABEL": "Partial", "citedMessages": ["4"], "reasoning": "meh"},
            ]
        }
    )
    p = parse_judge_reply(text, CRIT, VALID)
    assert p.errors == {}
    assert p.items["criteria.records_zero"].label == Label.MET
    assert p.items["criteria.records_zero"].reason == "fine"
    assert p.items["criteria.no_pressure"].label == Label.PARTIAL
    assert p.items["criteria.no_pressure"].cited_messages == [4]


@pytest.mark.parametrize(("raw", "value"), [(1, 1), (5, 5), (3.0, 3), ("4", 4), (" 2 ", 2)])
def test_ratings_accepted(raw, value):
    assert parse_rating(raw) == value


@pytest.mark.parametrize("raw", [0, 6, -1, 4.5, "five", "4/5", True, None, [4], 10])
def test_ratings_out_of_range_rejected_not_clamped(raw):
    assert parse_rating(raw) is None
    text = json.dumps({"ratings": {"memory": {"reason": "", "cited_messages": [], "rating": raw}}})
    p = parse_judge_reply(text, RATE, VALID)
    assert "ratings.memory" not in p.items
    assert "not a whole number from 1 to 5" in p.errors["ratings.memory"]


@pytest.mark.parametrize("cites", [[11], [3, 99], [-1], ["x"], [True]])
def test_cited_index_not_in_trace_rejected(cites):
    bad = dict(GOOD, records_zero={"reason": "", "cited_messages": cites, "label": "met"})
    p = parse_judge_reply(reply(**bad), CRIT, VALID)
    assert "criteria.records_zero" not in p.items
    assert "criteria.records_zero" in p.errors


def test_missing_item_rejected():
    p = parse_judge_reply(reply(records_zero=GOOD["records_zero"]), CRIT, VALID)
    assert "criteria.no_pressure" in p.errors and "missing" in p.errors["criteria.no_pressure"]
    assert "criteria.records_zero" in p.items
    both = parse_judge_reply(json.dumps({"criteria": GOOD}), [*CRIT, *RATE], VALID)
    assert "ratings.memory" in both.errors and "no 'ratings' object" in both.errors["ratings.memory"]


def test_missing_label_rejected():
    bad = dict(GOOD, records_zero={"reason": "x", "cited_messages": []})
    p = parse_judge_reply(reply(**bad), CRIT, VALID)
    assert p.errors["criteria.records_zero"].endswith("has no label")


def test_items_not_asked_reject_the_reply():
    """It used to be ignored: a reply judging an item it was not asked about is
    not trusted with the others either."""
    with pytest.raises(ReplyError, match="not asked: invented"):
        parse_judge_reply(reply(**GOOD, invented={"label": "met"}), CRIT, VALID)


@pytest.mark.parametrize(
    "text",
    [
        # one criterion labelled twice: Python's json kept the last (not_met then met -> met)
        '{"criteria": {"records_zero": {"label": "met", "cited_messages": [5]}, '
        '"no_pressure": {"label": "not_met"}, "no_pressure": {"label": "met"}}}',
        # a key twice inside an item
        '{"criteria": {"records_zero": {"label": "not_met", "label": "met"}, '
        '"no_pressure": {"label": "met"}}}',
        # the container twice
        '{"criteria": {"records_zero": {"label": "met"}}, "criteria": {"no_pressure": {"label": "met"}}}',
        # in a fence, after prose
        'Here:\n```json\n{"criteria": {"records_zero": {"label": "met"}, '
        '"records_zero": {"label": "met"}}}\n```',
        # the list form with one id twice
        '{"criteria": [{"id": "records_zero", "label": "met"}, {"id": "no_pressure", "label": "met"}, '
        '{"id": "no_pressure", "label": "not_met"}]}',
    ],
)
def test_duplicates_reject_the_reply(text):
    with pytest.raises(ReplyError, match="twice"):
        parse_judge_reply(text, CRIT, VALID)


def test_a_field_given_twice_under_two_spellings_rejects_the_item():
    text = reply(records_zero={"label": "not_met", "Label ": "met"}, no_pressure={"label": "met"})
    p = parse_judge_reply(text, CRIT, VALID)
    assert "label twice" in p.errors["criteria.records_zero"]
    assert set(p.items) == {"criteria.no_pressure"}


@pytest.mark.parametrize(
    "text", [None, "", "   ", "the agent was great", "[1, 2]", '{"criteria": ', "```\n```"]
)
def test_unparseable_reply(text):
    with pytest.raises(ReplyError):
        extract_json(text)
    with pytest.raises(ReplyError):
        parse_judge_reply(text, CRIT, VALID)
