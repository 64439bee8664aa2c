"""Validator: instructions (hash, rendering, size), excerpts, caller isolation, languages, date."""

from __future__ import annotations

from typing import Any

import pytest

from callbench.bundle.loader import sha256_text
from callbench.bundle.validate import audits as validate
from callbench.bundle.validate import content as validate_content
from callbench.bundle.validate.content import bcp47_ok, language_covered, norm_text

from .conftest import AGENT, BOOKING, CANCEL, MiniBundle

PFILE = f"agents/{AGENT}/prompt.md"
AFILE = f"agents/{AGENT}/agent.yaml"


# ------------------------------------------------------------------ prompt hash and rendering


def test_recorded_prompt_hash_must_match(mb: MiniBundle) -> None:
    good = sha256_text((mb.agent_dir / "prompt.md").read_text(encoding="utf-8"))
    mb.edit_agent(lambda d: d.update(prompt_sha256=good))
    assert mb.problems() == []
    mb.edit_agent(lambda d: d.update(prompt_sha256="0" * 64))
    [p] = mb.only("prompt.hash_mismatch")
    assert (p.file, p.path) == (AFILE, "prompt_sha256") and good[:12] in p.message


def test_malformed_prompt_hash(mb: MiniBundle) -> None:
    mb.edit_agent(lambda d: d.update(prompt_sha256="abc"))
    [p] = mb.only("prompt.hash_mismatch")
    assert "64 hex digits" in p.message


def test_undefined_template_variable(mb: MiniBundle) -> None:
    path = mb.agent_dir / "prompt.md"
    path.write_text(path.read_text() + "\nCall {{ supervisor_phone }} to escalate.\n")
    [p] = mb.only("prompt.render")
    assert p.file == PFILE and "'supervisor_phone' is undefined" in p.message


def test_template_syntax_error(mb: MiniBundle) -> None:
    path = mb.agent_dir / "prompt.md"
    path.write_text(path.read_text() + "\n{% if %}\n")
    [p] = mb.only("prompt.render")
    assert p.file == PFILE


def test_scenario_variable_overrides_and_empty_prompt(mb: MiniBundle) -> None:
    mb.edit_scenario(lambda d: d.update(variables={"city": "Nashik"}))
    # The excerpt does not mention the city, so overriding it keeps the bundle clean.
    assert mb.problems() == []
    (mb.agent_dir / "prompt.md").write_text("   \n")
    # Excerpts are not checked against empty instructions (one problem, not one per excerpt).
    assert [(p.code, p.file) for p in mb.problems()] == [("prompt.empty", PFILE)]


