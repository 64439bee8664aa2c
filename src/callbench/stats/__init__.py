"""Statistics over graded episodes: hierarchical bootstrap intervals (agents, then scenarios, then
repeats), paired comparisons on shared scenarios, and per-candidate summaries (DESIGN.md
"Confidence intervals"; paper, "Confidence intervals come from 2,000 hierarchical bootstrap
samples ...")."""

from callbench.stats.bootstrap import BootstrapResult, derive_rng, flat_bootstrap, hierarchical_bootstrap
from callbench.stats.paired import PairedComparison, paired_comparison
from callbench.stats.summary import CandidateSummary, EpisodeRecord, summarize_candidate

__all__ = [
    "BootstrapResult",
    "CandidateSummary",
    "EpisodeRecord",
    "PairedComparison",
    "derive_rng",
    "flat_bootstrap",
    "hierarchical_bootstrap",
    "paired_comparison",
    "summarize_candidate",
]
