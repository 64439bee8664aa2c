"""The cost plan of a run: requests, tokens and USD per role before anything is spent.

``callbench run --dry-run`` prints it; ``--max-cost`` projects each episode's cost from it
(:mod:`callbench.runs.budget`). Two sources, per candidate:

* **The turn model** (no history): one episode of a scenario with ``S`` plan steps and ``K``
  expected tool calls (its reference path's calls, else its action checks' minimum counts) has
  ``T`` caller turns, expected ``S + 1`` (a closing turn), low ``S``, high
  ``min(max_turns, 2S + 2)``; the candidate makes ``1 + T + K`` requests (greeting, one per
  caller turn, one more per tool round; high ``1 + T + 2K + 1``); the caller ``T``; each judge 1
  (high 2: the judges' one retry, ``grade/judges.py``). A request's input is its fixed prompt (the
  rendered operating document and tool schemas for the candidate; the brief prompt for the caller)
  plus the conversation so far, so input grows with the square of the requests. Replies are
  :data:`SPEECH_TOKENS` per turn (low/high span), tool results the size of the scenario's
  fixtures, judge replies :data:`JUDGE_TOKENS_PER_ITEM` per criterion.
* **History** (a resumed run with finished episodes of that candidate): the mean usage per
  episode of each role over those episodes; the span is the smallest and largest episode seen.

Tokens come from characters: :data:`ASCII_CHARS_PER_TOKEN` for ASCII text (OpenAI's rule of
thumb, "a token is about 4 characters of English") and :data:`OTHER_CHARS_PER_TOKEN` for other
characters (measured for Indic scripts on the embedded model's tokenizer: Hindi 1.0, Tamil 0.9,
Gujarati 0.7 characters per token, DESIGN.md), each with a +-25% span. Cost uses the pinned price
table (``models/prices.yaml``) with every input token at the full input price (no prompt-cache
discount), so the expected figure leans high. A role whose price is unknown has an unknown cost,
never 0. The margin is documented in ``docs/cost.md`` and checked against a fake provider whose
usage is known (``tests/runs/test_costplan.py``).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from callbench.bundle.models import Bundle, LoadedAgent, Pillar, Scenario
from callbench.bundle.render import render_instructions
from callbench.grade.store import iter_episode_grades
from callbench.models.base import Usage
from callbench.models.pricing import PriceTable, call_cost
from callbench.runfolder.manifest import MANIFEST, EpisodeKey
from callbench.runfolder.store import RunStore
from callbench.runs.executor import RoleSpec, RunConfig, rerun_ids
from callbench.runs.plan import candidate_slug, plan_episodes, sweep_personas
from callbench.sim.caller import build_caller_prompt

ASCII_CHARS_PER_TOKEN = 4.0
OTHER_CHARS_PER_TOKEN = 0.9
TOKEN_SPAN = 0.25
"""Characters per token vary by tokenizer: token counts span -25%..+25% of the estimate."""
SPEECH_TOKENS = (25, 60, 150)
"""Tokens (low, expected, high) of one spoken reply in a Latin-script language; other scripts
scale by ``ASCII_CHARS_PER_TOKEN / OTHER_CHARS_PER_TOKEN`` (the same speech in more tokens)."""
CALLER_OUTPUT_TOKENS = (20, 50, 120)
"""Tokens of one caller reply (typed JSON: speech, expressed step, done) in a Latin script."""
TOOL_CALL_TOKENS = 30
"""Tokens of one tool call's name and arguments."""
JUDGE_OVERHEAD_TOKENS = 600
"""A judge prompt's fixed instructions and output rules, in tokens."""
JUDGE_TOKENS_PER_ITEM = (15, 40, 80)
"""A judge's reply per judged item (label, cited turns, short reason): low, expected, high."""


class Span(NamedTuple):
    """A low / expected / high figure."""

    low: float
    expected: float
    high: float

    def __add__(self, other: object) -> Span:
        assert isinstance(other, Span)
        return Span(self.low + other.low, self.expected + other.expected, self.high + other.high)

    def times(self, k: float) -> Span:
        """Every figure times ``k``."""
        return Span(self.low * k, self.expected * k, self.high * k)


