"""The starter bundle passes the measurement-validity audits of issues 12 and 17.

- No leaks: no scenario's hidden value (hidden state, fixtures) that identifies something is written
  in agent-level text (the operating document rendered with neutral values, the agent's default
  variables, the tool schemas), where every candidate reads it in every call.
- The do-nothing floor: an agent that hangs up at once, or one that only talks, meets a small share
  of the action-check weight (negative checks are guarded with ``applies_after``).

(Every authored channel event applying on the reference replay is checked, scenario by scenario,
in ``tests/sim/test_starter.py``.)
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

import pytest

from callbench.bundle.checks import CallRecord, evaluate_checks
from callbench.bundle.loader import load_bundle, render_instructions
from callbench.bundle.models import Bundle, LoadedAgent, Scenario
from callbench.bundle.provenance import audit_provenance
from callbench.bundle.references import resolve
from callbench.models.scripted.models import create_scripted
from callbench.sim.episode import run_episode

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"

_CLOCK = re.compile(r"[0-9]{1,2}:[0-9]{2}(\s*-\s*[0-9]{1,2}:[0-9]{2})?")


@pytest.fixture(scope="module")
def bundle() -> Bundle:
    return load_bundle(STARTER)


def _leaves(v: Any, where: str) -> list[tuple[str, Any]]:
    if isinstance(v, dict):
        return [x for k, y in v.items() for x in _leaves(y, f"{where}.{k}")]
    if isinstance(v, list):
        return [x for i, y in enumerate(v) for x in _leaves(y, f"{where}.{i}")]
    return [(where, v)]


def _enum_values(schema: Any) -> set[str]:
    """Every ``enum`` member and ``const`` of a JSON Schema: the interface's own vocabulary."""
    out: set[str] = set()
    if isinstance(schema, dict):
        for k, v in schema.items():
            if k == "enum" and isinstance(v, list):
                out |= {str(x) for x in v}
            elif k == "const":
                out.add(str(v))
            else:
                out |= _enum_values(v)
    elif isinstance(schema, list):
        for v in schema:
            out |= _enum_values(v)
    return out


