"""``callbench import tau2`` on the shared tau2-bench retail data (issue 29 items 3 and 4): the
bundle validates and audits clean, the gold replay meets every action check and the state check
on every task, the source quirks are kept and tested as such, and bad input gets a one-line error.

The data is in ``shared/peers/tau2`` beside the repository (``../shared`` from the clone); these
tests skip when it is absent."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.audit.core import audit_bundle
from callbench.bundle.loader import load_bundle
from callbench.bundle.models import Bundle
from callbench.bundle.state_check import replay_reference
from callbench.bundle.validate import validate_path
from callbench.cli import app
from callbench.importers.tau2 import Tau2ImportError, import_tau2
from callbench.importers.tau2.bundle import ImportSummary
from callbench.importers.tau2.tools import WRITE_TOOLS
from callbench.runs import episode_files

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = [REPO / ".." / "shared" / "peers" / "tau2", Path("/work/shared/peers/tau2")]
SRC = next((p for p in CANDIDATES if (p / "retail" / "db.json").is_file()), None)
N_FAILING = 15  # tasks whose gold path has at least one action that fails (measured on a2c0247)
pytestmark = pytest.mark.skipif(SRC is None, reason="tau2-bench data not found at ../shared/peers/tau2")


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[ImportSummary, Bundle]:
    assert SRC is not None
    out = tmp_path_factory.mktemp("tau2") / "retail-bundle"
    summary = import_tau2(SRC, out)
    assert (summary.scenarios, summary.hard + summary.medium) == (114, 114)
    return summary, load_bundle(out)  # raises BundleError unless callbench validate finds no problem


@pytest.fixture(scope="module")
def bundle(imported: tuple[ImportSummary, Bundle]) -> Bundle:
    return imported[1]


def scen(bundle: Bundle, task: int):
    return bundle.scenario(f"tau2_retail_{task:03d}")


def test_bundle_shape(bundle: Bundle) -> None:
    agent, s = scen(bundle, 0)
    assert len(agent.config.tools) == 16 and agent.config.state is not None  # tools.json lists 16
    assert agent.instructions_template.startswith("# Retail agent policy")
    assert len(agent.state_tables["orders"]) == 1000 and len(agent.state_tables["users"]) == 500
    assert [c.tool for c in s.action_checks] == ["exchange_delivered_order_items"]
    assert s.action_checks[0].args["item_ids"].model_dump()["eq"] == ["1151293680", "4983901480"]
    assert s.state_checks[0].id == "final_state" and s.hidden_state["user"]["user_id"] == "yusuf_rossi_9620"
    assert s.brief.known_facts["what_you_know"] == "You are Yusuf Rossi in zip code 19122."
    assert s.channel.seeded_noise and s.language == "en-US"
    # known facts: what tau2's user is told about itself, plus the record values its request names
    # (so the isolation audit passes and the seeded noise keeps the rest of the request to garble)
    _, s111 = scen(bundle, 111)
    assert s111.brief.known_facts == {
        "what_you_know": "You name is Yara Silva and your zip code is 77159.",
        "details_in_your_instructions": ["Laptop", "black", "grey", "leather"],
    }
    prov = (Path(bundle.root) / "provenance.yaml").read_text()
    assert "made: imported" in prov and "commit: a2c0247" in prov and "task_id: '113'" in prov
    assert (Path(bundle.root) / "LICENSE-tau2-bench").is_file()


@pytest.mark.slow  # every tau2 task replayed and audited: about 15 s at load 7
async def test_gold_replay_meets_every_check_on_every_task_and_audits_clean(bundle: Bundle) -> None:
    report = await audit_bundle(bundle)
    # tau2's gold actions leave out the lookups before writes (207 non-causal reference values before
    # the importer inserted them, issue 29): the reference paths are now causal, and nothing is found
    assert report.problems == []
    assert len(report.scenarios) == 114
    unmet = [s.scenario_id for s in report.scenarios if not s.reference_met]
    assert unmet == []
    checks = sum(len(s.reference.checks) for s in report.scenarios if s.reference is not None)
    state = [c for s in report.scenarios if s.reference for c in s.reference.checks if c.id == "final_state"]
    assert len(state) == 114 and all(c.label == "met" for c in state) and checks >= 114 + 100
    assert report.null_floor.candidates["scripted:hangup"].max == 0.0


def _gold(task: dict) -> list[tuple[str, dict]]:
    return [(a["name"], a.get("arguments") or {}) for a in task["evaluation_criteria"]["actions"]]


def test_reference_paths_are_the_gold_actions_plus_lookups(imported: tuple[ImportSummary, Bundle]) -> None:
    """The importer inserts only reads into the reference path: every task's gold writes are there
    with tau2's arguments in tau2's order, every gold read is kept, and the action checks are the
    gold writes that succeed (the state check compares with this path's replay, tested above)."""
    assert SRC is not None
    summary, bundle = imported
    tasks = {str(t["id"]): t for t in json.loads((SRC / "retail" / "tasks.json").read_text())}
    reads = {"find_user_id_by_name_zip", "find_user_id_by_email", "get_user_details", "get_order_details",
             "get_product_details", "list_all_product_types"}
    for _, s in bundle.scenarios():
        gold = _gold(tasks[s.title.rsplit(" ", 1)[-1]])
        path = [(c.name, c.arguments) for t in s.reference_path for c in t.tool_calls]
        gold_writes = [g for g in gold if g[0] in WRITE_TOOLS]
        assert [p for p in path if p[0] in WRITE_TOOLS] == gold_writes, s.id
        assert all(g in path for g in gold), s.id  # no gold read dropped
        extra = list(path)
        for g in gold:
            extra.remove(g)
        assert {name for name, _ in extra} <= reads, s.id
        for c in s.action_checks:  # each gold write check holds the source's arguments
            if (m := re.match(r"gold_([0-9]+)_", c.id)) is not None:
                name, args = gold[int(m.group(1))]
                assert c.tool == name and {
                    k: next(iter(v.model_dump(exclude_defaults=True).values())) for k, v in c.args.items()
                } == args, (s.id, c.id)
    # the figures of this import (measured on a2c0247): lookups inserted, values the user's
    # instructions give (now known facts), and the one value no record holds (tasks 2-4 look up a
    # product id that does not exist; tau2's gold read fails on purpose, kept)
    assert (summary.lookups.inserted, summary.lookups.told) == (160, 15)  # 15 of them by email
    assert [u.split(":")[0] for u in summary.lookups.unresolved] == [
        "tau2_retail_002", "tau2_retail_003", "tau2_retail_004"
    ]
    assert all("product_id = '6086499569' (get_product_details)" in u for u in summary.lookups.unresolved)
    _, s81 = scen(bundle, 81)  # the caller gives an email and the gold list has no lookup at all
    calls = [(c.name, c.arguments) for t in s81.reference_path for c in t.tool_calls]
    assert calls[:3] == [
        ("find_user_id_by_email", {"email": "james.kim1995@example.com"}),
        ("get_user_details", {"user_id": "james_kim_7213"}),
        ("cancel_pending_order", {"order_id": "#W3289292", "reason": "no longer needed"}),
    ]
    _, s22 = scen(bundle, 22)  # the new address tau2's user is told to give: a known fact now
    assert s22.brief.known_facts["details_in_your_instructions"][-2:] == ["101 Highway", "10001"]
    _, s109 = scen(bundle, 109)  # the new address is another order's: looked up, not told
    assert "592 Elm Avenue" not in str(s109.brief.known_facts)
    assert ("get_order_details", {"order_id": "#W1092119"}) in [
        (c.name, c.arguments) for t in s109.reference_path for c in t.tool_calls
    ]


def test_item_price_quirk_tasks(bundle: Bundle) -> None:
    """Tasks 20, 21, 36, 37, 100: several items changed in one call all take the last new item's
    price and options in the gold state (the source tool's behaviour, kept)."""
    for task in (20, 21, 36, 37, 100):
        agent, s = scen(bundle, task)
        assert "tau2_quirk_item_price" in s.tags
        store = replay_reference(agent, s)
        modified = [o for o in store.touched["orders"].values() if o["status"] == "pending (item modified)"]
        assert modified, task
        for order in modified:
            base = agent.state_tables["orders"][order["order_id"]]
            changed = [
                i for i, b in zip(order["items"], base["items"], strict=True) if i["item_id"] != b["item_id"]
            ]
            if len(changed) > 1:
                assert len({i["price"] for i in changed}) == 1, task
                assert len({json.dumps(i["options"], sort_keys=True) for i in changed}) == 1, task


def test_gold_actions_that_fail_on_purpose(bundle: Bundle) -> None:
    """Gold actions the source expects to fail (an order or product that does not exist, an
    exchange on an order that is not delivered, a gift card that cannot pay) get the same error
    here; a failing gold write is not an action check and the state check expects no change."""
    failing = sorted(s.id for _, s in bundle.scenarios() if "gold_action_fails" in s.tags)
    writes = sorted(s.id for _, s in bundle.scenarios() if "gold_write_fails" in s.tags)
    assert writes == ["tau2_retail_064", "tau2_retail_105"]
    assert set(writes) <= set(failing) and len(failing) == N_FAILING
    for sid in writes:
        agent, s = bundle.scenario(sid)
        assert "which fails; nothing changes" in s.goal
        assert not [c for c in s.action_checks if c.tool == "exchange_delivered_order_items"]
    agent, s105 = scen(bundle, 105)  # its one gold write: an exchange the gift card cannot pay for
    assert replay_reference(agent, s105).touched == {}
    assert [c.id for c in s105.action_checks] == ["authenticates"]
    assert s105.state_checks[0].applies_after == ["authenticates"]


def test_tasks_without_gold_writes_guard_the_state_check(bundle: Bundle) -> None:
    for task in (24, 57):  # no gold action at all: the caller's known facts identify them
        _, s = scen(bundle, task)
        auth = s.action_checks[0]
        assert auth.id == "authenticates" and auth.tool == "find_user_id_by_name_zip"
        assert s.state_checks[0].applies_after == ["authenticates"]
        assert s.reference_path[1].tool_calls[0].name == "find_user_id_by_name_zip"
    _, s50 = scen(bundle, 50)  # only a transfer: guarded too, and it ends the call
    assert [c.id for c in s50.action_checks] == ["authenticates", "gold_transfer"]
    assert s50.action_checks[1].applies_after == ["authenticates"]
    assert s50.reference_path[-1].tool_calls[-1].name == "transfer_to_human_agents"


def _fake_source(tmp: Path, tasks: object) -> Path:
    assert SRC is not None
    src = tmp / "src"
    (src / "retail").mkdir(parents=True)
    for f in ("db.json", "policy.md", "tools.json"):
        (src / "retail" / f).symlink_to((SRC / "retail" / f).resolve())
    (src / "retail" / "tasks.json").write_text(json.dumps(tasks) if not isinstance(tasks, str) else tasks)
    return src


def test_bad_input_gets_a_one_line_error(tmp_path: Path) -> None:
    assert SRC is not None
    real = json.loads((SRC / "retail" / "tasks.json").read_text())
    bad_tool = json.loads(json.dumps(real[:2]))
    bad_tool[1]["evaluation_criteria"]["actions"][0]["name"] = "refund_everything"
    cases = [
        (
            _fake_source(tmp_path / "a", bad_tool),
            "task 1: evaluation_criteria.actions.0: unknown tool 'refund_everything'",
        ),
        (_fake_source(tmp_path / "b", "[{"), "tasks.json: invalid JSON at line 1"),
        (_fake_source(tmp_path / "c", {"not": "a list"}), "tasks.json: expected a list of tasks"),
        (_fake_source(tmp_path / "d", [{"id": "9"}]), "task 9: missing field 'user_scenario'"),
        (tmp_path / "none", "none/retail: no such folder"),
    ]
    for src, message in cases:
        with pytest.raises(Tau2ImportError) as e:
            import_tau2(src, tmp_path / "out")
        assert message in str(e.value) and "\n" not in str(e.value)
        assert not (tmp_path / "out").exists()  # nothing half-written
    with pytest.raises(Tau2ImportError, match="only retail can be imported"):
        import_tau2(SRC, tmp_path / "out", domain="airline")


def test_cli_import_then_run_and_report(tmp_path: Path) -> None:
    assert SRC is not None
    src = _fake_source(tmp_path, json.loads((SRC / "retail" / "tasks.json").read_text())[:3])
    shutil.copyfile(SRC / "LICENSE", src / "LICENSE")
    runner = CliRunner()
    out = tmp_path / "retail-bundle"
    res = runner.invoke(app, ["import", "tau2", str(src), "--out", str(out)])
    assert res.exit_code == 0 and "3 scenario(s)" in res.output
    # task 2's gold lookup of a product id no record has is listed, located, as a value with no source
    assert "1 value(s) with no source" in res.output
    where = "tau2_retail_002: reference_path.1.tool_calls.9.arguments.product_id = '6086499569'"
    assert f"no source: {where}" in res.output
    again = runner.invoke(app, ["import", "tau2", str(src), "--out", str(out)])
    assert again.exit_code == 2 and "already exists" in again.output
    assert validate_path(out)[1] == []
    run = runner.invoke(
        app,
        [
            "run",
            str(out),
            "--candidate",
            "scripted:reference",
            "--caller",
            "scripted:plan",
            "--task-judge",
            "scripted:met",
            "--conversation-judge",
            "scripted:met",
            "--out",
            str(tmp_path / "run"),
            "--no-preflight",
        ],
    )
    assert run.exit_code == 0, run.output
    html = tmp_path / "report.html"
    rep = runner.invoke(app, ["report", str(tmp_path / "run"), "--html", str(html)])
    assert rep.exit_code == 0 and "100.0" in rep.output
    page = html.read_text()  # the trace viewer lists each call's state changes
    assert "orders[#W2378156].status: &#34;delivered&#34; -&gt; &#34;exchange requested&#34;" in page
    trace = json.loads(episode_files.read_text(next((tmp_path / "run" / "traces").glob("*tau2_retail_000*"))))
    assert trace["state"]["final"]["orders"]["#W2378156"]["status"] == "exchange requested"
