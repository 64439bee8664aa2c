"""The output budget of a generation request, from the expected scenario size.

A scenario is one JSON object of predictable size: the starter's 100 scenarios average 4,360
output tokens per agent (docs/generating.md, "Cost", the project's token estimate
:func:`callbench.runs.demo.estimate_tokens`), the largest agent's mean 6,045. A provider's or the
embedded model's default output limit (2,048 tokens for the local model's JSON answers) cuts such a
scenario off mid-object. So each request carries its own budget
(:attr:`callbench.models.base.ModelRequest.max_output_tokens`; a ``max_tokens`` in the generator's
settings overrides it):

    expected = mean estimated tokens of the agent's own scenarios in the item's language, else
               :data:`MEAN_SCENARIO_TOKENS` times the script factor of the language
               (:data:`SCRIPT_FACTOR`: 1 for Latin-script languages, 3 for the others, whose free
               text costs about one token per character instead of one per 4.5)
    budget   = expected * :data:`MARGIN`, rounded up to a multiple of 256, within
               [:data:`MIN_BUDGET`, :data:`MAX_BUDGET`]

The margin of 2 covers the largest starter agent (1.39 times the mean) and a scenario of the
plan's hard difficulty with more turns. A repair after an answer cut off at its budget
(``output.truncated``) gets twice the budget, up to :data:`MAX_BUDGET`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from callbench.bundle.models import Scenario
from callbench.runs.demo import estimate_tokens

MEAN_SCENARIO_TOKENS = 4360
"""Mean output tokens of a starter scenario (docs/generating.md, "Cost")."""
MARGIN = 2.0
MIN_BUDGET = 4096
MAX_BUDGET = 32768
LATIN_LANGUAGES = frozenset({
    "en", "es", "fr", "de", "it", "pt", "nl", "sv", "da", "no", "nb", "fi", "pl", "cs", "sk", "ro",
    "hu", "tr", "id", "ms", "vi", "sw", "tl", "fil", "ca", "hr", "sl", "et", "lv", "lt",
})
"""Primary language subtags written in the Latin script (others count with :data:`SCRIPT_FACTOR`)."""
SCRIPT_FACTOR = 3.0


def expected_tokens(scenarios: Sequence[Scenario], language: str) -> float:
    """The expected output tokens of one scenario in ``language`` of an agent whose scenarios (before
    the batch: a resumed batch sizes its requests as the first run did) are ``scenarios``."""
    own = [
        estimate_tokens(json.dumps(s.model_dump(mode="json", exclude_defaults=True), ensure_ascii=False))
        for s in scenarios
        if s.language.lower() == language.lower()
    ]
    if own:
        return sum(own) / len(own)
    primary = language.split("-")[0].lower()
    return MEAN_SCENARIO_TOKENS * (1.0 if primary in LATIN_LANGUAGES else SCRIPT_FACTOR)


def output_budget(scenarios: Sequence[Scenario], language: str) -> int:
    """The output budget in tokens of a request for one scenario in ``language`` of an agent with
    ``scenarios`` (see :func:`expected_tokens`)."""
    raw = math.ceil(expected_tokens(scenarios, language) * MARGIN / 256) * 256
    return max(MIN_BUDGET, min(MAX_BUDGET, raw))


def repair_budget(previous: int) -> int:
    """The budget of the request after an answer cut off at ``previous`` tokens."""
    return min(MAX_BUDGET, previous * 2)
