"""callbench's verdicts on perturbed tau2 trajectories (the shipped ten-task fixture), held to the
database verdicts: the outcome agrees with the database check on every trajectory, a pass never
goes to a wrong database, and an ordering slip is one miss.

The expected database verdicts were written down from one run of
:func:`callbench.importers.tau2.perturb.verdicts` on this fixture; ``benchmarks/tau2_verdicts.py``
checks the same kinds against tau2-bench's own evaluator where tau2-bench is installed
(docs/peers.md, "Verdicts against tau2's evaluator")."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from callbench.bundle.validate.audits import load_bundle
from callbench.importers.tau2 import import_tau2
from callbench.importers.tau2.perturb import KINDS, Verdict, perturb, verdicts

SRC = Path(__file__).resolve().parent / "data" / "tau2"

# (task, kind) -> the final database equals the gold one
EXPECTED = {
    ('000', 'gold'): True,
    ('000', 'drop_last_write'): False,
    ('000', 'change_argument'): False,
    ('000', 'extra_write'): False,
    ('000', 'extra_read'): True,
    ('000', 'repeated_write'): True,
    ('000', 'reordered_item_list'): True,
    ('002', 'gold'): True,
    ('002', 'drop_last_write'): False,
    ('002', 'change_argument'): False,
    ('002', 'extra_read'): True,
    ('002', 'repeated_write'): True,
    ('002', 'reordered_item_list'): True,
    ('020', 'gold'): True,
    ('020', 'drop_last_write'): False,
    ('020', 'change_argument'): False,
    ('020', 'extra_read'): True,
    ('020', 'repeated_write'): True,
    ('022', 'gold'): True,
    ('022', 'drop_last_write'): False,
    ('022', 'change_argument'): True,
    ('022', 'swap_independent_writes'): True,
    ('022', 'extra_read'): True,
    ('022', 'repeated_write'): True,
    ('024', 'gold'): True,
    ('024', 'extra_read'): True,
    ('050', 'gold'): True,
    ('050', 'extra_read'): True,
    ('081', 'gold'): True,
    ('081', 'drop_last_write'): False,
    ('081', 'change_argument'): False,
    ('081', 'extra_write'): False,
    ('081', 'swap_independent_writes'): True,
    ('081', 'extra_read'): True,
    ('081', 'repeated_write'): True,
    ('105', 'gold'): True,
    ('105', 'drop_last_write'): True,
    ('105', 'change_argument'): True,
    ('105', 'extra_write'): False,
    ('105', 'extra_read'): True,
    ('105', 'repeated_write'): True,
    ('105', 'reordered_item_list'): True,
    ('109', 'gold'): True,
    ('109', 'drop_last_write'): False,
    ('109', 'change_argument'): False,
    ('109', 'swap_independent_writes'): True,
    ('109', 'extra_read'): True,
    ('109', 'repeated_write'): True,
    ('111', 'gold'): True,
    ('111', 'drop_last_write'): False,
    ('111', 'change_argument'): False,
    ('111', 'extra_write'): False,
    ('111', 'swap_independent_writes'): True,
    ('111', 'extra_read'): True,
    ('111', 'repeated_write'): True,
}


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> list[Verdict]:
    out = tmp_path_factory.mktemp("tau2v") / "retail"
    import_tau2(SRC, out)
    return asyncio.run(verdicts(load_bundle(out)))


def test_every_kind_is_exercised_and_matches_the_written_verdicts(table: list[Verdict]) -> None:
    got = {(v.scenario_id[-3:], v.kind): v.db_ok for v in table}
    assert got == EXPECTED
    assert {v.kind for v in table} == set(KINDS)


def test_the_outcome_is_the_database_verdict(table: list[Verdict]) -> None:
    assert [(v.scenario_id, v.kind) for v in table if v.outcome_met is not v.db_ok] == []


def test_a_wrong_database_never_passes_but_did_under_the_papers_rule(table: list[Verdict]) -> None:
    assert [(v.scenario_id, v.kind) for v in table if v.passed and not v.db_ok] == []
    wrong_paper = Counter(v.kind for v in table if v.passed_overall_rule and not v.db_ok)
    # the flaw the outcome gate closes: every extra write passed on the overall score alone
    assert wrong_paper["extra_write"] == sum(1 for v in table if v.kind == "extra_write") == 4
    assert sum(wrong_paper.values()) == 11


def test_order_free_changes_keep_every_check(table: list[Verdict]) -> None:
    for v in table:
        if v.kind in ("swap_independent_writes", "reordered_item_list", "extra_read", "gold"):
            assert (v.missed, v.passed, v.overall) == ([], True, 100.0), v


def test_a_slip_is_counted_once(table: list[Verdict]) -> None:
    """Changing the first of two writes on one record fails that write's check; the later write on
    the same record (its own call exact) is 'not reached', not a second argument error."""
    v = next(v for v in table if v.scenario_id.endswith("109") and v.kind == "change_argument")
    assert v.missed == ["gold_0_modify_pending_order_address", "gold_2_modify_pending_order_items",
                        "final_state"]
    assert v.not_reached == ["gold_2_modify_pending_order_items"]


def test_perturb_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown perturbation 'nope'"):
        perturb("nope", None, [])  # type: ignore[arg-type]
