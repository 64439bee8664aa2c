"""Caller isolation as a kind: hidden-state and fixture values in anything the
caller reads, in normalised forms, and known facts that launder them."""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callbench.bundle.models import Scenario
from callbench.bundle.normalize import TextSet, compact, find_value, norm_text, value_pattern
from callbench.bundle.provenance import GENERATED_HEADER
from callbench.bundle.validate.isolation import audit_caller_isolation

from .conftest import BOOKING, MiniBundle


def _problems(mb: MiniBundle, edit: Any, strict: bool = True) -> list[tuple[str, str, str]]:
    import yaml

    data = yaml.safe_load((mb.agent_dir / "scenarios" / f"{BOOKING}.yaml").read_text(encoding="utf-8"))
    edit(data)
    found: list[tuple[str, str, str]] = []
    audit_caller_isolation(Scenario.model_validate(data), lambda p, c, m: found.append((p, c, m)),
                           strict_known_facts=strict)
    return found


def test_fixture_response_value_in_the_brief_is_a_leak(mb: MiniBundle) -> None:
    # the confirmation number the backend will give, already in the caller's brief
    def edit(d: dict[str, Any]) -> None:
        d["fixtures"]["schedule_pickup"]["queue"][0]["response"]["confirmation"] = "PK-88231"
        d["brief"]["plan"][3]["meaning"] = "thank the agent for confirmation pk 88231 and say goodbye"

    [(path, code, msg)] = _problems(mb, edit)
    assert path == "fixtures.schedule_pickup.queue.0.response.confirmation" and code == "isolation.leak"
    assert "fixture value 'PK-88231' appears in brief.plan.3.meaning" in msg


def test_hidden_value_copied_into_known_facts_is_refused_unless_declared(mb: MiniBundle) -> None:
    def copied(d: dict[str, Any]) -> None:
        d["brief"]["known_facts"]["internal_id"] = "ACC-5521"

    [(path, code, msg)] = _problems(mb, copied)
    assert (path, code) == ("hidden_state.account.id", "isolation.known_fact")
    assert "brief.known_facts.internal_id" in msg and "caller_known.internal_id" in msg

    def declared(d: dict[str, Any]) -> None:
        copied(d)
        d["caller_known"] = {"internal_id": "printed on the caller's welcome letter"}
        d["brief"]["context"] += " Your internal id is ACC 5521."

    assert _problems(mb, declared) == []  # declared: it may appear in the brief too


def test_hand_authored_known_facts_are_trusted(mb: MiniBundle) -> None:
    def copied(d: dict[str, Any]) -> None:
        d["brief"]["known_facts"]["internal_id"] = "ACC-5521"

    assert _problems(mb, copied, strict=False) == []


@pytest.mark.parametrize("spelled", ["A C C 5 5 2 1", "acc5521", "ACC–55 21", "ACC-５５２１", "ACC-૫૫૨૧"])
def test_hidden_id_in_any_spelling_is_a_leak(mb: MiniBundle, spelled: str) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["brief"]["reason"] = f"You want the pickup for account {spelled}."

    [(path, code, _)] = _problems(mb, edit)
    assert (path, code) == ("hidden_state.account.id", "isolation.leak")


def test_identifier_inside_a_longer_number_is_not_a_hit(mb: MiniBundle) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["brief"]["reason"] = "Your order is ACC55210 and your phone 98765 52100."

    assert _problems(mb, edit) == []


def test_unknown_caller_known_key(mb: MiniBundle) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["caller_known"] = {"nope": "x"}

    assert [(p, c) for p, c, _ in _problems(mb, edit)] == [("caller_known.nope", "isolation.caller_known")]


