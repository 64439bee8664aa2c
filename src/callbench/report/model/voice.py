"""What the voice channel did, for the report: per-candidate channel figures and voice retention.

Channel figures (per candidate as the report labels it, over its episodes whose caller turns went
through the voice channel, :class:`callbench.trace.VoiceEvent`):

- ``mean_wer``: the mean, over caller turns with intended words, of the turn's word error rate
  (a fraction; 0.25 = one word in four wrong), so a long turn weighs as much as a short one;
- entity survival by kind (``digits``, ``amount``, ``name``): of the entities the caller said,
  the share that reached the candidate intact;
- ``truncated``: caller turns whose decode hit the recogniser's output bound (a looping decode
  cut short, recorded as such by the engine);
- the agent's side (``run --agent-speech``): ``agent_turns`` (candidate turns spoken),
  ``agent_heard`` (carried over the line to the caller simulator) and ``agent_mean_wer`` over
  those, each turn weighing one; shown as a note beside the figures.

Voice retention (docs/voice.md): a candidate's mean overall score through the voice channel over
its mean overall score through the text channel *on the same episodes*. Two runs are paired when
their manifests differ only in the channel: same bundle hash, seed, repeats, caller, judges,
filters and loop settings, one run with ``--channel text`` (or no voice record) and one with
``--channel audio``. Episodes are matched by candidate label (as planned, before the report makes
labels of several runs distinct), agent, scenario and repeat, and only pairs where both episodes
have an overall score count. Per scenario, the voice and text scores are the means over its
matched repeats. The point estimate is ``mean(voice) / mean(text)`` over those scenarios; its
interval is the percentile interval of the same ratio over hierarchical bootstrap samples
(:mod:`callbench.stats.bootstrap`: agents, then scenarios within them) that draw the same
scenarios for both channels, so the pairing is kept. A retention is undefined (None) when the text
mean is 0; fewer than :data:`~callbench.stats.paired.MIN_PAIRED_SCENARIOS` matched scenarios mark
it too few, as a paired comparison is.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import numpy as np
from pydantic import BaseModel, Field, computed_field

from callbench.report.model.load import RunData
from callbench.stats.bootstrap import (
    DEFAULT_CONFIDENCE,
    DEFAULT_SAMPLES,
    build_structure,
    derive_rng,
    draw,
    means_from_draws,
    percentile_interval,
)
from callbench.stats.paired import MIN_PAIRED_SCENARIOS

ENTITY_KINDS = ("digits", "amount", "name")
STRESS_NOTE = ("espeak-ng's formant voice is a stress channel: most of its recognition errors come from "
               "the synthetic voice, not the line, and do not look like real callers' (docs/voice.md)")


class EntitySurvival(BaseModel):
    kind: str
    survived: int
    said: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def rate(self) -> float | None:
        """Survived over said (a fraction), None when none was said."""
        return self.survived / self.said if self.said else None


class VoiceFigures(BaseModel):
    """One candidate's voice-channel figures (module docstring); ``mean_wer`` is a fraction."""

    candidate: str
    episodes: int
    turns: int
    mean_wer: float | None = None
    truncated: int = 0
    entities: list[EntitySurvival] = Field(default_factory=list)
    stress: bool = False
    agent_turns: int = 0
    agent_heard: int = 0
    agent_mean_wer: float | None = None


class VoiceRetention(BaseModel):
    """Voice score over text score for one candidate on one pair of runs (module docstring);
    means in score points, ``retention`` and its interval as fractions (0.8 = 80% kept)."""

    candidate: str
    text_run: str
    audio_run: str
    n_scenarios: int = 0
    n_agents: int = 0
    n_episode_pairs: int = 0
    text_mean: float | None = None
    voice_mean: float | None = None
    retention: float | None = None
    low: float | None = None
    high: float | None = None
    confidence: float = DEFAULT_CONFIDENCE
    n_samples: int = DEFAULT_SAMPLES

    @computed_field  # type: ignore[prop-decorator]
    @property
    def too_few(self) -> bool:
        return self.retention is not None and self.n_scenarios < MIN_PAIRED_SCENARIOS