ZERO = Span(0.0, 0.0, 0.0)


def text_tokens(text: str) -> float:
    """Estimated tokens of ``text``: ASCII characters at :data:`ASCII_CHARS_PER_TOKEN`, the rest
    at :data:`OTHER_CHARS_PER_TOKEN` (expected figure; :data:`TOKEN_SPAN` gives the span)."""
    ascii_n = sum(1 for ch in text if ord(ch) < 128)
    return ascii_n / ASCII_CHARS_PER_TOKEN + (len(text) - ascii_n) / OTHER_CHARS_PER_TOKEN


def _script_factor(scenario: Scenario) -> float:
    """How many times more tokens the same speech takes in the scenario's script."""
    latin = scenario.brief.script.strip().lower() in {"latin", "latn", "roman"}
    return 1.0 if latin else ASCII_CHARS_PER_TOKEN / OTHER_CHARS_PER_TOKEN


@dataclass
class RoleUse:
    """Requests and tokens of one role over one or more episodes."""

    requests: Span = ZERO
    input_tokens: Span = ZERO
    output_tokens: Span = ZERO

    def __add__(self, other: RoleUse) -> RoleUse:
        return RoleUse(self.requests + other.requests, self.input_tokens + other.input_tokens,
                       self.output_tokens + other.output_tokens)

    def times(self, k: float) -> RoleUse:
        """Every figure times ``k`` (``k`` episodes of this one)."""
        return RoleUse(self.requests.times(k), self.input_tokens.times(k), self.output_tokens.times(k))


def _tool_rounds(scenario: Scenario) -> int:
    """Candidate requests that answer tool results: the reference path's turns with tool calls,
    else the action checks' minimum counts (one call per round)."""
    if scenario.reference_path:
        return sum(1 for t in scenario.reference_path if t.tool_calls)
    return sum(c.count.min for c in scenario.action_checks)


def _growing_input(requests: float, fixed: float, added_per_request: float) -> float:
    """Input tokens of ``requests`` requests that each send ``fixed`` tokens plus everything the
    earlier requests added (``added_per_request`` each): n*P + m*n(n-1)/2."""
    return requests * fixed + added_per_request * requests * (requests - 1) / 2


