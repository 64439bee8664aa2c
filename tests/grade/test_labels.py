"""Labelling sheets and human grade sets, end to end on a scripted run of the dairy test bundle,
then judge-human agreement through ``callbench agreement``."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callbench.bundle.validate.audits import load_bundle
from callbench.cli import app
from callbench.grade.labels import COLUMNS
from callbench.grade.store import load_episode_grades, load_grade_set, read_run_manifest
from callbench.runs.session import run_and_grade

from ..runs.conftest import DAIRY, scripted_clients, scripted_config


@pytest.fixture
async def graded_run(tmp_path: Path) -> tuple[Path, str]:
    bundle = load_bundle(DAIRY)
    config = scripted_config(tmp_path / "run", repeats=2)
    _manifest, gid = await run_and_grade(config, clients=scripted_clients(config, bundle), bundle=bundle)
    assert gid is not None
    return tmp_path / "run", gid


def read_sheet(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"), newline="")))


def write_sheet(path: Path, rows: list[dict[str, str]]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    path.write_text(buf.getvalue(), encoding="utf-8")


def test_export_import_and_agreement(graded_run: tuple[Path, str], tmp_path: Path) -> None:
    run_dir, gid = graded_run
    sheet = tmp_path / "sheet.csv"
    res = CliRunner().invoke(app, ["labels", "export", str(run_dir), "--out", str(sheet)])
    assert res.exit_code == 0, res.output
    rows = read_sheet(sheet)
    assert list(rows[0]) == COLUMNS
    judge = load_episode_grades(run_dir, gid)
    expected = sum(
        1 for g in judge for i in g.items if i.source != "action_check" and i.label != "not_applicable"
    )
    assert len(rows) == expected and all(r["label"] == "" for r in rows)
    crit = [r for r in rows if r["kind"] == "criterion"]
    assert len(crit) == 2 and {r["item_id"] for r in crit} == {"crit_no_pressure"}
    assert crit[0]["statement"].startswith("The agent accepts the zero estimate")
    assert "partial: Asks once whether some milk is possible." in crit[0]["anchors"]
    assert "[1] assistant: Hello, this is the Anand Dairy Cooperative" in crit[0]["transcript"]
    assert all(r["source_grade_set"] == gid for r in rows)
    ratings = [r for r in rows if r["kind"] == "rating"]
    assert ratings and all(r["anchors"].startswith("1: ") for r in ratings)
    # the judge's labels and reasons stay out of the sheet
    reasons = {i.reason for g in judge for i in g.items if i.source != "action_check" and i.reason}
    assert reasons and not any(reason in sheet.read_text(encoding="utf-8") for reason in reasons)

    # label: the criterion partial in repeat 0 and met in repeat 1; every rating 5 but one 4
    for r in rows:
        if r["kind"] == "criterion":
            r["label"] = "partial" if r["episode_id"].endswith("--r0") else "met"
        else:
            r["label"] = "5"
    ratings[0]["label"] = "4"
    write_sheet(sheet, rows)
    res = CliRunner().invoke(app, ["labels", "import", str(run_dir), str(sheet)])
    assert res.exit_code == 0, res.output
    hid = res.stdout.strip().splitlines()[0]
    gs = load_grade_set(run_dir, hid)
    assert gs.kind == "human" and gs.source_grade_set == gid and gs.task_judge.spec.startswith("human:")
    assert hid not in read_run_manifest(run_dir).grade_sets  # the report keeps the judge grades
    human = {g.episode_id: g for g in load_episode_grades(run_dir, hid)}
    assert len(human) == 2
    r0 = next(g for e, g in human.items() if e.endswith("--r0"))
    item = next(i for i in r0.items if i.id == "crit_no_pressure")
    assert item.label == "partial" and item.r == 0.5 and item.reason == "human label"
    assert r0.overall is not None  # every judged item labelled: scored

    out = CliRunner().invoke(
        app, ["agreement", str(run_dir), "--grade-set", gid, "--grade-set", hid, "--json", "--samples", "200"]
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    # judge: met, met; human: partial, met -> p_o = 0.5, p_e = 1 * 0.5 -> kappa 0
    assert data["criteria"]["n"] == 2 and data["criteria"]["percent_agreement"] == 50.0
    assert data["criteria"]["kappa"] == pytest.approx(0.0)
    n_ratings = len(ratings)
    assert data["ratings"]["n"] == n_ratings
    assert data["ratings"]["percent_agreement"] == pytest.approx(100 * (n_ratings - 1) / n_ratings)
    # the judge gave every rating 5: any disagreement is all chance disagreement -> kappa 0
    assert data["ratings"]["weighted_kappa"] == pytest.approx(0.0)
    assert data["ratings"]["weights"] == "quadratic"
    assert set(data["by_pillar"]) == {"conversation"}
    assert "policy_compliance" in data["by_diagnostic"]
    assert data["by_diagnostic"]["policy_compliance"]["criteria"]["n"] == 2
    assert data["excluded"]["items_only_in_a"] == 0

    # unique prefixes name grade sets; the terminal says who produced each
    text = CliRunner().invoke(
        app,
        [
            "agreement",
            str(run_dir),
            "--grade-set",
            gid.split("-")[0],
            "--grade-set",
            hid.split("-")[0],
            "--samples",
            "50",
        ],
        env={"COLUMNS": "200"},
    )
    assert text.exit_code == 0, text.output
    assert "quadratic" in text.output and "diagnostic policy_compliance" in text.output
    assert f"A = {gid}: task judge scripted:met" in text.output
    assert f"B = {hid}: human labels from {sheet}" in text.output
    assert data["description_b"].startswith(f"{hid}: human labels")


def test_partly_labelled_sheet_is_not_scored(graded_run: tuple[Path, str], tmp_path: Path) -> None:
    run_dir, gid = graded_run
    sheet = tmp_path / "sheet.csv"
    assert CliRunner().invoke(app, ["labels", "export", str(run_dir), "--out", str(sheet)]).exit_code == 0
    rows = read_sheet(sheet)
    rows[0]["label"] = "met" if rows[0]["kind"] == "criterion" else "3"
    write_sheet(sheet, rows)
    res = CliRunner().invoke(app, ["labels", "import", str(run_dir), str(sheet)])
    assert res.exit_code == 0, res.output
    hid = res.stdout.strip().splitlines()[0]
    (g,) = load_episode_grades(run_dir, hid)
    assert g.overall is None and g.task_score is None
    assert (
        "1 label(s) over 1 episode(s)" in res.stderr
        and f"{len(rows) - 1} row(s) without a label" in res.stderr
    )
    # the rest of the labelled episode's items are "only in A"; the other episode is only in A
    data = json.loads(
        CliRunner()
        .invoke(app, ["agreement", str(run_dir), "--grade-set", gid, "--grade-set", hid, "--json"])
        .stdout
    )
    per_episode = sum(r["episode_id"] == rows[0]["episode_id"] for r in rows)
    assert data["excluded"]["items_only_in_a"] == per_episode - 1
    assert data["excluded"]["episodes_only_in_a"] == 1


def test_bad_rows_are_located_and_nothing_is_stored(graded_run: tuple[Path, str], tmp_path: Path) -> None:
    run_dir, _gid = graded_run
    sheet = tmp_path / "sheet.csv"
    assert CliRunner().invoke(app, ["labels", "export", str(run_dir), "--out", str(sheet)]).exit_code == 0
    rows = read_sheet(sheet)
    crit = next(i for i, r in enumerate(rows) if r["kind"] == "criterion")
    rat = next(i for i, r in enumerate(rows) if r["kind"] == "rating")
    rows[crit]["label"] = "maybe"
    rows[rat]["label"] = "6"
    rows.append(dict(rows[rat], label="5"))  # the same rating labelled again
    rows.append(dict(rows[crit], episode_id="nope", label="met"))
    rows.append(dict(rows[crit], kind="check", label="met"))
    rows.append(dict(rows[crit], item_id="crit_missing", label="met"))
    write_sheet(sheet, rows)
    before = sorted(p.name for p in (run_dir / "grades").iterdir())
    res = CliRunner().invoke(app, ["labels", "import", str(run_dir), str(sheet)])
    assert res.exit_code == 2
    err = res.stderr
    assert f"{sheet}: row {crit + 2}, column label: 'maybe' is not met, partial or not_met" in err
    assert f"{sheet}: row {rat + 2}, column label: '6' is not a whole rating from 1 to 5" in err
    n = len(rows)
    assert f"row {n - 2}, column item_id: rating {rows[rat]['item_id']!r} of episode" in err
    assert f"is labelled again (first on row {rat + 2})" in err
    assert f"row {n - 1}, column episode_id: no graded episode 'nope'" in err
    assert f"row {n}, column kind: 'check' is not criterion or rating" in err
    assert err.startswith("error: 6 problem(s) in")
    assert f"row {n + 1}, column item_id: episode" in err and "'crit_missing'" in err
    assert "nothing was imported" in err and "Traceback" not in res.output
    assert sorted(p.name for p in (run_dir / "grades").iterdir()) == before

    # missing columns and an empty sheet
    (tmp_path / "bad.csv").write_text("episode_id,label\nx,met\n", encoding="utf-8")
    res = CliRunner().invoke(app, ["labels", "import", str(run_dir), str(tmp_path / "bad.csv")])
    assert res.exit_code == 2 and "row 1: missing column(s) item_id, kind, source_grade_set" in res.stderr
    write_sheet(
        tmp_path / "empty.csv", read_sheet(sheet)[:2] and [dict(r, label="") for r in read_sheet(sheet)]
    )
    res = CliRunner().invoke(app, ["labels", "import", str(run_dir), str(tmp_path / "empty.csv")])
    assert res.exit_code == 2 and "no row has a label" in res.stderr


def test_agreement_refuses_bad_input(graded_run: tuple[Path, str], tmp_path: Path) -> None:
    run_dir, gid = graded_run
    res = CliRunner().invoke(app, ["agreement", str(run_dir), "--grade-set", gid])
    assert res.exit_code == 2 and "exactly twice" in res.stderr
    res = CliRunner().invoke(app, ["agreement", str(run_dir), "--grade-set", gid, "--grade-set", "gs999-x"])
    assert res.exit_code == 2 and "'gs999-x' is not a grade set of this run (known: " in res.stderr
    assert gid in res.stderr
    res = CliRunner().invoke(app, ["agreement", str(tmp_path), "--grade-set", "a", "--grade-set", "b"])
    assert res.exit_code == 2 and "not a run folder" in res.stderr
    res = CliRunner().invoke(
        app, ["labels", "export", str(run_dir), "--out", str(run_dir / "traces" / "x.csv")]
    )
    assert res.exit_code == 2 and "would overwrite" in res.stderr
