"""The caller speaks its language, in its script: a turn in another script or language is rejected
like meta-talk (one more attempt, then a rerun), and the simulator ledger counts it; declared
code-switching and the starter's own caller turns are never rejected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from callbench.bundle.models import Brief, Bundle
from callbench.bundle.scripts import script_codes, script_of
from callbench.bundle.validate.audits import load_bundle
from callbench.models.scripted.models import closing_line, spoken
from callbench.report.model.episode_read import TraceSummary
from callbench.report.model.ledger import LedgerCounter
from callbench.sim.caller import validate_turn
from callbench.sim.caller_language import language_problem

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
RUSSIAN = "Здравствуйте, я хочу разблокировать карту моего сына, это очень срочно."


@pytest.fixture(scope="module")
def starter() -> Bundle:
    return load_bundle(STARTER)


def _brief(starter: Bundle, sid: str, **change: str) -> Brief:
    return starter.scenario(sid)[1].brief.model_copy(update=change)


def test_script_of_letters() -> None:
    assert [script_of(c) for c in "கA5 Яक্"] == ["Taml", "Latn", None, None, "Cyrl", "Deva", "Beng"]
    # characters of no particular script (Unicode's Common and Inherited): a combining accent, a
    # variation selector, the modifier apostrophe, a danda shared by the Indic scripts
    assert [script_of(c) for c in "\u0301\ufe0f\u02bc\u0964"] == [None, None, None, None]
    assert [script_of(c) for c in "ᱚꯀ"] == ["Olck", "Mtei"]  # Santali, Manipuri


def test_script_names_resolve_to_unicode_scripts() -> None:
    assert script_codes("Gujarati") == {"Gujr"} and script_codes("ol_chiki") == {"Olck"}
    assert script_codes("Bangla") == {"Beng"} and script_codes("Odia") == {"Orya"}
    assert script_codes("deva") == {"Deva"} and script_codes("Jpan") == {"Hani", "Hira", "Kana"}
    assert script_codes("Urdu") is None and script_codes("Common") is None
    # ISO 15924 codes that Unicode gives no character: their letters' scripts
    assert script_codes("Hrkt") == script_codes("Katakana_Or_Hiragana") == {"Hira", "Kana"}
    assert script_codes("Aran") == {"Arab"} and script_codes("Meitei Mayek") == {"Mtei"}


def test_accents_and_selectors_are_not_a_foreign_script(starter: Bundle) -> None:
    """A decomposed accent (``e`` + U+0301) and emoji variation selectors used to count as letters
    of a script named after their first word ("Combining", "Variation") and reject the turn."""
    en = _brief(starter, "lpg_en_late_delivery_no_second_booking")
    decomposed = "The cafe\u0301 owner, Rene\u0301e, ordered a cre\u0300me cake. 👍\ufe0f👍\ufe0f👍\ufe0f"
    assert language_problem(decomposed, en) is None
    hi = _brief(starter, "lpg_hi_overcharge_floor_charge")
    hindi = "मेरा सिलेंडर अभी तक नहीं आया है \u0301\u0301\u0301, कृपया बताइए।"
    assert language_problem(hindi, hi) is None
    assert (language_problem(RUSSIAN, en) or "").startswith("language: 59 letters in Cyrillic script")


def test_a_santali_call_accepts_ol_chiki_and_rejects_bengali(starter: Bundle) -> None:
    """A script named in two words (Ol Chiki) is the script of its letters; before, each letter was
    read as script "Ol" and every Santali turn was foreign."""
    sat = _brief(starter, "lpg_en_late_delivery_no_second_booking", language="sat-IN", script="Ol Chiki")
    assert language_problem("ᱡᱚᱦᱟᱨ, ᱤᱧ ᱫᱚ ᱢᱤᱫ ᱜᱮᱥ ᱥᱤᱞᱤᱱᱰᱟᱨ ᱵᱩᱠᱤᱝ ᱞᱟᱹᱜᱤᱫ ᱨᱚᱲᱟᱜ ᱠᱟᱱᱟ", sat) is None
    bengali = "আমার সিলিন্ডার এখনও আসেনি"
    assert (language_problem(bengali, sat) or "").startswith("language: ")
    assert "letters in Bengali script" in (language_problem(bengali, sat) or "")


def test_a_russian_reply_in_a_tamil_call_is_rejected(starter: Bundle) -> None:
    """The measured case: a caller answering in Russian in ``ta-IN`` was accepted turn after turn."""
    brief = _brief(starter, "bank_unblock_sons_card_refusal")
    raw = json.dumps({"expressed_step": "ask_unlock", "speech": RUSSIAN, "done": False}, ensure_ascii=False)
    v = validate_turn(raw, brief, [])
    assert v.output is None and v.rejection is not None
    assert v.rejection.startswith("language: 59 letters in Cyrillic script; this call is in ta-IN")


def test_english_fallback_in_an_indic_call_is_rejected_code_switching_is_not(starter: Bundle) -> None:
    ta = _brief(starter, "bank_unblock_sons_card_refusal")
    problem = language_problem("Yes, my customer ID is NB21547790 and my card ends with 0719.", ta)
    assert problem is not None and problem.startswith("language: the turn is mostly Latin script")
    # English numbers, ids and product names inside a Tamil turn are code-switching
    assert language_problem("என் கஸ்டமர் ஐடி NB21547790, RuPay debit card, கடைசி நான்கு 0719.", ta) is None
    assert language_problem("OK, thank you.", ta) is None  # too short to be a fallback
    # a declared romanised call (hi-Latn, Hinglish) expects Latin and is not language-checked
    hinglish = _brief(starter, "lpg_hi_overcharge_floor_charge", language="hi-Latn", script="Latin")
    said = "Haan ji, mera consumer number 2756 0914 hai, booking kab aayegi?"
    assert language_problem(said, hinglish) is None
    assert language_problem(RUSSIAN, hinglish) is not None


def test_another_language_of_the_same_script_is_rejected(starter: Bundle) -> None:
    en = _brief(starter, "lpg_en_late_delivery_no_second_booking")
    fr = "Bonjour, je voudrais savoir quand ma bouteille de gaz sera livrée, s'il vous plaît."
    problem = language_problem(fr, en)
    assert problem is not None and problem.startswith("language: the turn reads as 'fr'")
    mr = _brief(starter, next(s.id for _, s in starter.scenarios() if s.brief.language == "mr-IN"))
    hindi = "मेरा सिलेंडर अभी तक नहीं आया है, कृपया बताइए कि बुकिंग की स्थिति क्या है।"
    assert (language_problem(hindi, mr) or "").startswith("language: the turn reads as 'hi'")


def test_no_caller_turn_of_the_starter_is_rejected(starter: Bundle) -> None:
    """False rejections on every caller turn of the starter's reference paths (the scripted plan
    caller's turns: each step's meaning as spoken, then the closing line): 0 of 740."""
    turns = [(s.brief, t) for _, s in starter.scenarios()
             for t in [*(spoken(st.meaning) for st in s.brief.plan), closing_line(s.brief.language)]]
    assert len(turns) == 740
    assert [(b.language, t) for b, t in turns if language_problem(t, b)] == []


async def test_a_wrong_language_turn_gets_one_more_attempt_then_the_ledger_counts_it(run) -> None:
    c = lambda speech, step=None, done=False: {"speech": speech, "expressed_step": step, "done": done}  # noqa: E731
    good = [c("Yes, this is Meena.", "s1_greet"), c("No milk this evening.", "s2_no_milk"),
            c("My cow has mastitis.", "s3_reason"), c("Okay, bye.", None, True)]
    french = c("Oui, c'est bien moi, Meena, la productrice de lait.", "s1_greet")
    t = await run(caller={"caller": [french, *good]})
    first = t.caller_turns[0]
    assert first.attempts == 2 and first.rejections[0].startswith("language: the turn reads as 'fr'")
    assert t.reruns == 0 and first.intended == "Yes, this is Meena."
    counter = LedgerCounter()
    counter.add("c", TraceSummary.of(t), None)
    assert counter.result().caller_rejections == {"language": 1}
