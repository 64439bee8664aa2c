"""Synthetic run folders written with the real contracts (RunManifest, Trace, GradeSetManifest,
EpisodeGrade), for report tests. No network, no models."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from callbench.bundle.models import Diagnostic, Pillar
from callbench.bundle.validate.audits import load_bundle
from callbench.grade.models import EpisodeGrade, GradedItem, GradeSetManifest, Label, PointTotals
from callbench.models.base import ToolCall, Usage
from callbench.runfolder import episode_files
from callbench.runfolder.manifest import EpisodeKey, RunManifest
from callbench.trace import (
    AgentSpeech,
    CallerTurn,
    CallerView,
    CandidateView,
    ChannelEvent,
    EndReason,
    EpisodeLatency,
    EpisodeSeeds,
    RoleInfo,
    ToolEvent,
    Trace,
    TraceMessage,
    VoiceEvent,
    atomic_write_text,
    save_trace,
)
from waiting import limit

ScoreFn = Callable[[str, int, int, int], float]
LANGS = ["en", "hi", "ta"]
DIFFS = ["medium", "hard"]


def default_score(cand: str, a: int, s: int, r: int) -> float:
    return 50.0 + 10 * a - 5 * s + (10.0 if cand.endswith("a") else 0.0) + r


def make_trace(
    episode_id: str,
    cand: RoleInfo,
    caller: RoleInfo,
    agent: str,
    scen: str,
    rep: int,
    *,
    bundle_hash: str,
    lang: str,
    diff: str,
    reply: str,
    skipped: bool,
    caller_prompt: str,
) -> Trace:
    messages = [
        TraceMessage(index=0, role="system", content=f"You are the agent for {agent}. Be brief."),
        TraceMessage(index=1, role="assistant", content="Hello, how can I help?", candidate_turn=0),
        TraceMessage(index=2, role="user", content="I want to book", caller_turn=1, fragment=0),
        TraceMessage(
            index=3,
            role="assistant",
            content=None,
            tool_calls=[ToolCall(id="c1", name="book", arguments='{"day": "monday"}')],
            candidate_turn=1,
        ),
        TraceMessage(
            index=4, role="tool", content='{"status": "ok"}', tool_call_id="c1", name="book", tool_event=0
        ),
        TraceMessage(index=5, role="assistant", content=reply, candidate_turn=1),
    ]
    return Trace(
        episode_id=episode_id,
        bundle_name="synthetic",
        bundle_version="1",
        bundle_hash=bundle_hash,
        agent_id=agent,
        scenario_id=scen,
        language=lang,
        difficulty=diff,
        repeat=rep,
        seeds=EpisodeSeeds(run=1, episode=2, channel=3, backend=4, caller=5, candidate=6),
        candidate=cand,
        caller=caller,
        candidate_view=CandidateView(instructions_sha256="0" * 64, tools=[]),
        caller_view=CallerView(system_prompt=caller_prompt + f" brief for {agent}/{scen}"),
        messages=[] if skipped else messages,
        caller_turns=[]
        if skipped
        else [
            CallerTurn(
                index=1,
                intended="I want to book a table",
                observed=["I want to book"],
                message_indices=[2],
                channel_events=[
                    ChannelEvent(
                        kind="drop", source="authored", turn=1, span="a table", applied=True, detail="dropped"
                    )
                ],
            )
        ],
        tool_events=[]
        if skipped
        else [
            ToolEvent(
                index=0,
                candidate_turn=1,
                message_index=3,
                result_message_index=4,
                tool_call_id="c1",
                name="book",
                raw_arguments='{"day": "monday"}',
                arguments={"day": "monday"},
                queue_position=0,
                outcome="authored",
                result={"status": "ok"},
            )
        ],
        end_reason=EndReason.SKIPPED if skipped else EndReason.CALLER_DONE,
        skip_reason="caller validation failed 3 times" if skipped else None,
        usage={
            "candidate": Usage(input_tokens=100, output_tokens=20, calls=2, cost_usd=0.001),
            "caller": Usage(input_tokens=50, output_tokens=10, calls=1, cost_usd=0.0005),
        },
    )


def make_grade(
    trace: Trace, label: str, gs: str, task: float | None, conv: float | None, cutoff: float
) -> EpisodeGrade:
    items = [
        GradedItem(
            id="booked",
            source="action_check",
            pillar=Pillar.TASK,
            diagnostic=Diagnostic.OUTCOME_REACHED,
            weight=2,
            label=Label.MET,
            r=1.0,
            reason="book called once",
            cited_events=[0],
        ),
        GradedItem(
            id="polite",
            source="rating",
            pillar=Pillar.CONVERSATION,
            diagnostic=Diagnostic.SPEAKABILITY,
            weight=1,
            rating=4,
            r=0.75,
            reason="speakable",
            cited_messages=[1, 5, 99],
        ),
    ]
    t = PointTotals() if task is None else PointTotals(points=task / 100 * 2, weight=2, items=1)
    c = PointTotals() if conv is None else PointTotals(points=conv / 100, weight=1, items=1)
    defined = [x for x in (task, conv) if x is not None]
    overall = sum(defined) / len(defined) if defined else None
    return EpisodeGrade(
        episode_id=trace.episode_id,
        grade_set_id=gs,
        trace_sha256=trace.sha256(),
        agent_id=trace.agent_id,
        scenario_id=trace.scenario_id,
        language=trace.language,
        difficulty=trace.difficulty,
        repeat=trace.repeat,
        candidate=label,
        end_reason=trace.end_reason.value,
        items=items,
        task=t,
        conversation=c,
        task_score=task,
        conversation_score=conv,
        overall=overall,
        passed=None if overall is None else overall >= cutoff,
        cutoff=cutoff,
        diagnostics={Diagnostic.OUTCOME_REACHED: t, Diagnostic.SPEAKABILITY: c},
    )


def write_run(
    root: Path,
    run_id: str = "r1",
    *,
    candidates: tuple[str, ...] = ("cand-a", "cand-b"),
    agents: int = 3,
    scenarios: int = 2,
    repeats: int = 2,
    bundle_hash: str = "b" * 64,
    caller: RoleInfo | None = None,
    task_judge: RoleInfo | None = None,
    score: ScoreFn = default_score,
    skip: Callable[[str, int, int, int], bool] = lambda c, a, s, r: False,
    reply: Callable[[str, int, int, int], str] = lambda c, a, s, r: "Booked for Monday. Goodbye.",
    caller_prompt: str = "You are a caller.",
    not_run: Callable[[str, int, int, int], bool] = lambda c, a, s, r: False,
    seed: int = 7,
    cutoff: float = 70.0,
    voice: Callable[[str, int, int, int], VoiceEvent | None] | None = None,
    manifest_voice: dict[str, Any] | None = None,
    latency: Callable[[str, int, int, int], EpisodeLatency | None] = lambda c, a, s, r: None,
    agent_speech: Callable[[str, int, int, int], list[AgentSpeech]] | None = None,
) -> Path:
    """Write a complete run folder and return it. Every (candidate, agent, scenario, repeat) is
    planned; each gets a trace and a grade unless skipped (trace only) or not run (nothing).
    ``voice`` gives the first caller turn's voice record; ``manifest_voice`` the manifest's;
    ``latency`` gives a trace its timings (None: none); ``agent_speech`` its spoken agent side."""
    run_dir = root / run_id
    caller = caller or RoleInfo(spec="scripted:caller")
    task_judge = task_judge or RoleInfo(spec="scripted:judge")
    gs = "gs1"
    planned: list[EpisodeKey] = []
    for cand in candidates:
        cand_role = RoleInfo(spec=cand)
        for a in range(agents):
            for s in range(scenarios):
                for r in range(repeats):
                    eid = f"{cand}__ag{a}__sc{s}__r{r}"
                    agent, scen = f"ag{a}", f"sc{s}"
                    planned.append(
                        EpisodeKey(episode_id=eid, candidate=cand, agent_id=agent, scenario_id=scen, repeat=r)
                    )
                    if not_run(cand, a, s, r):
                        continue
                    skipped = skip(cand, a, s, r)
                    trace = make_trace(
                        eid,
                        cand_role,
                        caller,
                        agent,
                        scen,
                        r,
                        bundle_hash=bundle_hash,
                        lang=LANGS[a % len(LANGS)],
                        diff=DIFFS[s % len(DIFFS)],
                        reply=reply(cand, a, s, r),
                        skipped=skipped,
                        caller_prompt=caller_prompt,
                    )
                    if voice is not None and trace.caller_turns:
                        trace.caller_turns[0].voice = voice(cand, a, s, r)
                    trace.latency = latency(cand, a, s, r)
                    if agent_speech is not None:
                        trace.agent_speech = agent_speech(cand, a, s, r)
                    save_trace(trace, run_dir / "traces" / f"{eid}.json")
                    if skipped:
                        continue
                    v = score(cand, a, s, r)
                    grade = make_grade(trace, cand, gs, v, v, cutoff)
                    atomic_write_text(
                        run_dir / "grades" / gs / "episodes" / f"{eid}.json", grade.model_dump_json()
                    )
    manifest = RunManifest(
        run_id=run_id,
        bundle_name="synthetic",
        bundle_version="1",
        bundle_hash=bundle_hash,
        bundle_path="x",
        callbench_version="0.1.0",
        git_commit="abc",
        git_dirty=False,
        candidates=[RoleInfo(spec=c) for c in candidates],
        caller=caller,
        task_judge=task_judge,
        conversation_judge=RoleInfo(spec="scripted:judge"),
        seed=seed,
        repeats=repeats,
        planned=planned,
        started="2026-01-01T00:00:00Z",
        grade_sets=[gs],
        voice=manifest_voice,
    )
    atomic_write_text(run_dir / "manifest.json", manifest.model_dump_json())
    gsm = GradeSetManifest(
        grade_set_id=gs,
        created="2026-01-01T00:00:00Z",
        task_judge=task_judge,
        conversation_judge=RoleInfo(spec="scripted:judge"),
        cutoff=cutoff,
    )
    atomic_write_text(run_dir / "grades" / gs / "grade_set.json", gsm.model_dump_json())
    return run_dir


@pytest.fixture
def make_run(tmp_path: Path) -> Callable[..., Path]:
    def factory(run_id: str = "r1", **kw: Any) -> Path:
        return write_run(tmp_path, run_id, **kw)

    return factory


def starter() -> Path:
    return Path(str(resources.files("callbench") / "examples" / "starter"))


@pytest.fixture(scope="session")
def starter_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A run of the starter bundle with scripted models, one scenario per language and two
    candidates (the reference path and talk-only, so it holds native-script speech, tool calls,
    passes and fails), and its HTML report: ``{"html": path, "languages": tags, "traces": dicts}``."""
    bundle = load_bundle(starter())
    first: dict[str, str] = {}
    for _, scen in bundle.scenarios():
        first.setdefault(scen.brief.language, scen.id)
    out = tmp_path_factory.mktemp("browser") / "run"
    # in a child process: Playwright's sync API holds an event loop in this one
    cli = [sys.executable, "-m", "callbench"]
    done = subprocess.run([*cli,
        "run", str(starter()), "--candidate", "scripted:reference", "--candidate", "scripted:talk",
        "--caller", "scripted:plan", "--task-judge", "scripted:met",
        "--conversation-judge", "scripted:partial",
        "--scenarios", ",".join(sorted(first.values())), "--out", str(out), "--concurrency", "2",
    ], capture_output=True, text=True, timeout=limit(600))  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    html = out / "report.html"
    done = subprocess.run([*cli, "report", str(out), "--html", str(html), "--samples", "200"],
                          capture_output=True, text=True, timeout=limit(600))  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    traces = [json.loads(episode_files.read_text(p)) for p in sorted((out / "traces").glob("*.json.gz"))]
    return {"html": html, "languages": sorted(first), "traces": traces}


def force_workers(monkeypatch: pytest.MonkeyPatch, chunk: int, processes: int | None = 2) -> None:
    """Make the report's worker pool take any input, ``chunk`` items a task (however few there
    are: ``PARALLEL_MIN_ITEMS`` 0), and, when ``processes`` is given, that many worker processes
    (``CALLBENCH_REPORT_WORKERS``) for the steps that read the count from the environment."""
    from callbench.report.model import workers

    monkeypatch.setattr(workers, "PARALLEL_MIN_ITEMS", 0)
    monkeypatch.setattr(workers, "CHUNK_ITEMS", chunk)
    if processes is not None:
        monkeypatch.setenv(workers.WORKERS_ENV, str(processes))
