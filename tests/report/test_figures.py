from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from callbench.report.html.charts import ForestRow, Tile, forest, nice_ticks, score_colour, tile_grid
from callbench.report.html.figures import figures
from callbench.report.html.page import render_html
from callbench.report.html.textdiff import apply_line_ops, line_ops, word_diff
from callbench.report.model.breakdowns import scenario_cells
from callbench.report.model.build import all_records, build_report
from callbench.report.model.load import load_runs

MakeRun = Callable[..., Path]


def test_word_diff_marks_only_changed_words() -> None:
    intended = "I booked a cylinder last Tuesday and we are out of gas. My in-laws come on Wednesday."
    heard = ["I booked a cylinder last Thursday and we are out of gas.", "My in-laws come on Wednesday."]
    a, b = word_diff(intended, heard)
    assert [t for t, changed in a if changed] == ["Tuesday "]
    assert [t for frag in b for t, changed in frag if changed] == ["Thursday "]
    assert "".join(t for t, _ in a) == intended and ["".join(t for t, _ in f) for f in b] == heard
    dropped, kept = word_diff("मेरा नंबर 98 है", ["मेरा है"])
    assert [t for t, c in dropped if c] == ["नंबर 98 "] and kept == [[("मेरा है", False)]]
    same, _ = word_diff("no change here", ["no change here"])
    assert same == [("no change here", False)]


def test_line_ops_round_trip() -> None:
    base = "\n".join(f"line {i}" for i in range(50))
    other = base.replace("line 7", "line seven").replace("line 40\n", "") + "\nnew last line"
    ops = line_ops(base, other)
    assert len(ops) == 3 and apply_line_ops(base, ops) == other
    assert ops[0] == (7, 8, ["line seven"])


def test_chart_primitives() -> None:
    assert nice_ticks(0, 100) == [0, 20, 40, 60, 80, 100]
    assert nice_ticks(-30, 30) == [-30, -20, -10, 0, 10, 20, 30]
    assert score_colour(0) == "#d73027" and score_colour(100) == "#1a9850" and score_colour(None) == "#e6e6e6"
    svg = forest([ForestRow("<b>x</b>", 50.0, 40.0, 60.0)], lo=0, hi=100, label="t")
    assert "&lt;b&gt;x&lt;/b&gt;" in svg and "<b>" not in svg and "xmlns" not in svg
    # the estimate sits halfway along the plot area, the interval 10 points each side
    circle = re.search(r'<circle cx="([\d.]+)"', svg)
    bar = re.search(r'<line x1="([\d.]+)" x2="([\d.]+)" y1="[\d.]+" y2="[\d.]+" stroke=', svg)
    assert circle and bar
    cx, (x1, x2) = float(circle.group(1)), (float(v) for v in bar.groups())
    assert abs((x1 + x2) / 2 - cx) < 0.11 and x2 > x1
    grid = tile_grid(["r"], ["c1", "c2"], [[Tile(20.0, "20", "t", "e1"), None]], label="g")
    assert grid.count("<rect") == 1 and 'href="#e1"' in grid


def test_scenario_cells_average_repeats_and_count_passes(make_run: MakeRun) -> None:
    # default_score: 50 + 10a - 5s + 10 (cand-a) + r; cutoff 70 -> cand-a/ag2/sc0: 80, 81 both pass
    runs = load_runs([make_run(skip=lambda c, a, s, r: (c, a, s, r) == ("cand-b", 0, 1, 0))])
    cells = {(c.candidate, c.agent_id, c.scenario_id): c for c in scenario_cells(all_records(runs))}
    assert len(cells) == 12
    top = cells[("cand-a", "ag2", "sc0")]
    assert top.mean_overall == 80.5 and (top.scored, top.passed) == (2, 2)
    low = cells[("cand-b", "ag0", "sc1")]
    assert low.mean_overall == 46.0 and (low.scored, low.skipped, low.passed) == (1, 1, 0)
    assert low.episode_ids == ["cand-b__ag0__sc1__r0", "cand-b__ag0__sc1__r1"]


def test_by_agent_in_report(make_run: MakeRun) -> None:
    report = build_report(load_runs([make_run()]), n_samples=50)
    r = report.by_agent["cand-a"]["ag1"]
    # ag1, cand-a: scores 70 + {0, -5} + {0, 1} -> mean 68.0
    assert r.estimate == 68.0 and r.n_episodes == 4 and r.low is not None and r.low <= 68.0 <= (r.high or 0)


def test_one_candidate_leaves_comparisons_out(make_run: MakeRun) -> None:
    runs = load_runs([make_run(candidates=("solo",))])
    report = build_report(runs, n_samples=50)
    ids = [f.id for f in figures(report, {})]
    assert "fig-paired" not in ids
    assert ids[:3] == ["fig-leaderboard", "fig-pillars", "fig-pass"] and "fig-matrix" in ids
    html = render_html(report, runs)
    assert 'id="paired"' not in html and "one candidate only" not in html
    two = build_report(load_runs([make_run("r2", candidates=("a", "b"))]), n_samples=50)
    assert "fig-paired" in [f.id for f in figures(two, {})]