def identifying(v: Any) -> str | None:
    """The text of a value that identifies something (a reference, an account, a code), else None:
    a string of 5+ characters holding a digit, or an integer of 5+ digits; a clock time or a range
    of clock times ("17:00", "16:00-16:55") is a schedule, not an identifier."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return str(v) if len(str(abs(v))) >= 5 else None
    if isinstance(v, str):
        s = v.strip()
        if len(s) >= 5 and any(c.isdigit() for c in s) and not _CLOCK.fullmatch(s):
            return s
    return None


def agent_level_text(agent: LoadedAgent) -> str:
    """What every call of the agent shows the candidate whatever the scenario: the document rendered
    with neutral values (the agent's default variables) and the tool schemas."""
    tools = json.dumps([t.model_dump(exclude={"default_response"}) for t in agent.config.tools],
                       ensure_ascii=False)
    return render_instructions(agent) + "\n" + tools


def leaks(agent: LoadedAgent, scen: Scenario) -> list[str]:
    """``path: value`` of each identifying hidden-state or fixture value of ``scen`` written in the
    agent-level text (values the tools declare as enum members excepted)."""
    text = agent_level_text(agent)
    vocab = set().union(*(_enum_values(t.parameters) for t in agent.config.tools))
    values = _leaves(scen.hidden_state, "hidden_state")
    # References resolved: a fixture matcher on ${caller.x} holds the caller's value.
    fixtures = resolve(scen.model_dump(mode="json")["fixtures"], scen.brief.known_facts, scen.hidden_state)
    values += _leaves(fixtures, "fixtures")
    out = []
    for path, v in values:
        s = identifying(v)
        if s is not None and s not in vocab and s in text:
            out.append(f"{path}: {s}")
    return out


def test_no_hidden_value_in_agent_level_text(bundle: Bundle) -> None:
    found = {s.id: hits for a, s in bundle.scenarios() if (hits := leaks(a, s))}
    assert found == {}


def test_leak_finder_finds_the_known_leaks(bundle: Bundle) -> None:
    """The audit above finds a hidden value put back into a document or a tool schema."""
    agent, scen = bundle.scenario("bank_duplicate_charge_dispute")
    planted = agent.model_copy(deep=True)
    planted.instructions_template += "\nFor example DSP26031100418 is read in groups.\n"
    found = leaks(planted, scen)
    assert "hidden_state.dispute_reference: DSP26031100418" in found
    assert "fixtures.raise_dispute.queue.0.response.dispute_reference: DSP26031100418" in found
    assert all(f.endswith(": DSP26031100418") for f in found)
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

FLOOR_MEAN = 0.10
FLOOR_MAX = 0.25
"""Issue 17: a do-nothing agent meets at most 10% of the action-check weight on average over the
bundle's scenarios, and at most 25% in any one scenario."""


async def _floor_share(bundle: Bundle, agent: LoadedAgent, scen: Scenario, spec: str) -> float:
    """Share of the applicable action-check weight that candidate ``spec`` meets in a whole episode
    with the plan-following caller (guarded checks whose guards are unmet are not applicable)."""
    trace = await run_episode(
        agent, scen,
        candidate=create_scripted(spec, None, bundle),
        caller=create_scripted("scripted:plan", None, bundle),
        bundle_name=bundle.meta.name, bundle_version=bundle.meta.version, bundle_hash=bundle.content_hash,
        episode_id=f"{scen.id}-{spec}", run_seed=20260314, repeat=0,
    )
    calls = [CallRecord(index=e.index, name=e.name, arguments=e.arguments) for e in trace.tool_events]
    weight = {c.id: c.importance for c in scen.action_checks}
    applicable = [r for r in evaluate_checks(scen, calls) if r.applicable]
    total = sum(weight[r.id] for r in applicable)
    return sum(weight[r.id] for r in applicable if r.met) / total if total else 0.0


@pytest.mark.parametrize("spec", ["scripted:hangup", "scripted:talk"])
async def test_do_nothing_floor(bundle: Bundle, spec: str) -> None:
    shares = {s.id: await _floor_share(bundle, a, s, spec) for a, s in bundle.scenarios()}
    assert len(shares) == len(bundle.scenarios()) > 0
    worst = max(shares, key=lambda k: shares[k])
    assert statistics.mean(shares.values()) <= FLOOR_MEAN, statistics.mean(shares.values())
    assert shares[worst] <= FLOOR_MAX, (worst, shares[worst])


async def test_floor_counts_unguarded_negatives(bundle: Bundle) -> None:
    """The measure above is not vacuous: without their guards, the paper's example scenario's
    negative checks give a hang-up agent a share of the weight."""
    agent, scen = bundle.scenario("dairy_zero_supply_mastitis")
    bare = scen.model_copy(deep=True)
    for c in bare.action_checks:
        c.applies_after = []
    assert await _floor_share(bundle, agent, scen, "scripted:hangup") == 0.0
    assert await _floor_share(bundle, agent, bare, "scripted:hangup") > FLOOR_MAX


def test_every_scenario_has_provenance_at_its_current_hash(bundle: Bundle) -> None:
    """issue 17: the starter records how each scenario was made and reviewed (provenance.yaml), and
    each record is for the scenario file as it is now."""
    from callbench.bundle.provenance import load_provenance
    from callbench.bundle.validate import scenario_files

    root = Path(bundle.root)
    problems: list[Any] = []
    prov = load_provenance(root, problems)
    assert prov is not None and problems == []
    assert set(prov.scenarios) == {s.id for _, s in bundle.scenarios()}
    assert audit_provenance(root, scenario_files(bundle)) == []
