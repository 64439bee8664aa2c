from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from callbench.report.model.load import load_run
from callbench.stats.summary import summarize_usage


def test_judge_usage_from_grades_counts_in_tokens_and_cost(make_run: Callable[..., Path]) -> None:
    run_dir = make_run(candidates=("cand-a",), agents=1, scenarios=1, repeats=1)
    grade_file = next((run_dir / "grades").glob("*/episodes/*.json"))
    data = json.loads(grade_file.read_text())
    data["usage"] = {"task_judge": {"input_tokens": 1000, "output_tokens": 200, "calls": 1, "cost_usd": None}}
    grade_file.write_text(json.dumps(data))
    run = load_run(run_dir)
    by_role, cost, tokens = summarize_usage(run.records)
    assert by_role["task_judge"].input_tokens == 1000
    assert cost is None  # an unknown judge price makes the total unknown, never 0
    assert tokens >= 1200