def episode_model(agent: LoadedAgent, scenario: Scenario, max_turns: int) -> dict[str, RoleUse]:
    """The turn model's usage of one episode, by role (``candidate``, ``caller``, ``task_judge``,
    ``conversation_judge``); see the module docstring for the rules."""
    steps = len(scenario.brief.plan)
    k = _tool_rounds(scenario)
    ending = 1 if agent.config.call_ending_tools else 0
    f = _script_factor(scenario)
    tools = json.dumps([t.model_dump(include={"name", "description", "parameters"})
                        for t in agent.config.tools], ensure_ascii=False)
    cand_prompt = text_tokens(render_instructions(agent, scenario)) + text_tokens(tools)
    caller_prompt = text_tokens(build_caller_prompt(scenario.brief))
    meaning = statistics.mean(len(s.meaning) for s in scenario.brief.plan)
    utter = meaning / ASCII_CHARS_PER_TOKEN * f  # the caller says a step in its own words
    results = [text_tokens(json.dumps(e.response, ensure_ascii=False, default=str))
               for fx in scenario.fixtures.values() for e in fx.queue]
    result = statistics.mean(results) if results else 20.0
    task_items = sum(c.pillar == Pillar.TASK for c in scenario.criteria)  # action checks are not judged
    conv_items = sum(c.pillar == Pillar.CONVERSATION for c in scenario.criteria) + 8  # + ratings
    criteria_text = sum(text_tokens(c.statement + c.anchors.met + c.anchors.partial + c.anchors.not_met
                                    + "".join(c.excerpts)) for c in scenario.criteria)
    figures: dict[str, list[tuple[float, float, float]]] = {}
    for i, (turns, rounds, token_k, judge_calls) in enumerate((
        (steps, k, 1 - TOKEN_SPAN, 1),
        (min(max_turns, steps + 1), k, 1.0, 1),
        (min(max_turns, 2 * steps + 2), 2 * k + 1 if k else 0, 1 + TOKEN_SPAN, 2),
    )):
        speech, said = SPEECH_TOKENS[i] * f, CALLER_OUTPUT_TOKENS[i] * f
        per_item = JUDGE_TOKENS_PER_ITEM[i]
        task_calls = judge_calls if task_items else 0
        # a successful call-ending tool ends the episode: no request reads its result
        cand_requests = 1 + turns + max(0, rounds - ending)
        transcript = speech + turns * (utter + speech) + rounds * (TOOL_CALL_TOKENS + result)
        cand_in = _growing_input(cand_requests, cand_prompt, transcript / cand_requests)
        cand_out = (1 + turns) * speech + rounds * TOOL_CALL_TOKENS
        caller_in = _growing_input(turns, caller_prompt + speech, speech + said)
        task_in = task_calls * (JUDGE_OVERHEAD_TOKENS + transcript + criteria_text
                                 + text_tokens(scenario.goal))
        conv_in = judge_calls * (2 * JUDGE_OVERHEAD_TOKENS + 1.5 * transcript)  # intended + observed
        case = {
            "candidate": (cand_requests, cand_in * token_k, cand_out * token_k),
            "caller": (turns, caller_in * token_k, turns * said * token_k),
            "task_judge": (task_calls, task_in * token_k, task_calls * per_item * task_items),
            "conversation_judge": (judge_calls, conv_in * token_k, judge_calls * per_item * conv_items),
        }
        for role, fig in case.items():
            figures.setdefault(role, []).append(fig)
    return {role: RoleUse(*(Span(*(c[i] for c in cs)) for i in range(3))) for role, cs in figures.items()}


def usage_span(per_episode: list[Usage]) -> RoleUse:
    """History: mean requests/tokens per episode, spanned by the smallest and largest episode."""
    def span(values: list[float]) -> Span:
        return Span(min(values), statistics.mean(values), max(values))
    return RoleUse(span([u.calls for u in per_episode]), span([u.input_tokens for u in per_episode]),
                   span([u.output_tokens for u in per_episode]))


@dataclass
class RoleEstimate:
    """One role's share of the remaining episodes: ``name`` is ``candidate:<slug>``, ``caller``,
    ``task_judge`` or ``conversation_judge``; ``cost_usd`` None when the role's price is unknown."""

    name: str
    spec: str
    episodes: int
    use: RoleUse
    cost_usd: Span | None
    source: str


@dataclass
class CostPlan:
    """The plan: episodes planned / done / to run, each role's estimate for the episodes to run,
    ``spent_usd`` by the run so far (None when a price was unknown), ``per_episode_usd`` the
    expected cost (every role) of one more episode of each candidate slug (None: unknown)."""

    planned: int
    done: int
    todo: int
    roles: list[RoleEstimate] = field(default_factory=list)
    spent_usd: float | None = 0.0
    per_episode_usd: dict[str, float | None] = field(default_factory=dict)

    @property
    def cost_usd(self) -> Span | None:
        """The estimated cost of the episodes to run (None when any role's price is unknown)."""
        total = ZERO
        for r in self.roles:
            if r.cost_usd is None:
                return None
            total = total + r.cost_usd
        return total


def role_cost(spec: str, use: RoleUse, table: PriceTable | None,
              custom_endpoint: bool = False) -> Span | None:
    """USD of ``use`` at ``spec``'s price (all input at the full input rate); None when unknown."""
    figures = []
    for i in range(3):
        u = Usage(input_tokens=round(use.input_tokens[i]), output_tokens=round(use.output_tokens[i]))
        c = call_cost(spec, u, table=table, custom_endpoint=custom_endpoint)
        if c is None:
            return None
        figures.append(c)
    return Span(*figures)