class VoiceSection(BaseModel):
    figures: list[VoiceFigures] = Field(default_factory=list)
    retention: list[VoiceRetention] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


def figures_for(runs: list[RunData]) -> list[VoiceFigures]:
    """One :class:`VoiceFigures` per candidate label with voice-channel episodes, sorted by label."""
    acc: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        for rec in run.records:
            tally = run.voice.get(rec.episode_id)
            if tally is not None:
                acc[rec.candidate].append(tally)
    out = []
    for cand in sorted(acc):
        tallies = acc[cand]
        wer_n = sum(t["wer_n"] for t in tallies)
        agent_n = sum(t.get("agent_wer_n", 0) for t in tallies)
        ents: dict[str, list[int]] = {}
        for t in tallies:
            for kind, (ok, said) in t["entities"].items():
                cell = ents.setdefault(kind, [0, 0])
                cell[0] += ok
                cell[1] += said
        order = [k for k in ENTITY_KINDS if k in ents] + sorted(set(ents) - set(ENTITY_KINDS))
        out.append(VoiceFigures(
            candidate=cand,
            episodes=len(tallies),
            turns=sum(t["turns"] for t in tallies),
            mean_wer=sum(t["wer_sum"] for t in tallies) / wer_n if wer_n else None,
            truncated=sum(t["truncated"] for t in tallies),
            entities=[EntitySurvival(kind=k, survived=ents[k][0], said=ents[k][1]) for k in order],
            stress=any(t.get("stress") for t in tallies),
            agent_turns=sum(t.get("agent_turns", 0) for t in tallies),
            agent_heard=sum(t.get("agent_heard", 0) for t in tallies),
            agent_mean_wer=sum(t.get("agent_wer_sum", 0.0) for t in tallies) / agent_n if agent_n else None,
        ))
    return out


def _channel(run: RunData) -> str | None:
    """``text``, ``audio`` or None (a run whose channel was chosen per scenario: not pairable)."""
    voice = run.manifest.voice
    if voice is None:
        return "text"
    return voice.get("channel") if voice.get("channel") in ("text", "audio") else None


def _comparable_key(run: RunData) -> str:
    m = run.manifest
    return json.dumps([m.bundle_hash, m.seed, m.repeats, m.caller.model_dump(mode="json"),
                       m.task_judge.model_dump(mode="json"), m.conversation_judge.model_dump(mode="json"),
                       m.filters, m.loop_settings], sort_keys=True, default=str)


def _planned_label(label: str, run_id: str) -> str:
    suffix = f" [{run_id}]"
    return label[: -len(suffix)] if label.endswith(suffix) else label


def _scores(run: RunData) -> dict[tuple[str, str, str, int], float]:
    out = {}
    for r in run.records:
        v = r.value("overall")
        if v is not None and not np.isnan(v):
            out[(_planned_label(r.candidate, run.manifest.run_id), r.agent_id, r.scenario_id, r.repeat)] = v
    return out


def retention_for(
    text: RunData, audio: RunData, candidate: str, *, seed: int, n_samples: int, confidence: float
) -> VoiceRetention:
    """Voice retention of ``candidate`` (its planned label) between a text run and an audio run
    (module docstring)."""
    ts, vs = _scores(text), _scores(audio)
    shared = sorted(k for k in set(ts) & set(vs) if k[0] == candidate)
    out = VoiceRetention(candidate=candidate, text_run=text.manifest.run_id, audio_run=audio.manifest.run_id,
                         n_episode_pairs=len(shared), confidence=confidence, n_samples=n_samples)
    by_scen: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for k in shared:
        by_scen[(k[1], k[2])].append((ts[k], vs[k]))
    if not by_scen:
        return out
    keys = sorted(by_scen)
    t_vals = [float(np.mean([p[0] for p in by_scen[k]])) for k in keys]
    v_vals = [float(np.mean([p[1] for p in by_scen[k]])) for k in keys]
    out.n_scenarios, out.n_agents = len(keys), len({a for a, _ in keys})
    out.text_mean, out.voice_mean = float(np.mean(t_vals)), float(np.mean(v_vals))
    if out.text_mean == 0:
        return out
    out.retention = out.voice_mean / out.text_mean
    agents, scens = [a for a, _ in keys], [s for _, s in keys]
    t_struct, v_struct = build_structure(agents, scens, t_vals), build_structure(agents, scens, v_vals)
    # one set of draws for both channels keeps each drawn scenario's pair together
    rng = derive_rng(seed, "voice-retention", candidate, out.text_run, out.audio_run)
    draws = draw(t_struct, rng, n_samples)
    t_means, v_means = means_from_draws(t_struct, draws), means_from_draws(v_struct, draws)
    ratios = np.divide(v_means, t_means, out=np.full_like(v_means, np.nan), where=t_means != 0)
    ratios = ratios[~np.isnan(ratios)]
    if ratios.size:
        out.low, out.high = percentile_interval(ratios, confidence)
    return out


