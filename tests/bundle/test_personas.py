"""The persona library: located validation errors, the no-facts audit against scenarios, wording by
language, and the caller prompt a persona gives."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from callbench.bundle.loader import BundleError
from callbench.bundle.personas import PersonaLibrary, load_personas
from callbench.bundle.validate.audits import load_bundle
from callbench.bundle.validate.personas import audit_personas
from callbench.sim.caller import PERSONA_HEADING, build_caller_prompt

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
TRAITS = {"patience": "low", "verbosity": "terse", "numbers": "grouped", "hesitation": "none",
          "self_correction": "never", "mood": "calm", "pace": "fast", "interruption": "often",
          "register": "casual"}


def persona(pid: str = "quick", **wording: str) -> dict:
    return {"id": pid, "traits": dict(TRAITS), "wording": wording or {"en": "You talk fast and briefly."}}


def write(tmp_path: Path, data: object) -> Path:
    p = tmp_path / "personas.yaml"
    p.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return p


def problems_of(path: Path) -> list[str]:
    with pytest.raises(BundleError) as e:
        load_personas(path)
    return [str(p) for p in e.value.problems]


def test_the_starter_library_loads_and_covers_six_languages_without_facts() -> None:
    lib = load_personas(STARTER / "personas.yaml")
    assert lib.ids == ["hurried-terse", "unhurried-careful", "anxious-unsure", "chatty-cheerful",
                       "formal-precise"]
    for p in lib.personas:
        assert sorted(p.wording) == ["bn", "en", "gu", "hi", "mr", "ta"]
    bundle = load_bundle(STARTER)
    pairs = [(a.config.id, s) for a, s in bundle.scenarios()]
    assert len(pairs) == 100
    assert audit_personas(lib, pairs) == []


def test_every_bad_field_is_reported_with_its_path(tmp_path: Path) -> None:
    bad = persona("Bad Id")
    bad["traits"]["mood"] = "furious"
    bad["traits"]["accent"] = "x"
    other = persona("dup")
    other["wording"] = {"english": "hello"}
    found = problems_of(write(tmp_path, {"version": 1, "personas": [bad, other, persona("dup")]}))
    joined = "\n".join(found)
    assert "personas.yaml:personas.0.id: [schema]" in joined
    assert "personas.yaml:personas.0.traits.mood: [schema]" in joined
    assert "personas.yaml:personas.0.traits.accent: [schema]" in joined
    assert "personas.yaml:personas.1.wording: [schema]" in joined
    assert "'english' is not a language tag" in joined


def test_duplicate_ids_missing_file_and_bad_yaml_are_errors(tmp_path: Path) -> None:
    found = problems_of(write(tmp_path, {"personas": [persona("a"), persona("a")]}))
    assert any("persona id 'a' is listed twice" in f for f in found)
    assert "[personas.file]" in problems_of(tmp_path / "missing.yaml")[0]
    (tmp_path / "personas.yaml").write_text("personas: [\n", encoding="utf-8")
    assert "[parse]" in problems_of(tmp_path / "personas.yaml")[0]


def test_a_double_dash_id_is_refused_it_would_make_episode_ids_ambiguous() -> None:
    with pytest.raises(ValueError, match="single '-'"):
        PersonaLibrary.model_validate({"personas": [persona("a--b")]})


def test_wording_is_chosen_by_exact_tag_then_primary_subtag() -> None:
    lib = PersonaLibrary.model_validate({"personas": [persona(en="general", **{"en-IN": "indian"})]})
    p = lib.personas[0]
    assert p.wording_for("en-IN") == "indian"
    assert p.wording_for("en-GB") == "general"
    assert p.wording_for("hi-IN") is None


def test_the_audit_finds_digits_scenario_values_and_missing_languages() -> None:
    bundle = load_bundle(STARTER)
    scen = next(s for a, s in bundle.scenarios() if s.id == "parcel_address_landmark_fix")
    lib = PersonaLibrary.model_validate({"personas": [
        persona("digits", en="You give numbers in groups of 3."),
        persona("named", en="You are Imran Shaikh and you are impatient."),
        persona("pin", en="You mention five six zero zero three seven."),
        persona("hindi-only", hi="आप जल्दी में हैं।"),
    ]})
    found = audit_personas(lib, [("parcel_delivery", scen)])
    codes = [(p.path, p.code) for p in found]
    assert ("personas.0.wording.en", "persona.digit") in codes
    assert ("personas.1.wording.en", "persona.fact") in codes
    assert ("personas.3.wording", "persona.language") in codes
    fact = next(p for p in found if p.code == "persona.fact")
    assert "'Imran Shaikh'" in fact.message and "parcel_delivery/parcel_address_landmark_fix" in fact.message
    assert len(found) == 3  # number words are not digits: "pin" is the author's call


def test_a_digit_of_another_script_counts() -> None:
    lib = PersonaLibrary.model_validate({"personas": [persona(hi="आप ३ बार दोहराते हैं।")]})
    assert [p.code for p in audit_personas(lib, [])] == ["persona.digit"]


def test_the_persona_replaces_the_brief_manner_and_comes_after_the_brief() -> None:
    bundle = load_bundle(STARTER)
    scen = next(s for a, s in bundle.scenarios() if s.id == "parcel_address_landmark_fix")
    assert scen.brief.persona.strip()
    plain = build_caller_prompt(scen.brief)
    assert "Your manner:" in plain and PERSONA_HEADING not in plain
    swept = build_caller_prompt(scen.brief, "You speak slowly and formally.")
    assert "Your manner:" not in swept and scen.brief.persona.strip() not in swept
    assert swept.endswith(f"{PERSONA_HEADING}\nYou speak slowly and formally.")
    assert swept.index("Language: speak only") < swept.index(PERSONA_HEADING)
    # everything before the manner is the same: the brief is unchanged
    head = plain[: plain.index("Your manner:")]
    assert swept.startswith(head)