def _history(run_dir: Path, episode_ids: set[str]) -> tuple[dict[str, dict[str, list[Usage]]], float | None]:
    """Usage per finished episode by candidate slug and role, and the run's spend so far (traces
    and every grade set's judges)."""
    by_cand: dict[str, dict[str, list[Usage]]] = {}
    spent: float | None = 0.0

    def charge(usages: Iterable[Usage]) -> None:
        nonlocal spent
        for u in usages:
            spent = None if spent is None or u.cost_usd is None else spent + u.cost_usd

    store = RunStore(run_dir)
    try:
        manifest = store.load_manifest()
        if manifest is None:
            return by_cand, spent
        slug_of = {k.episode_id: k.candidate for k in manifest.planned}
        judged: dict[str, dict[str, Usage]] = {}
        for gs in manifest.grade_sets:
            for g in iter_episode_grades(run_dir, gs):
                charge(g.usage.values())
                judged.setdefault(g.episode_id, {}).update(g.usage)
        for eid in sorted(store.finished_ids() & episode_ids):
            trace = store.load_trace(eid)
            charge(trace.usage.values())
            if trace.skipped:
                continue
            roles = by_cand.setdefault(slug_of[eid], {})
            for role, u in (trace.usage | judged.get(eid, {})).items():
                roles.setdefault(role, []).append(u)
    finally:
        store.close()
    return by_cand, spent


def cost_plan(bundle: Bundle, todo: list[EpisodeKey], planned: list[EpisodeKey], *,
              specs: dict[str, tuple[str, bool]], max_turns: int, run_dir: Path | None = None,
              grade: bool = True, table: PriceTable | None = None) -> CostPlan:
    """Estimate the cost of running ``todo`` (of ``planned``). ``specs`` maps role names
    (``candidate:<slug>``, ``caller``, ``task_judge``, ``conversation_judge``) to (model spec,
    served from a custom OpenAI-compatible endpoint).
    With ``run_dir`` holding finished episodes of a candidate, that candidate's estimate comes
    from their usage (``source`` says which). Raises ``ValueError`` for a key whose scenario is
    not in ``bundle``."""
    history, spent = _history(run_dir, {k.episode_id for k in planned}) if run_dir else ({}, 0.0)
    roles = ["caller"] + (["task_judge", "conversation_judge"] if grade else [])
    uses: dict[tuple[str, str], RoleUse] = {}  # (estimate name, source) -> use
    per_episode: dict[str, float | None] = {}
    for slug in dict.fromkeys(k.candidate for k in todo):
        keys = [k for k in todo if k.candidate == slug]
        seen = history.get(slug, {})
        if seen.get("candidate"):
            n = len(seen["candidate"])
            source = f"history ({n} episode{'s' if n != 1 else ''})"
            one = {r: usage_span(seen[r]) if seen.get(r) else RoleUse() for r in ["candidate", *roles]}
            total = {r: u.times(len(keys)) for r, u in one.items()}
        else:
            source = "turn model"
            total = {r: RoleUse() for r in ["candidate", *roles]}
            for key in keys:
                agent = bundle.agents.get(key.agent_id)
                scen = next((s for s in agent.scenarios if s.id == key.scenario_id), None) if agent else None
                if agent is None or scen is None:
                    raise ValueError(f"episode {key.episode_id}: scenario {key.agent_id}/{key.scenario_id} "
                                     "is not in the bundle")
                model = episode_model(agent, scen, max_turns)
                for r in total:
                    total[r] = total[r] + model[r]
        cost_one: float | None = 0.0
        for r, u in total.items():
            name = f"candidate:{slug}" if r == "candidate" else r
            uses[(name, source)] = uses.get((name, source), RoleUse()) + u
            c = role_cost(*specs[name][:1], u, table, specs[name][1])
            cost_one = None if c is None or cost_one is None else cost_one + c.expected / max(1, len(keys))
        per_episode[slug] = cost_one
    plan = CostPlan(planned=len(planned), done=len(planned) - len(todo), todo=len(todo),
                    spent_usd=spent, per_episode_usd=per_episode)
    merged: dict[str, tuple[RoleUse, list[str]]] = {}
    for (name, source), u in uses.items():
        prev, sources = merged.get(name, (RoleUse(), []))
        merged[name] = (prev + u, [*sources, source])
    counts = {f"candidate:{s}": sum(k.candidate == s for k in todo) for s in per_episode}
    for name, (u, sources) in sorted(merged.items(), key=lambda kv: not kv[0].startswith("candidate:")):
        spec, custom = specs[name]
        plan.roles.append(RoleEstimate(name, spec, counts.get(name, len(todo)), u,
                                       role_cost(spec, u, table, custom), " + ".join(dict.fromkeys(sources))))
    return plan


