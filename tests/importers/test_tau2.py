"""``callbench import tau2``: the bundle validates and audits clean, the gold replay meets every
action check and the state check on every task, the source quirks are kept and tested as such,
a tau2-bench checkout, a data folder and a domain folder are all accepted, and bad input gets a
one-line error.

The data is the small fixture in ``tests/importers/data/tau2`` (ten retail tasks of tau2-bench
with the records they touch; its README says where it comes from). The figures of the whole retail
domain (114 tasks) are checked by ``test_whole_retail_domain`` when ``CALLBENCH_TAU2_DATA`` names a
tau2-bench checkout (or its data folder); it skips otherwise."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.audit.core import audit_bundle
from callbench.bundle.models import Bundle
from callbench.bundle.state.check import replay_reference
from callbench.bundle.validate.audits import load_bundle, validate_path
from callbench.cli import app
from callbench.importers.tau2 import Tau2ImportError, import_tau2
from callbench.importers.tau2.bundle import ImportSummary
from callbench.importers.tau2.tools import WRITE_TOOLS
from callbench.runfolder import episode_files

SRC = Path(__file__).resolve().parent / "data" / "tau2"
TASKS = ["0", "2", "20", "22", "24", "50", "81", "105", "109", "111"]  # the fixture's tasks
FAILING = ["tau2_retail_002", "tau2_retail_105"]  # gold paths with an action that fails on purpose
FULL = os.environ.get("CALLBENCH_TAU2_DATA")


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[ImportSummary, Bundle]:
    out = tmp_path_factory.mktemp("tau2") / "retail-bundle"
    summary = import_tau2(SRC, out)
    assert (summary.scenarios, summary.hard, summary.medium) == (10, 7, 3)
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
    # the fixture's trimmed database (the whole domain has 1,000 orders and 500 users)
    assert len(agent.state_tables["orders"]) == 94 and len(agent.state_tables["users"]) == 37
    assert [c.tool for c in s.action_checks] == ["exchange_delivered_order_items"]
    assert s.action_checks[0].args["item_ids"].model_dump()["contains"] == ["1151293680", "4983901480"]
    assert s.action_checks[0].args["item_ids"].model_dump()["exactly"] is True  # tau2 sorts the list
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
    assert "made: imported" in prov and "commit: a2c0247" in prov and "task_id: '111'" in prov
    assert (Path(bundle.root) / "LICENSE-tau2-bench").read_text().startswith("MIT License")
    # the fixture has no tools.json (tau2-bench keeps its tools in Python): the packaged facts serve
    assert [t.name for t in agent.config.tools][:3] == [
        "calculate", "cancel_pending_order", "exchange_delivered_order_items"
    ]
    assert "split_test" in s111.tags and "split_train" in s.tags


@pytest.mark.slow  # every tau2 task replayed and audited: about 15 s at load 7
async def test_gold_replay_meets_every_check_on_every_task_and_audits_clean(bundle: Bundle) -> None:
    report = await audit_bundle(bundle)
    # tau2's gold actions leave out the lookups before writes; the importer inserts them, so the
    # reference paths are causal and the audit finds nothing
    assert report.problems == []
    assert len(report.scenarios) == 10
    unmet = [s.scenario_id for s in report.scenarios if not s.reference_met]
    assert unmet == []
    checks = sum(len(s.reference.checks) for s in report.scenarios if s.reference is not None)
    state = [c for s in report.scenarios if s.reference for c in s.reference.checks if c.id == "final_state"]
    assert len(state) == 10 and all(c.label == "met" for c in state) and checks == 28
    assert report.null_floor.candidates["scripted:hangup"].max == 0.0


def _gold(task: dict) -> list[tuple[str, dict]]:
    return [(a["name"], a.get("arguments") or {}) for a in task["evaluation_criteria"]["actions"]]


def test_reference_paths_are_the_gold_actions_plus_lookups(imported: tuple[ImportSummary, Bundle]) -> None:
    """The importer inserts only reads into the reference path: every task's gold writes are there
    with tau2's arguments in tau2's order, every gold read is kept, and the action checks are the
    gold writes that succeed (the state check compares with this path's replay, tested above)."""
    summary, bundle = imported
    tasks = {str(t["id"]): t for t in json.loads((SRC / "retail" / "tasks.json").read_text())}
    assert sorted(tasks, key=int) == TASKS
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
    # the figures of this import: lookups inserted, values the user's instructions give (now known
    # facts), and the one value no record holds (task 2 looks up a product id that does not exist;
    # tau2's gold read fails on purpose, kept)
    assert (summary.lookups.inserted, summary.lookups.told) == (13, 2)
    assert [u.split(":")[0] for u in summary.lookups.unresolved] == ["tau2_retail_002"]
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
    """Task 20 (like 21, 36, 37 and 100 of the whole domain): several items changed in one call all
    take the last new item's price and options in the gold state (the source tool's behaviour,
    kept)."""
    quirky = sorted(s.id for _, s in bundle.scenarios() if "tau2_quirk_item_price" in s.tags)
    assert quirky == ["tau2_retail_020"]
    for task in (20,):
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
    assert writes == ["tau2_retail_105"]  # 064 and 105 in the whole domain
    assert failing == FAILING
    for sid in writes:
        agent, s = bundle.scenario(sid)
        assert "which fails; nothing changes" in s.goal
        assert not [c for c in s.action_checks if c.tool == "exchange_delivered_order_items"]
    agent, s105 = scen(bundle, 105)  # its one gold write: an exchange the gift card cannot pay for
    assert replay_reference(agent, s105).touched == {}
    assert [c.id for c in s105.action_checks] == ["authenticates"]
    assert s105.state_checks[0].applies_after == ["authenticates"]


def test_tasks_without_gold_writes_guard_the_state_check(bundle: Bundle) -> None:
    # no gold action at all (24 and 57 in the whole domain): the caller's known facts identify them
    for task in (24,):
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
    src = tmp / "src"
    (src / "retail").mkdir(parents=True)
    for f in ("db.json", "policy.md"):
        (src / "retail" / f).symlink_to((SRC / "retail" / f).resolve())
    (src / "retail" / "tasks.json").write_text(json.dumps(tasks) if not isinstance(tasks, str) else tasks)
    return src


def test_bad_input_gets_a_one_line_error(tmp_path: Path) -> None:
    real = json.loads((SRC / "retail" / "tasks.json").read_text())
    bad_tool = json.loads(json.dumps(real[:2]))
    bad_tool[1]["evaluation_criteria"]["actions"][0]["name"] = "refund_everything"
    cases = [
        (
            _fake_source(tmp_path / "a", bad_tool),
            "task 2: evaluation_criteria.actions.0: unknown tool 'refund_everything'",
        ),
        (_fake_source(tmp_path / "b", "[{"), "tasks.json: invalid JSON at line 1"),
        (_fake_source(tmp_path / "c", {"not": "a list"}), "tasks.json: expected a list of tasks"),
        (_fake_source(tmp_path / "d", [{"id": "9"}]), "task 9: missing field 'user_scenario'"),
        (tmp_path / "none", "none: no such folder (expected a tau2-bench checkout"),
        (tmp_path / "a", "a: no tau2-bench retail data here (looked for"),
    ]
    for src, message in cases:
        with pytest.raises(Tau2ImportError) as e:
            import_tau2(src, tmp_path / "out")
        assert message in str(e.value) and "\n" not in str(e.value)
        assert not (tmp_path / "out").exists()  # nothing half-written
    with pytest.raises(Tau2ImportError, match="only retail can be imported"):
        import_tau2(SRC, tmp_path / "out", domain="airline")


def test_cli_import_then_run_and_report(tmp_path: Path) -> None:
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


def _checkout(tmp: Path) -> Path:
    """A folder shaped like a clone of sierra-research/tau2-bench: LICENSE at the root, the domain's
    files in data/tau2/domains/retail/, no tools.json (tau2-bench's tools are Python code)."""
    root = tmp / "tau2-bench"
    ddir = root / "data" / "tau2" / "domains" / "retail"
    ddir.mkdir(parents=True)
    for f in ("db.json", "policy.md", "tasks.json", "split_tasks.json"):
        shutil.copyfile(SRC / "retail" / f, ddir / f)
    shutil.copyfile(SRC / "LICENSE", root / "LICENSE")
    (root / "src" / "tau2").mkdir(parents=True)  # the code a checkout also holds, not read
    return root


def test_a_checkout_and_a_domain_folder_import_the_same_bundle(
    tmp_path: Path, imported: tuple[ImportSummary, Bundle]
) -> None:
    root = _checkout(tmp_path)
    res = CliRunner().invoke(app, ["import", "tau2", str(root), "--out", str(tmp_path / "from-checkout")])
    assert res.exit_code == 0 and "10 scenario(s) (7 hard, 3 medium)" in res.output, res.output
    summary = import_tau2(root / "data" / "tau2" / "domains" / "retail", tmp_path / "from-domain")
    assert summary.scenarios == 10
    reference = Path(imported[1].root)
    for out in (tmp_path / "from-checkout", tmp_path / "from-domain"):
        assert sorted(p.name for p in (out / "agents" / "tau2_retail" / "scenarios").iterdir()) == [
            f"tau2_retail_{int(t):03d}.yaml" for t in TASKS
        ]
        for rel in ("agents/tau2_retail/agent.yaml", "agents/tau2_retail/scenarios/tau2_retail_000.yaml",
                    "provenance.yaml"):
            assert (out / rel).read_bytes() == (reference / rel).read_bytes(), (out, rel)
    # the checkout's LICENSE is found at its root; a domain folder alone has none beside it
    assert (tmp_path / "from-checkout" / "LICENSE-tau2-bench").read_text().startswith("MIT License")
    assert not (tmp_path / "from-domain" / "LICENSE-tau2-bench").exists()


@pytest.mark.skipif(not FULL, reason="CALLBENCH_TAU2_DATA (a tau2-bench checkout) is not set")
async def test_whole_retail_domain(tmp_path: Path) -> None:
    """The whole retail domain at commit a2c0247: 114 tasks, every gold replay meets its checks,
    the audit is clean, and the lookup figures measured on it hold."""
    assert FULL is not None
    summary = import_tau2(FULL, tmp_path / "retail-bundle")
    assert (summary.scenarios, summary.hard + summary.medium) == (114, 114)
    assert (summary.lookups.inserted, summary.lookups.told) == (160, 15)
    assert [u.split(":")[0] for u in summary.lookups.unresolved] == [
        "tau2_retail_002", "tau2_retail_003", "tau2_retail_004"
    ]
    bundle = load_bundle(tmp_path / "retail-bundle")
    report = await audit_bundle(bundle)
    assert report.problems == [] and len(report.scenarios) == 114
    assert [s.scenario_id for s in report.scenarios if not s.reference_met] == []
    failing = sorted(s.id for _, s in bundle.scenarios() if "gold_action_fails" in s.tags)
    assert len(failing) == 15


def _record_of(check) -> str:
    args = check.args
    key = "order_id" if "order_id" in args else "user_id"
    return f"{key}={args[key].model_dump().get('eq')}"


def test_gold_writes_are_ordered_only_within_one_record(bundle: Bundle) -> None:
    """tau2's DB check cannot see the order of changes to different orders, and its policy asks for
    none: an ``after`` joins only writes on the same record; writes on different records are free."""
    unordered_pairs = 0
    for agent in bundle.agents.values():
        for s in agent.scenarios:
            writes = [c for c in s.action_checks if c.tool in WRITE_TOOLS]
            by_id = {c.id: c for c in writes}
            for c in writes:
                for dep in c.after:
                    assert _record_of(by_id[dep]) == _record_of(c), (s.id, c.id, dep)
            unordered_pairs += sum(
                1 for i, a in enumerate(writes) for b in writes[i + 1:]
                if _record_of(a) != _record_of(b) and a.id not in b.after
            )
    assert unordered_pairs >= 1  # the fixture holds tasks with writes on two different orders