def voice_section(
    runs: list[RunData], *, seed: int, n_samples: int = DEFAULT_SAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
) -> VoiceSection | None:
    """The report's voice section, or None when no run put a caller turn through the voice channel."""
    figures = figures_for(runs)
    if not figures:
        return None
    retention: list[VoiceRetention] = []
    for text in (r for r in runs if _channel(r) == "text"):
        for audio in (r for r in runs if _channel(r) == "audio"):
            if _comparable_key(text) != _comparable_key(audio):
                continue
            cands = ({k.candidate for k in text.manifest.planned}
                     & {k.candidate for k in audio.manifest.planned})
            retention.extend(
                retention_for(text, audio, c, seed=seed, n_samples=n_samples, confidence=confidence)
                for c in sorted(cands))
    notes = [STRESS_NOTE] if any(f.stress for f in figures) else []
    notes.extend(agent_note(f) for f in figures if f.agent_turns)
    if not retention:
        notes.append("no voice retention: give a text run and an audio run of the same bundle, seed and "
                     "roles (callbench run --channel text / --channel audio) to report both together")
    return VoiceSection(figures=figures, retention=retention, notes=notes)


def agent_note(f: VoiceFigures) -> str:
    """One line on ``f``'s spoken agent side (``run --agent-speech``)."""
    line = (f"{f.candidate}: the agent's side was spoken on {f.agent_turns} turns (talk time measured "
            "from the synthesis)")
    if f.agent_heard:
        line += (f"; {f.agent_heard} went over the line to the caller simulator, heard at a mean WER of "
                 f"{_pct(f.agent_mean_wer)}")
    return line


FIGURE_COLUMNS = ["episodes", "caller turns", "mean WER", "digits kept", "amounts kept", "names kept",
                  "truncated"]
RETENTION_COLUMNS = ["text run", "audio run", "scenarios", "text", "voice", "retention", "interval"]


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def figure_rows(section: VoiceSection) -> list[tuple[str, list[str]]]:
    """``(candidate, cells)`` per candidate in :data:`FIGURE_COLUMNS` order (plain text)."""
    rows = []
    for f in section.figures:
        kept = {e.kind: e for e in f.entities}

        def cell(kind: str, kept: dict[str, EntitySurvival] = kept) -> str:
            e = kept.get(kind)
            return "—" if e is None else f"{e.survived}/{e.said} ({_pct(e.rate)})"

        rows.append((f.candidate, [str(f.episodes), str(f.turns), _pct(f.mean_wer), cell("digits"),
                                   cell("amount"), cell("name"), str(f.truncated)]))
    return rows


def retention_rows(section: VoiceSection) -> list[tuple[str, list[str]]]:
    """``(candidate, cells)`` per retention in :data:`RETENTION_COLUMNS` order (plain text)."""
    rows = []
    for r in section.retention:
        interval = "—" if r.low is None or r.high is None else f"[{_pct(r.low)}, {_pct(r.high)}]"
        if r.too_few:
            interval += f" too few (<{MIN_PAIRED_SCENARIOS} scenarios)"
        rows.append((r.candidate, [
            r.text_run, r.audio_run, str(r.n_scenarios),
            "—" if r.text_mean is None else f"{r.text_mean:.1f}",
            "—" if r.voice_mean is None else f"{r.voice_mean:.1f}",
            _pct(r.retention), interval,
        ]))
    return rows