def test_prompt_length_limit(mb: MiniBundle, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(validate_content, "MAX_PROMPT_CHARS", 300)
    [p] = mb.only("size.prompt")  # once per agent, not once per scenario
    assert p.file == PFILE and "over the 300 limit" in p.message


def test_scenario_and_agent_count_limits(mb: MiniBundle, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(validate, "MAX_SCENARIOS", 1)
    [p] = mb.only("size.scenarios")
    assert p.file == "bundle.yaml"
    monkeypatch.setattr(validate, "MAX_SCENARIOS", 100)
    monkeypatch.setattr(validate, "MAX_AGENTS", 0)
    assert [p.code for p in mb.problems()] == ["size.agents"]


# ------------------------------------------------------------------ excerpts


def test_excerpt_not_verbatim(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["criteria"][0]["excerpts"] = ["Always verify the caller with the 9-digit account number"]

    mb.edit_scenario(brk)
    [p] = mb.only("excerpt.not_verbatim")
    assert (p.file.split("/")[-1], p.path) == (f"{BOOKING}.yaml", "criteria.0.excerpts.0")
    assert "'verified_first'" in p.message and "pickup_desk" in p.message


def test_excerpt_across_a_line_break_is_verbatim(mb: MiniBundle) -> None:
    """The document is hard-wrapped Markdown: a line break inside a sentence reads as a space, so
    an excerpt quoting the sentence on one line matches (half-sentences came from
    excerpts kept inside one line of prompt.md)."""
    def fix(d: dict[str, Any]) -> None:
        d["criteria"][0]["excerpts"] = [
            "Always verify the caller with the 8-digit account number and the date of birth before "
            "any booking or cancellation.",
            "Always verify the caller with the 8-digit account number and the date of birth before any"
            "\n  booking   or cancellation.",
        ]

    mb.edit_scenario(fix)
    assert mb.problems() == []


@pytest.mark.parametrize(("excerpt", "why"), [
    ("Always verify the caller with the 8-digit account number and the date of birth before any booking",
     "ends mid-sentence"),
    ("before any booking or cancellation.", "starts mid-sentence"),
    ("account number and the date of birth", "starts mid-sentence and ends mid-sentence"),
])
def test_excerpt_cut_mid_sentence(mb: MiniBundle, excerpt: str, why: str) -> None:
    mb.edit_scenario(lambda d: d["criteria"][0].update(excerpts=[excerpt]))
    [p] = mb.only("excerpt.partial")
    assert (p.file.split("/")[-1], p.path) == (f"{BOOKING}.yaml", "criteria.0.excerpts.0")
    assert f"'verified_first' {why} in the instructions" in p.message


@pytest.mark.parametrize("excerpt", [
    "Never cancel a pickup for a caller who has not been verified.",  # a sentence after a sentence
    "Never cancel a pickup for a caller who has not been verified",  # the full stop left out
    "Evening pickups take at most 40 kg.",  # a paragraph's first sentence
    "Say goodbye and call end_call",  # a paragraph's end
    "You answer the phone for GreenCycle in Pune.",  # rendered variables
])
def test_whole_excerpts(mb: MiniBundle, excerpt: str) -> None:
    mb.edit_scenario(lambda d: d["criteria"][0].update(excerpts=[excerpt]))
    assert mb.problems() == []


def test_excerpt_with_template_syntax(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["criteria"][0]["excerpts"] = ["You answer the phone for GreenCycle in {{city}}."]

    mb.edit_scenario(brk)
    [p] = mb.only("excerpt.not_verbatim")
    assert "template syntax" in p.message


def test_excerpt_matches_the_rendered_text(mb: MiniBundle) -> None:
    def fix(d: dict[str, Any]) -> None:
        d["criteria"][0]["excerpts"] = ["Today is Saturday, 2026-03-14, and the time is 17:20."]

    mb.edit_scenario(fix)
    assert mb.problems() == []


def test_empty_excerpt(mb: MiniBundle) -> None:
    mb.edit_scenario(lambda d: d["criteria"][0].update(excerpts=[" "]))
    assert [p.message for p in mb.only("excerpt.not_verbatim")] == ["the excerpt is empty"]


# ------------------------------------------------------------------ date and languages


@pytest.mark.parametrize(("value", "fragment"), [("14 March 2026", "not ISO 8601"),
                                                  ("2026-03-14T17:20:00", "no UTC offset")])
def test_brief_datetime(mb: MiniBundle, value: str, fragment: str) -> None:
    mb.edit_scenario(lambda d: d["brief"].update(datetime=value))
    [p] = mb.only("brief.datetime")
    assert fragment in p.message


def test_language_not_among_agent_languages(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["language"] = "ta-IN"
        d["brief"]["language"] = "ta-IN"

    mb.edit_scenario(brk)
    [p] = mb.only("language.agent")
    assert "'ta-IN' is not among agent 'pickup_desk'" in p.message


def test_language_brief_mismatch_and_bad_tag(mb: MiniBundle) -> None:
    mb.edit_scenario(lambda d: d["brief"].update(language="hi-IN"))
    assert [p.code for p in mb.problems()] == ["language.brief_mismatch"]
    mb.edit_agent(lambda d: d.update(languages=["en-IN", "hi-IN", "english"]))
    assert {(p.code, p.path) for p in mb.problems()} >= {("language.tag", "languages.2")}


def test_bcp47_and_coverage() -> None:
    for tag in ("gu-IN", "en", "zh-Hant-TW", "sr-Latn-RS", "hi-Latn", "es-419", "en-US-x-twain"):
        assert bcp47_ok(tag), tag
    for tag in ("english", "en_US", "e", "gu-", "123"):
        assert not bcp47_ok(tag), tag
    assert language_covered("gu-IN", ["gu"]) and language_covered("GU-in", ["gu-IN"])
    assert not language_covered("gu", ["gu-IN"]) and not language_covered("hi-IN", ["gu-IN"])


# ------------------------------------------------------------------ caller isolation


def _hide(mb: MiniBundle, state: dict[str, Any], brief: dict[str, Any] | None = None,
          facts: dict[str, Any] | None = None, sid: str = BOOKING) -> list[tuple[str, str]]:
    def brk(d: dict[str, Any]) -> None:
        d["hidden_state"].update(state)
        d["brief"].update(brief or {})
        d["brief"]["known_facts"].update(facts or {})

    mb.edit_scenario(brk, sid)
    return [(p.path, p.message) for p in mb.problems() if p.code == "isolation.leak"]


def test_isolation_string_leak(mb: MiniBundle) -> None:
    leaks = _hide(mb, {"fee": "Rs forty"}, {"persona": "Knows the fee is Rs Forty already."})
    assert leaks == [("hidden_state.fee", "hidden-state value 'Rs forty' appears in brief.persona "
                                          "but is not one of the caller's known facts")]


def test_isolation_existing_hidden_value_in_plan(mb: MiniBundle) -> None:
    def brk(d: dict[str, Any]) -> None:
        d["brief"]["plan"][2]["meaning"] += " and mention account ACC-5521"

    mb.edit_scenario(brk)
    [p] = mb.only("isolation.leak")
    assert p.path == "hidden_state.account.id" and "brief.plan.2.meaning" in p.message


def test_isolation_known_fact_is_allowed(mb: MiniBundle) -> None:
    assert _hide(mb, {"holder": "Asha Rao"}, {"context": "You are Asha Rao from Pune."}) == []


def test_isolation_value_contained_in_a_known_fact_is_allowed(mb: MiniBundle) -> None:
    assert _hide(mb, {"first": "Asha"}, {"context": "Asha calls."}, {"name": "Asha Rao"}) == []


def test_isolation_numbers(mb: MiniBundle) -> None:
    leaks = _hide(mb, {"owed": 1275.0, "due": 45}, {"reason": "You owe 1,275 rupees and 45 more."})
    assert [p for p, _ in leaks] == ["hidden_state.owed"]  # 45 has fewer than 3 digits


def test_isolation_number_needs_digit_boundaries(mb: MiniBundle) -> None:
    assert _hide(mb, {"slot": 125}, {"reason": "Order 41250 is yours."}) == []


def test_isolation_native_digits_and_grouped_identifiers(mb: MiniBundle) -> None:
    leaks = _hide(mb, {"acct": "77889900", "pin": 4321},
                  {"context": "खाता 7788 9900 है।", "reason": "पिन ४३२१ है।"}, sid=CANCEL)
    assert sorted(p for p, _ in leaks) == ["hidden_state.acct", "hidden_state.pin"]


def test_isolation_whole_words_only_and_short_values_ignored(mb: MiniBundle) -> None:
    leaks = _hide(mb, {"status": "open", "code": "PK", "flag": True},
                  {"reason": "The shop reopened; PK is a prefix; it is open."})
    assert [p for p, _ in leaks] == ["hidden_state.status"]


def test_isolation_word_glued_to_letters_is_not_a_hit(mb: MiniBundle) -> None:
    assert _hide(mb, {"status": "open"}, {"reason": "The shop reopened yesterday."}) == []


def test_isolation_is_case_and_normalisation_insensitive(mb: MiniBundle) -> None:
    import unicodedata

    leaks = _hide(mb, {"city": unicodedata.normalize("NFD", "Ménard")}, {"reason": "Visit MÉNARD street."})
    assert [p for p, _ in leaks] == ["hidden_state.city"]


def test_norm_text() -> None:
    assert norm_text("ABC ૧૨૩ ४५६") == "abc 123 456"


# ------------------------------------------------------------------ paths


def test_symlink_pointing_outside_is_reported(mb: MiniBundle, tmp_path: Any) -> None:
    import os

    outside = tmp_path / "outside_docs"
    outside.mkdir()
    os.symlink(outside, mb.root / "docs")
    os.symlink("/etc/hostname", mb.agent_dir / "notes.txt")
    probs = mb.only("path.escape")
    assert [(p.file, p.message) for p in probs] == [
        (f"agents/{AGENT}/notes.txt", "symlink points outside the bundle folder"),
        ("docs", "symlink points outside the bundle folder"),
    ]


def test_symlink_inside_the_bundle_is_fine(mb: MiniBundle) -> None:
    import os

    os.symlink(mb.agent_dir / "prompt.md", mb.root / "prompt-link.md")
    assert mb.problems() == []


def test_load_bundle_runs_every_audit(mb: MiniBundle, tmp_path: Any) -> None:
    import os

    from callbench.bundle.loader import BundleError
    from callbench.bundle.validate.audits import load_bundle

    os.symlink(tmp_path, mb.root / "escape")
    with pytest.raises(BundleError) as ei:
        load_bundle(mb.root)
    assert [p.code for p in ei.value.problems] == ["path.escape"]
    with pytest.raises(FileNotFoundError):
        load_bundle(mb.root / "bundle.yaml" / "x")
    with pytest.raises(FileNotFoundError):
        load_bundle(mb.agent_dir / "prompt.md")


@pytest.mark.parametrize("stmt, kw", [
    ("{% include 'rules.md' %}", "include"),
    ("{% extends 'base.md' %}", "extends"),
    ("{% import 'macros.md' as m %}", "import"),
    ("{% from 'macros.md' import greet %}", "from"),
    # in a branch neutral values never take: still refused (it must not reach a run unchecked)
    ("{% if agent_name == 'nobody' %}{% include 'rules.md' %}{% endif %}", "include"),
])
def test_template_loading_statements_are_located_prompt_problems(mb: MiniBundle, stmt: str, kw: str) -> None:
    """A statement that loads another template is a located prompt.md problem (it
    was ``[internal] ... TypeError: no loader for this environment specified``)."""
    path = mb.agent_dir / "prompt.md"
    before = path.read_text()
    path.write_text(before + "\n" + stmt + "\n")
    line = before.count("\n") + 2
    [p] = mb.only("prompt.render")
    assert p.file == PFILE
    assert f"line {line}: {{% {kw} %}} is not allowed" in p.message
    assert not any(q.code == "internal" for q in mb.problems())


def test_dynamic_include_is_a_template_error_not_a_type_error() -> None:
    """A loader exists and refuses every name, so even a template built at render time cannot load
    another one (the static check above refuses the statement first)."""
    from jinja2 import TemplateNotFound

    from callbench.bundle.render import _ENV

    with pytest.raises(TemplateNotFound):
        _ENV.get_template("rules.md")
