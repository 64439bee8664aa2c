"""Time the hierarchical bootstrap at the paper's scale.

7 candidates x 490 scenarios (49 agents x 10) x 3 repeats, 2,000 samples each. Prints seconds for:
the overall-score interval of every candidate (the core cost), the paired comparisons of the
adjacent candidates, and a full per-candidate summary (overall, task, conversation, pass rate,
language/difficulty splits, diagnostics) as ``callbench report`` computes it.

Run: ``python benchmarks/bootstrap_bench.py [--samples N] [--seed N]``. Synthetic scores only
(agent effect + scenario effect + noise); no network, no model.
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from callbench.grade.models import EpisodeGrade
from callbench.stats.bootstrap import derive_rng, hierarchical_bootstrap
from callbench.stats.paired import paired_comparison
from callbench.stats.summary import EpisodeRecord, summarize_candidate

CANDIDATES, AGENTS, SCENARIOS_PER_AGENT, REPEATS = 7, 49, 10, 3
LANGS = ["en", "hi", "mr", "ta", "gu"]
DIFFS = ["medium", "hard"]


def synthetic_scores(seed: int, skip_rate: float) -> dict[str, list[tuple[str, str, float | None]]]:
    """``candidate -> [(agent_id, scenario_id, overall)]`` with clustered structure; a fraction
    ``skip_rate`` of episodes is skipped (None), which makes the clusters ragged as in real runs."""
    rng = np.random.default_rng(seed)
    agent_fx = rng.normal(0, 12, AGENTS)
    scen_fx = rng.normal(0, 8, (AGENTS, SCENARIOS_PER_AGENT))
    out: dict[str, list[tuple[str, str, float | None]]] = {}
    for c in range(CANDIDATES):
        rows: list[tuple[str, str, float | None]] = []
        for a in range(AGENTS):
            for s in range(SCENARIOS_PER_AGENT):
                for _ in range(REPEATS):
                    v = 45 + 4 * c + agent_fx[a] + scen_fx[a, s] + rng.normal(0, 10)
                    skipped = rng.random() < skip_rate
                    rows.append((f"agent{a:02d}", f"s{s}", None if skipped else float(np.clip(v, 0, 100))))
        out[f"cand{c}"] = rows
    return out


def records_for(candidate: str, rows: list[tuple[str, str, float | None]]) -> list[EpisodeRecord]:
    records = []
    for i, (agent, scen, v) in enumerate(rows):
        a = int(agent[5:])
        grade = EpisodeGrade(
            episode_id=f"{candidate}-{i}",
            grade_set_id="g",
            trace_sha256="",
            agent_id=agent,
            scenario_id=scen,
            language=LANGS[a % 5],
            difficulty=DIFFS[int(scen[1:]) % 2],
            repeat=i % REPEATS,
            candidate=candidate,
            end_reason="caller_done",
            task_score=v,
            conversation_score=v,
            overall=v,
        )
        records.append(
            EpisodeRecord(
                run_id="bench",
                episode_id=grade.episode_id,
                candidate=candidate,
                agent_id=agent,
                scenario_id=scen,
                language=grade.language,
                difficulty=grade.difficulty,
                repeat=grade.repeat,
                status="scored",
                grade=grade,
            )
        )
    return records


def time_overall(data: dict[str, list[tuple[str, str, float | None]]], seed: int, samples: int) -> float:
    """Seconds for every candidate's overall-score interval."""
    t0 = time.perf_counter()
    for cand, rows in data.items():
        hierarchical_bootstrap(
            [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], derive_rng(seed, cand), samples
        )
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-rate", type=float, default=0.02, help="fraction of skipped episodes")
    args = parser.parse_args()
    complete = synthetic_scores(args.seed, 0.0)
    data = synthetic_scores(args.seed, args.skip_rate)
    n_eps = sum(len(v) for v in data.values())
    print(
        f"{CANDIDATES} candidates x {AGENTS * SCENARIOS_PER_AGENT} scenarios ({AGENTS} agents x "
        f"{SCENARIOS_PER_AGENT}) x {REPEATS} repeats = {n_eps} episodes; {args.samples} bootstrap samples"
    )
    t = time_overall(complete, args.seed, args.samples)
    print(f"hierarchical bootstrap of the overall score, all candidates, no skips: {t:.2f} s")
    t = time_overall(data, args.seed, args.samples)
    print(f"the same with {100 * args.skip_rate:g}% skipped episodes (ragged clusters): {t:.2f} s")

    t0 = time.perf_counter()
    names = list(data)
    for a, b in itertools.pairwise(names):
        paired_comparison(
            a, data[a], b, data[b], derive_rng(args.seed, "paired", a, b), n_samples=args.samples
        )
    print(f"paired comparisons of {len(names) - 1} adjacent pairs: {time.perf_counter() - t0:.2f} s")

    records = {c: records_for(c, rows) for c, rows in data.items()}
    t0 = time.perf_counter()
    for cand, recs in records.items():
        summarize_candidate(cand, recs, seed=args.seed, n_samples=args.samples)
    print(
        f"full summaries as in callbench report (4 metrics, {len(LANGS)} languages x {len(DIFFS)} "
        f"difficulties, diagnostics), all candidates: {time.perf_counter() - t0:.2f} s"
    )


if __name__ == "__main__":
    main()
