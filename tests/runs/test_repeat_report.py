"""A two-repeat run with scripted models, end to end (episode loop, grading, report): pass^k,
verdict flips and the simulator and channel ledger come out at hand-derived values.

Set-up (the dairy test bundle with a channel program added):
- channel: turn 1 drops "Meena Patel" (applies); turn 2 substitutes "buffalo" (not said: not
  applied); the turn expressing ``s3_reason`` drops "mastitis" (applies when reached).
- caller: a script whose first two replies are not JSON (turn 1 fails both attempts, so the
  conversation is rerun), then one more bad reply (rejected) and the plan's four turns. For the
  ``scripted:hangup`` candidate's repeat 1 the caller only ever sends garbage: every conversation
  fails, and after three reruns the episode is skipped.
- candidates: ``scripted:reference`` (passes both repeats, overall 100); ``scripted:flaky``
  (the reference path in repeat 0, hangs up in repeat 1: task 0, conversation 100, overall 50);
  ``scripted:hangup`` (fails repeat 0; repeat 1 skipped).
- judges: ``scripted:met`` (every criterion met, every rating 5).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import yaml
from typer.testing import CliRunner

from callbench.bundle.validate.audits import load_bundle
from callbench.cli import app
from callbench.models.base import ModelClient, ModelRequest, ModelResponse, ModelSettings
from callbench.models.scripted.judge import create_scripted_judge
from callbench.models.scripted.models import create_scripted
from callbench.runs.executor import RoleSpec, RunConfig
from callbench.runs.plan import candidate_slug
from callbench.runs.session import run_and_grade

from .conftest import DAIRY

STEPS = [
    {"speech": "Yes, this is Meena Patel.", "expressed_step": "s1_greet", "done": False},
    {"speech": "No milk this evening, the estimate is zero.", "expressed_step": "s2_no_milk", "done": False},
    {"speech": "One cow has mastitis and the vet said to discard the milk.", "expressed_step": "s3_reason",
     "done": False},
    {"speech": "Okay, thank you. Bye.", "expressed_step": None, "done": True},
]  # fmt: skip


class Switch:
    """A client that answers with ``b`` for episodes whose id matches ``pick`` and ``a`` otherwise."""

    def __init__(self, spec: str, a: ModelClient, b: ModelClient, pick: str) -> None:
        self.spec, self.settings = spec, ModelSettings()
        self.a, self.b, self.pick = a, b, pick

    async def complete(self, request: ModelRequest) -> ModelResponse:
        use_b = self.pick in request.context.episode_id and request.context.episode_id.endswith("--r1")
        return await (self.b if use_b else self.a).complete(request)

    async def aclose(self) -> None:
        return None


async def test_two_repeat_scripted_run_report(tmp_path: Path) -> None:
    root = tmp_path / "bundle"
    shutil.copytree(DAIRY, root)
    sp = root / "agents" / "dairy" / "scenarios" / "dairy_zero_supply.yaml"
    doc = yaml.safe_load(sp.read_text(encoding="utf-8"))
    doc["channel"] = {
        "asr_events": [
            {"turn": 1, "kind": "drop", "span": "Meena Patel"},
            {"turn": 2, "kind": "substitute", "span": "buffalo", "replacement": "bull"},
            {"step": "s3_reason", "kind": "drop", "span": "mastitis"},
        ]
    }
    sp.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    callers = tmp_path / "caller.yaml"
    callers.write_text(
        yaml.safe_dump({"caller": ["bad one", "bad two", "not json", *STEPS]}), encoding="utf-8"
    )
    garbage = tmp_path / "garbage.yaml"
    garbage.write_text(yaml.safe_dump({"caller": ["garbage"]}), encoding="utf-8")
    bundle = load_bundle(root)
    s = ModelSettings()
    out = tmp_path / "run"
    caller_spec = f"scripted:file:{callers}"
    config = RunConfig(
        bundle_path=root,
        out=out,
        candidates=[RoleSpec(spec=c) for c in ("scripted:reference", "scripted:flaky", "scripted:hangup")],
        caller=RoleSpec(spec=caller_spec),
        task_judge=RoleSpec(spec="scripted:met"),
        conversation_judge=RoleSpec(spec="scripted:met"),
        repeats=2,
        seed=7,
        concurrency=2,
    )
    reference = create_scripted("scripted:reference", s, bundle)
    hangup = create_scripted("scripted:hangup", s, bundle)
    clients: dict[str, ModelClient] = {
        f"candidate:{candidate_slug('scripted:reference', s)}": reference,
        f"candidate:{candidate_slug('scripted:flaky', s)}": Switch(
            "scripted:flaky", reference, hangup, "flaky"
        ),
        f"candidate:{candidate_slug('scripted:hangup', s)}": hangup,
        "caller": Switch(
            caller_spec,
            create_scripted(caller_spec, s, bundle),
            create_scripted(f"scripted:file:{garbage}", s, bundle),
            "hangup",
        ),
        "task_judge": create_scripted_judge("scripted:met", s),
        "conversation_judge": create_scripted_judge("scripted:met", s),
    }
    manifest, gid = await run_and_grade(config, clients=clients, bundle=bundle)
    assert gid is not None and manifest.skipped == 1

    report_json = tmp_path / "report.json"
    res = CliRunner().invoke(
        app,
        [
            "report",
            str(out),
            "--json",
            str(report_json),
            "--html",
            str(tmp_path / "r.html"),
            "--samples",
            "50",
        ],
        env={"COLUMNS": "250"},
    )
    assert res.exit_code == 0, res.output
    data = json.loads(report_json.read_text(encoding="utf-8"))
    label = {c: candidate_slug(f"scripted:{c}", s) for c in ("reference", "flaky", "hangup")}
    cands = {c["candidate"]: c for c in data["candidates"]}
    ref, flaky, hang = (cands[label[c]] for c in ("reference", "flaky", "hangup"))
    assert ref["pass_hat_k"] == {"1": 1.0, "2": 1.0}
    assert ref["verdict_flip_rate"] == 0.0 and ref["within_scenario_sd"] == 0.0
    assert flaky["pass_hat_k"] == {"1": 0.5, "2": 0.0}
    assert flaky["verdict_flip_rate"] == 1.0
    assert math.isclose(flaky["within_scenario_sd"], 50 / math.sqrt(2))  # stdev of 100 and 50
    # one completed repeat only: no repeat figures for this candidate
    assert hang["pass_hat_k"] is None and hang["verdict_flip_rate"] is None
    assert hang["repeats"]["max_repeats"] == 1

    sim = data["runs"][0]["simulator"]
    assert sim["episodes"] == 6
    assert sim["caller_turns"] == 3 + 3 + 3 + 1 + 1 + 1  # the skipped episode keeps its failed turn
    # per completed episode: two rejections in the discarded conversation, one kept; the skipped
    # episode: 3 discarded conversations and the kept one, two rejections each
    assert sim["caller_rejections"] == {"invalid_json": 5 * 3 + 8}
    assert sim["caller_rejections_in_reruns"] == 5 * 2 + 6
    assert sim["caller_turns_with_rejections"] == 6
    assert sim["conversation_reruns"] == 5 * 1 + 3 and sim["episodes_rerun"] == 6
    assert sim["skipped"] == {"caller_validation": 1}
    assert sim["channel"] == {
        "applied": 8,
        "not_applied": 3,
        "authored_applied": 2 + 2 + 2 + 1 + 1,
        "authored_not_applied": 1 + 1 + 1,
        "never_reached": 2 + 2 + 3,
        "seeded_applied": 0,
        "seeded_not_applied": 0,
    }
    assert sim["judge_errors"] == 0
    assert sim["candidates_differ"] is True
    by = sim["by_candidate"]
    assert by[label["reference"]]["channel"] == {
        "applied": 4, "not_applied": 2, "never_reached": 0, "authored_applied": 4, "authored_not_applied": 2,
        "seeded_applied": 0, "seeded_not_applied": 0,
    }  # fmt: skip
    assert by[label["hangup"]]["skipped"] == {"caller_validation": 1}
    assert by[label["hangup"]]["conversation_reruns"] == 4

    assert "pass^2" in res.output and "100.0% (1/1)" in res.output  # flaky's flips
    assert "Simulator and channel ledger" in res.output and "invalid_json 23" in res.output
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "invalid_json 23" in html and 'id="repeats"' in html
