"""The typed bundle: models, matchers, loading, rendering, hashing and static audits."""

from callbench.bundle.loader import (
    BundleError,
    Problem,
    load_bundle,
    load_bundle_collect,
    render_instructions,
    sha256_text,
)
from callbench.bundle.models import (
    ActionCheck,
    AgentConfig,
    Bundle,
    Criterion,
    Diagnostic,
    LoadedAgent,
    Pillar,
    Scenario,
)

__all__ = [
    "ActionCheck",
    "AgentConfig",
    "Bundle",
    "BundleError",
    "Criterion",
    "Diagnostic",
    "LoadedAgent",
    "Pillar",
    "Problem",
    "Scenario",
    "load_bundle",
    "load_bundle_collect",
    "render_instructions",
    "sha256_text",
]
