"""Where a candidate's overall score comes from: the share decided by the
deterministic action checks and by each judge.

Per scored episode (overall defined): the overall score is the mean of the defined pillars
(DESIGN.md "Scores"), and pillar p = 100 * sum(w r) / W_p over its applicable items. So an item of
pillar p moves the overall score by 100 * w r / (W_p * n_defined), and a *source* (its items) holds

- ``weight_share`` = sum over pillars of W_{p,source} / (W_p * n_defined): the share of the
  overall score it decides (what is at stake there; 0..1, the sources sum to 1);
- ``points`` = sum over pillars of 100 * sum_{i in source, p} w_i r_i / (W_p * n_defined): the
  points of the overall score it gave (0..100; the sources sum to the overall score).

Sources: ``action_checks`` (items from ``action_check``), ``task_judge`` (``task_criterion``),
``conversation_judge`` (``conversation_criterion`` and ``rating``). A candidate's figures are the
means over its scored episodes; ``share_of_points`` = mean points / mean overall.
"""

from __future__ import annotations

from pydantic import BaseModel

from callbench.grade.models import EpisodeGrade
from callbench.grade.scoring import item_value

SOURCES = {
    "action_check": "action_checks",
    "task_criterion": "task_judge",
    "conversation_criterion": "conversation_judge",
    "rating": "conversation_judge",
}
SOURCE_NAMES = ("action_checks", "task_judge", "conversation_judge")


class SourceShare(BaseModel):
    """One source's part of a candidate's overall score (module docstring), over ``episodes``."""

    weight_share: float = 0.0
    points: float = 0.0
    share_of_points: float | None = None
    episodes: int = 0


def episode_sources(grade: EpisodeGrade) -> dict[str, tuple[float, float]] | None:
    """``source -> (weight_share, points)`` of one episode grade (module docstring); None when it
    has no overall score (skipped, not graded, or no applicable item)."""
    if grade.overall is None:
        return None
    weight: dict[str, dict[str, float]] = {}
    points: dict[str, dict[str, float]] = {}
    for it in grade.items:
        r = item_value(it)
        if r is None:
            continue
        p, src = str(it.pillar), SOURCES[it.source]
        weight.setdefault(p, {}).setdefault(src, 0.0)
        points.setdefault(p, {}).setdefault(src, 0.0)
        weight[p][src] += it.weight
        points[p][src] += it.weight * r
    defined = {p: sum(w.values()) for p, w in weight.items() if sum(w.values()) > 0}
    if not defined:
        return None
    out = {s: (0.0, 0.0) for s in SOURCE_NAMES}
    for p, total in defined.items():
        for src, w in weight[p].items():
            ws, pts = out[src]
            out[src] = (ws + w / total / len(defined), pts + 100 * points[p][src] / total / len(defined))
    return out


def score_sources(grades: list[EpisodeGrade]) -> dict[str, SourceShare]:
    """Mean :func:`episode_sources` over ``grades`` (episodes without an overall score left out);
    empty when none has one."""
    per = [x for x in (episode_sources(g) for g in grades) if x is not None]
    if not per:
        return {}
    n = len(per)
    overall = sum(sum(pts for _, pts in e.values()) for e in per) / n
    out = {}
    for s in SOURCE_NAMES:
        ws = sum(e[s][0] for e in per) / n
        pts = sum(e[s][1] for e in per) / n
        out[s] = SourceShare(
            weight_share=ws, points=pts, share_of_points=pts / overall if overall > 0 else None, episodes=n
        )
    return out