def _custom_endpoint(spec: str, base_url: str | None) -> bool:
    """An ``openai:`` model served from another base URL is priced from ``custom_endpoints``."""
    return spec.startswith("openai:") and base_url is not None and "api.openai.com" not in base_url


def plan_for_run(config: RunConfig, bundle: Bundle, table: PriceTable | None = None) -> CostPlan:
    """The cost plan of ``config`` (a new run, or the rest of the run in ``config.out``).
    Raises ``ValueError`` for filters that select nothing (as the run would)."""
    cands = [(c.spec, c.settings) for c in config.candidates]
    planned = plan_episodes(bundle, cands, config.repeats, config.filters,
                            sweep_personas(bundle, config.filters, config.personas, config.personas_file))
    out = Path(config.out)
    done: set[str] = set()
    if (out / MANIFEST).exists():
        store = RunStore(out)
        try:
            done = store.finished_ids() - rerun_ids(store)
        finally:
            store.close()
    todo = [k for k in planned if k.episode_id not in done]
    specs: dict[str, tuple[str, bool]] = {
        f"candidate:{candidate_slug(c.spec, c.settings)}":
            (c.spec, _custom_endpoint(c.spec, c.settings.base_url))
        for c in config.candidates
    }
    for name in ("caller", "task_judge", "conversation_judge"):
        role: RoleSpec = getattr(config, name)
        specs[name] = (role.spec, _custom_endpoint(role.spec, role.settings.base_url))
    return cost_plan(bundle, todo, planned, specs=specs, max_turns=config.limits.max_caller_turns,
                     run_dir=out if (out / MANIFEST).exists() else None, grade=config.grade, table=table)


def _n(x: float) -> str:
    return f"{x:,.0f}"


def _usd(span: Span | None) -> str:
    if span is None:
        return "unknown (a model without a price)"
    return f"${span.expected:,.4f} (${span.low:,.4f} .. ${span.high:,.4f})"


def plan_lines(plan: CostPlan) -> list[str]:
    """The dry run's text, one fact per line, each under 80 columns where the names allow."""
    lines = [f"episodes: {plan.planned} planned, {plan.done} finished, {plan.todo} to run"]
    if plan.spent_usd is None:
        lines.append("spent so far: unknown (a model without a price)")
    elif plan.done:
        lines.append(f"spent so far: ${plan.spent_usd:,.4f}")
    for r in plan.roles:
        u = r.use
        lines += [
            f"{r.name}:",
            f"  {r.spec} · {r.episodes} episode(s) · from the {r.source}",
            f"  requests {_n(u.requests.expected)} ({_n(u.requests.low)} .. {_n(u.requests.high)})",
            f"  input tokens {_n(u.input_tokens.expected)} ({_n(u.input_tokens.low)} .. "
            f"{_n(u.input_tokens.high)})",
            f"  output tokens {_n(u.output_tokens.expected)} ({_n(u.output_tokens.low)} .. "
            f"{_n(u.output_tokens.high)})",
            f"  cost {_usd(r.cost_usd)}",
        ]
    lines.append(f"estimated cost of the episodes to run: {_usd(plan.cost_usd)}")
    lines.append("figures are expected (low .. high); the turn model and its margin: docs/cost.md")
    lines.append("prices: callbench/models/prices.yaml; prompt-cache discounts not counted")
    return lines
