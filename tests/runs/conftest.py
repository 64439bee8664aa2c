from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from callbench.bundle.models import Bundle
from callbench.bundle.validate.audits import load_bundle
from callbench.models.base import ModelClient, ModelSettings
from callbench.models.scripted.judge import create_scripted_judge
from callbench.models.scripted.models import create_scripted
from callbench.runs.executor import RoleSpec, RunConfig
from callbench.runs.plan import candidate_slug
from callbench.runs.session import run_and_grade

# Ray in these tests stays on loopback (callbench.runs.ray_executor._keep_on_loopback): set before
# any test module imports Ray, inherited by `ray start` and `callbench run` subprocesses
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

DAIRY = Path(__file__).parents[1] / "sim" / "data" / "dairy_bundle"


@pytest.fixture
def dairy() -> Bundle:
    return load_bundle(DAIRY)


def scripted_config(
    out: Path, candidates: tuple[str, ...] = ("scripted:reference",), repeats: int = 2
) -> RunConfig:
    return RunConfig(
        bundle_path=DAIRY,
        out=out,
        candidates=[RoleSpec(spec=c) for c in candidates],
        caller=RoleSpec(spec="scripted:plan"),
        task_judge=RoleSpec(spec="scripted:met"),
        conversation_judge=RoleSpec(spec="scripted:met"),
        repeats=repeats,
        seed=7,
        concurrency=2,
    )


def scripted_clients(config: RunConfig, bundle: Bundle) -> dict[str, ModelClient]:
    clients: dict[str, ModelClient] = {
        f"candidate:{candidate_slug(c.spec, c.settings)}": create_scripted(c.spec, c.settings, bundle)
        for c in config.candidates
    }
    clients["caller"] = create_scripted("scripted:plan", ModelSettings(), bundle)
    clients["task_judge"] = create_scripted_judge("scripted:met", ModelSettings())
    clients["conversation_judge"] = create_scripted_judge("scripted:met", ModelSettings())
    return clients


@pytest.fixture
def graded(tmp_path: Path, dairy: Bundle) -> Path:
    """A scripted run of the dairy bundle, graded (every trace has timings)."""
    out = tmp_path / "run"
    config = scripted_config(out, repeats=1)
    asyncio.run(run_and_grade(config, clients=scripted_clients(config, dairy), bundle=dairy))
    return out
