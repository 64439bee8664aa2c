"""Estimated cost of a ten-scenario ``callbench generate`` batch for each starter agent.
An ESTIMATE, not a measurement: there is no network here, so no frontier API was called.

Prompt tokens per request: the first request exactly as :func:`callbench.generate.request.first_messages`
builds it for item 1 of a ten-item plan (rules + rendered operating document + tools + success
conditions + plan + the agent's existing scenario list), plus the scenario JSON Schema sent as the
structured-output format, counted with the project's token estimate
(:func:`callbench.runs.demo.estimate_tokens`: ASCII characters / 4.5 plus one per other character;
written for the Qwen tokenizer, and close to the o200k / Claude tokenizers for English text).
Output tokens per scenario: the agent's starter scenario files as compact JSON (what the model
writes), same estimate; reasoning tokens at high effort are not included (they bill as output and
can double it). Batch cost: ten first requests and ten answers (no repair), and a second figure
with one repair for every scenario (each repair re-sends the conversation: prompt + previous answer
+ a problem list of about 300 tokens, and gets a whole scenario back). Prices from the pinned
table (``models/prices.yaml``), prompt caching ignored (it would cut the repeated prompt cost).

Run: ``python benchmarks/generation_cost.py [--models openai:gpt-5.5,anthropic:claude-opus-4-6]``.
"""

from __future__ import annotations

import argparse
import json
import statistics

from callbench.bundle.render import render_instructions
from callbench.bundle.validate.audits import load_bundle
from callbench.generate.plan import make_plan
from callbench.generate.request import first_messages, scenario_schema
from callbench.models.base import Usage
from callbench.models.pricing import call_cost
from callbench.runs.demo import estimate_tokens, starter_path

PROBLEM_LIST_TOKENS = 300


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--models",
        default="openai:gpt-5.5,openai:gpt-5,anthropic:claude-opus-4-6,anthropic:claude-sonnet-4-6",
    )
    args = ap.parse_args()
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    bundle = load_bundle(starter_path())
    schema_tokens = estimate_tokens(json.dumps(scenario_schema(), separators=(",", ":")))
    rows = []
    for aid, agent in sorted(bundle.agents.items()):
        rendered = render_instructions(agent)
        plan = make_plan(agent, rendered, n=10, seed=0, languages={}, difficulty={})
        existing = sorted((s.id, s.title) for s in agent.scenarios)
        msgs = first_messages(agent, rendered, plan, plan.items[0], existing)
        prompt = sum(estimate_tokens(m.content or "") for m in msgs) + schema_tokens
        outs = [
            estimate_tokens(
                json.dumps(
                    s.model_dump(mode="json", exclude_defaults=True),
                    ensure_ascii=False,
                    separators=(",", ":"),
                )
            )
            for s in agent.scenarios
        ]
        out = statistics.mean(outs)
        rows.append((aid, prompt, out))
    print(f"scenario JSON Schema: {schema_tokens:,.0f} tokens (counted in every prompt)")
    header = f"{'agent':28} {'prompt/req':>10} {'output/scen':>11}" + "".join(f" {m:>26}" for m in models)
    print(header)
    totals = {m: [0.0, 0.0] for m in models}
    for aid, prompt, out in rows:
        cells = []
        for m in models:
            one = call_cost(m, Usage(input_tokens=round(10 * prompt), output_tokens=round(10 * out)))
            rep = call_cost(
                m,
                Usage(
                    input_tokens=round(10 * (2 * prompt + out + PROBLEM_LIST_TOKENS)),
                    output_tokens=round(20 * out),
                ),
            )
            assert one is not None and rep is not None, f"no price for {m}"
            totals[m][0] += one
            totals[m][1] += rep
            cells.append(f" ${one:6.2f} (1 repair ${rep:6.2f})")
        print(f"{aid:28} {prompt:10,.0f} {out:11,.0f}" + "".join(f"{c:>27}" for c in cells))
    n = len(rows)
    print(
        f"{'mean of ' + str(n) + ' agents':28} {statistics.mean(r[1] for r in rows):10,.0f} "
        f"{statistics.mean(r[2] for r in rows):11,.0f}"
        + "".join(f" ${totals[m][0] / n:6.2f} (1 repair ${totals[m][1] / n:6.2f})" for m in models)
    )


if __name__ == "__main__":
    main()
