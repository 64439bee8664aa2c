"""The starter bundle passes the measurement-validity audits (docs/validity.md).

- No leaks: no scenario's hidden value (hidden state, fixtures) that identifies something is written
  in agent-level text (the operating document rendered with neutral values, the agent's default
  variables, the tool schemas), where every candidate reads it in every call.
- The do-nothing and gaming floor: an agent that hangs up at once, one that only talks, or one that
  calls tools with junk arguments or claims the task done, meets a small share of the action-check
  weight (negative checks are guarded with ``applies_after``; a guard counts only calls that reach
  a record the scenario authored).
- Causal reference paths: every reference argument is known before its call.

(Every authored channel event applying on the reference replay is checked, scenario by scenario,
in ``tests/sim/test_starter.py``.)
"""

from __future__ import annotations

import asyncio
import statistics
from pathlib import Path
from typing import Any

import pytest

from callbench.audit import leaks as audit_leaks
from callbench.audit.core import FLOOR_CANDIDATES, FLOOR_MAX, FLOOR_MEAN, AuditReport, audit_bundle
from callbench.audit.leaks import identifying
from callbench.bundle.models import Bundle, LoadedAgent, Scenario
from callbench.bundle.provenance import audit_provenance
from callbench.bundle.validate.audits import load_bundle

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"


@pytest.fixture(scope="module")
def bundle() -> Bundle:
    return load_bundle(STARTER)


def leaks(agent: LoadedAgent, scen: Scenario) -> list[str]:
    """``path: value`` of each hidden value of ``scen`` the audit finds in the agent-level text
    (:func:`callbench.audit.leaks.leaks`)."""
    return [f"{lk.value.path}: {lk.value.text}" for lk in audit_leaks.leaks(agent, scen)]


def test_no_hidden_value_in_agent_level_text(bundle: Bundle) -> None:
    found = {s.id: hits for a, s in bundle.scenarios() if (hits := leaks(a, s))}
    assert found == {}


def test_leak_finder_finds_the_known_leaks(bundle: Bundle) -> None:
    """The audit above finds a hidden value put back into a document or a tool schema."""
    agent, scen = bundle.scenario("bank_duplicate_charge_dispute")
    planted = agent.model_copy(deep=True)
    planted.instructions_template += "\nFor example DSP26031100418 is read in groups.\n"
    found = leaks(planted, scen)
    # one value, reported once (at the first place it is found: the hidden state)
    assert found == ["hidden_state.dispute_reference: DSP26031100418"]
    # A caller's own value that the fixtures match on leaks too (references are resolved).
    agent, scen = bundle.scenario("pension_status_pending_income_certificate")
    planted = agent.model_copy(deep=True)
    planted.instructions_template += "\nFor example VP251407039216 is read in groups.\n"
    assert "fixtures.verify_record.queue.0.args.record_number.eq: VP251407039216" in leaks(planted, scen)
    agent, scen = bundle.scenario("dairy_zero_supply_mastitis")
    planted = agent.model_copy(deep=True)
    planted.config.tools[0].description += " e.g. BMC-2417-02"
    assert "hidden_state.member_profile.center_code: BMC-2417-02" in leaks(planted, scen)
    assert identifying("17:00") is None and identifying("16:00-16:55") is None
    assert identifying(12343) == "12343" and identifying(2340) is None


# ---------------------------------------------------------------- the do-nothing floor


@pytest.fixture(scope="module")
def report(bundle: Bundle) -> AuditReport:
    return asyncio.run(audit_bundle(bundle, static_problems=[]))


@pytest.mark.parametrize("spec", FLOOR_CANDIDATES)
def test_do_nothing_and_gaming_floor(bundle: Bundle, report: AuditReport, spec: str) -> None:
    """A do-nothing agent, or one that games the checks (junk arguments for every
    lookup, junk for every tool then hang-up, "it is done" without a call), meets at most 10% of the
    action-check weight on average over the bundle's scenarios, and at most 25% in any one scenario
    (the audit's null and gaming floor)."""
    shares = {s.scenario_id: s.floor[spec].share for s in report.scenarios}
    assert len(shares) == len(bundle.scenarios()) > 0
    worst = max(shares, key=lambda k: shares[k])
    assert statistics.mean(shares.values()) <= FLOOR_MEAN, statistics.mean(shares.values())
    assert shares[worst] <= FLOOR_MAX, (worst, shares[worst])


async def test_floor_counts_unguarded_negatives(bundle: Bundle) -> None:
    """The measure above is not vacuous: without their guards, the paper's example scenario's
    negative checks give a hang-up agent a share of the weight."""
    bare = bundle.model_copy(deep=True)
    _, scen = bare.scenario("dairy_zero_supply_mastitis")
    for c in scen.action_checks:
        c.applies_after = []
    ids = ["dairy_zero_supply_mastitis"]
    before = await audit_bundle(bundle, scenario_ids=ids, static_problems=[])
    after = await audit_bundle(bare, scenario_ids=ids, static_problems=[])
    assert before.scenarios[0].floor["scripted:hangup"].share == 0.0
    assert after.scenarios[0].floor["scripted:hangup"].share > FLOOR_MAX


def test_reference_paths_are_causal_and_nothing_leaks(report: AuditReport) -> None:
    """The audit finds no reference value unknown before its call, no leak
    in any normalised form and no hidden enum option, and the replay meets every check."""
    codes = {p.code for p in report.problems}
    assert not codes & {"audit.reference_noncausal", "audit.leak", "audit.hidden_enum"}
    assert report.problems == [] and all(s.reference_met for s in report.scenarios)


def test_every_scenario_has_provenance_at_its_current_hash(bundle: Bundle) -> None:
    """The starter records how each scenario was made and reviewed (provenance.yaml), and
    each record is for the scenario file as it is now."""
    from callbench.bundle.provenance import load_provenance
    from callbench.bundle.validate.audits import scenario_files

    root = Path(bundle.root)
    problems: list[Any] = []
    prov = load_provenance(root, problems)
    assert prov is not None and problems == []
    assert set(prov.scenarios) == {s.id for _, s in bundle.scenarios()}
    assert audit_provenance(root, scenario_files(bundle)) == []
