"""The typed bundle: models, matchers, loading, rendering, hashing and static audits.

Rooms: the core (this folder: models, matchers, loading, rendering, hashing, provenance, fixtures,
checks), ``state/`` (stateful backends: their typed spec, the engine, the built-in operations, state
checks) and ``validate/`` (the static audits, above the core: the loader never imports them).
``tests/bundle/test_rooms.py`` holds the rules and checks them on the import graph.

The names below are imported on first use (PEP 562 module ``__getattr__``), so a module of this
package that needs none of them (``validate.cache``) does not pay for loading the models.
``load_bundle`` (load and run every audit) lives in ``validate/audits.py``; this facade names it
here so that library users keep one import path."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from callbench.bundle.loader import (
        BundleError,
        Problem,
        load_bundle_collect,
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
    from callbench.bundle.render import render_instructions
    from callbench.bundle.validate.audits import load_bundle

_HOME = {
    **dict.fromkeys(("BundleError", "Problem", "load_bundle_collect", "sha256_text"),
                    "callbench.bundle.loader"),
    "render_instructions": "callbench.bundle.render",
    "load_bundle": "callbench.bundle.validate.audits",
    **dict.fromkeys(("ActionCheck", "AgentConfig", "Bundle", "Criterion", "Diagnostic", "LoadedAgent",
                     "Pillar", "Scenario"), "callbench.bundle.models"),
}

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


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'callbench.bundle' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
