"""Shared fixtures for the simulation tests: the small dairy bundle in ``data/dairy_bundle`` and a
runner that plays one episode with given clients."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from callbench.bundle.models import Bundle, LoadedAgent, Scenario
from callbench.bundle.validate.audits import load_bundle
from callbench.models.base import ModelClient, ModelRequest, ModelResponse, ModelSettings
from callbench.models.scripted.models import create_scripted
from callbench.models.scripted.script import ScriptedFileModel
from callbench.sim.episode import LoopLimits, run_episode
from callbench.trace import Trace

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def bundle() -> Bundle:
    return load_bundle(DATA / "dairy_bundle")


@pytest.fixture()
def dairy(bundle: Bundle) -> tuple[LoadedAgent, Scenario]:
    agent, scen = bundle.scenario("dairy_zero_supply")
    return agent.model_copy(deep=True), scen.model_copy(deep=True)


class Recorder:
    """Wraps a client and keeps every request it receives."""

    def __init__(self, inner: ModelClient) -> None:
        self.inner = inner
        self.spec = inner.spec
        self.settings: ModelSettings = inner.settings
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request.model_copy(deep=True))
        return await self.inner.complete(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


Runner = Callable[..., Awaitable[Trace]]


def with_scenario(bundle: Bundle, scenario: Scenario) -> Bundle:
    """A copy of ``bundle`` whose scenario of that id is ``scenario`` (scripted models read the bundle)."""
    b = bundle.model_copy(deep=True)
    agent = b.agents[scenario.agent]
    agent.scenarios = [scenario if x.id == scenario.id else x for x in agent.scenarios]
    return b


@pytest.fixture()
def run(bundle: Bundle, dairy: tuple[LoadedAgent, Scenario]) -> Runner:
    """``await run(candidate=..., caller=..., scenario=..., agent=..., seed=..., limits=...)``;
    clients may be spec strings (scripted:*), script data (list/dict) or clients."""

    def client(x: Any, b: Bundle) -> ModelClient:
        if isinstance(x, str):
            return create_scripted(x, None, b)
        if isinstance(x, list | dict):
            return ScriptedFileModel.from_data(x)
        return x  # type: ignore[no-any-return]

    async def _run(
        candidate: Any = "scripted:reference",
        caller: Any = "scripted:plan",
        *,
        agent: LoadedAgent | None = None,
        scenario: Scenario | None = None,
        seed: int = 1,
        repeat: int = 0,
        limits: LoopLimits | None = None,
        episode_id: str = "ep1",
    ) -> Trace:
        a, s = dairy
        b = with_scenario(bundle, scenario) if scenario is not None else bundle
        return await run_episode(
            agent or a,
            scenario or s,
            candidate=client(candidate, b),
            caller=client(caller, b),
            bundle_name=bundle.meta.name,
            bundle_version=bundle.meta.version,
            bundle_hash=bundle.content_hash,
            episode_id=episode_id,
            run_seed=seed,
            repeat=repeat,
            limits=limits or LoopLimits(),
        )

    return _run


@pytest.fixture()
def recorder() -> type[Recorder]:
    return Recorder