def test_validate_is_strict_for_machine_written_files_only(mb: MiniBundle) -> None:
    def copied(d: dict[str, Any]) -> None:
        d["brief"]["known_facts"]["internal_id"] = "ACC-5521"

    mb.edit_scenario(copied)
    assert [p.code for p in mb.problems()] == []
    path = mb.agent_dir / "scenarios" / f"{BOOKING}.yaml"
    path.write_text(GENERATED_HEADER + path.read_text(encoding="utf-8"), encoding="utf-8")
    assert [p.code for p in mb.problems()] == ["isolation.known_fact"]


def test_normal_forms() -> None:
    assert compact("PK-10 01/a") == "pk1001a"
    assert find_value("Asha Rao", "I am ASHA\u00a0 Rao.") and not find_value("Asha Rao", "asharao")
    assert not find_value("cash_on_delivery", "I pay cash on delivery")
    assert not find_value("PK", "PK") and find_value("1275", "you owe 1,275", min_chars=3)


def _find_by_pattern(value: str, text: str, min_chars: int) -> bool:
    """find_value's definition through value_pattern's regex (what it did before it was made faster)."""
    pat = value_pattern(value, min_chars)
    if pat is None:
        return False
    hay = norm_text(text)
    for m in pat.finditer(hay):
        before = hay[m.start() - 1] if m.start() else " "
        after = hay[m.end()] if m.end() < len(hay) else " "
        if not (before.isalnum() or unicodedata.category(before).startswith("M")) and not (
                after.isalnum() or unicodedata.category(after).startswith("M")):
            return True
    return False


_ALPHABET = "aA1234 -_.,/#\u00a0\u2013x\u0ae7\u0967\u0915\u093f()"


@settings(max_examples=400, deadline=None)
@given(value=st.text(alphabet=_ALPHABET, min_size=0, max_size=9),
       text=st.text(alphabet=_ALPHABET, min_size=0, max_size=30), min_chars=st.integers(1, 5))
def test_find_value_is_the_patterns_search(value: str, text: str, min_chars: int) -> None:
    """The compact search finds a value exactly where its pattern (characters with any separators
    between them; words with any white space) does: same spans, same glue rule, same answer."""
    for hay in (text, f"{text} {value}", f"{text}{value}{text}"):
        assert find_value(value, hay, min_chars) is _find_by_pattern(value, hay, min_chars)


def test_find_value_compact_search_spans() -> None:
    """Separators between the characters of an identifier, and a hit next to a glued miss."""
    assert find_value("PK-1001", "ref p k 1 0\u2013 0 1, please")
    assert not find_value("PK-1001", "ref pk10012")
    assert find_value("PK-1001", "pk10012 or PK1001")  # the second, unglued occurrence counts
    assert find_value("\u0ae7\u0ae8\u0ae9\u0aea", "call 1234 now")  # Gujarati digits as ASCII


@settings(max_examples=400, deadline=None)
@given(value=st.text(alphabet=_ALPHABET + "\x00\t\u2003", min_size=0, max_size=9),
       texts=st.lists(st.text(alphabet=_ALPHABET + "\x00\t\u2003", min_size=0, max_size=20), max_size=5),
       min_chars=st.integers(0, 5))
def test_text_set_is_the_patterns_search(value: str, texts: list[str], min_chars: int) -> None:
    """Searching texts joined (TextSet) names exactly the texts the value's pattern
    finds it in: no hit across two texts, none lost at a text's start or end, a glued miss stays one."""
    for case in (texts, [*texts, value], [f"{t}{value}" for t in texts], [f"{value}{t}" for t in texts]):
        assert TextSet(case).holding(value, min_chars) == [
            i for i, t in enumerate(case) if _find_by_pattern(value, t, min_chars)]


def test_text_set_examples() -> None:
    """A value split over two texts is in neither; the text holding an unglued hit is named."""
    texts = ["ref PK-10", "01 please", "pk10012", "or PK 1001."]
    assert TextSet(texts).holding("PK-1001") == [3]
    assert TextSet(["Asha", "Rao", "I am asha  rao"]).holding("Asha Rao") == [2]
    assert TextSet([]).holding("PK-1001") == []

