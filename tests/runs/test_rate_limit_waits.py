"""Each invocation's manifest entry records its rate-limit waits: requests answered 429 and the
seconds slept before retrying them, by role and by candidate; and the seconds requests queued for
callbench's own provider permits."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from callbench.bundle.models import Bundle
from callbench.models.base import ModelClient, ModelRequest, ModelResponse, ModelSettings
from callbench.models.faults import RateLimitWaits, collect_faults
from callbench.models.remote.openai_client import OpenAIClient
from callbench.report.model.build import build_report
from callbench.report.model.load import load_runs
from callbench.runfolder.manifest import MeasuredAt, RunManifest
from callbench.runs import guard
from callbench.runs.executor import RoleSpec
from callbench.runs.plan import candidate_slug
from callbench.runs.session import run_and_grade
from fakes.fault_server import FaultServer

from .conftest import scripted_clients, scripted_config

RETRY_AFTER_MS = 4500


async def _run_against_429s(out: Path, dairy: Bundle, roles: frozenset[str], *, preflight: bool,
                            ) -> tuple[RunManifest, str | None, list[Any], list[float], str]:
    """A run whose candidate and conversation judge are OpenAI clients of a fake that answers
    every request of ``roles`` (the fake's :func:`role_of`) 429 twice, then serves it: (manifest,
    grade set, the fake's log, the seconds the clients slept, the candidate's slug). The clients'
    sleep is injected: the test never waits the Retry-After."""
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    with FaultServer(rate=1.0, kinds=("rate_limit",), repeats=2, retry_after_ms=RETRY_AFTER_MS,
                     roles=roles) as server:
        settings = ModelSettings(base_url=server.url, max_attempts=4, retry_base_delay_s=0.0, timeout_s=60.0)
        base = scripted_config(out, repeats=1)
        config = base.model_copy(update={
            "candidates": [RoleSpec(spec="openai:fake-agent", settings=settings)],
            "conversation_judge": RoleSpec(spec="openai:fake-judge", settings=settings),
            "preflight": preflight})
        clients: dict[str, ModelClient] = scripted_clients(base, dairy)
        del clients[f"candidate:{candidate_slug('scripted:reference', ModelSettings())}"]
        slug = candidate_slug("openai:fake-agent", settings)
        clients[f"candidate:{slug}"] = OpenAIClient("openai:fake-agent", settings, sleep=sleep)
        clients["conversation_judge"] = OpenAIClient("openai:fake-judge", settings, sleep=sleep)
        manifest, grade_set = await run_and_grade(config, clients=clients, bundle=dairy)
        for c in clients.values():
            await c.aclose()
        log = list(server.log)
    return manifest, grade_set, log, slept, slug


async def test_a_run_against_a_429_server_records_the_exact_count_and_seconds(
        tmp_path: Path, dairy: Bundle) -> None:
    out = tmp_path / "run"
    manifest, grade_set, log, slept, slug = await _run_against_429s(
        out, dairy, frozenset({"candidate", "conversation_judge"}), preflight=False)
    assert grade_set is not None and manifest.completed == len(manifest.planned) > 0
    answered = {role: sum(1 for e in log if e.role == role and e.status == 429)
                for role in ("candidate", "conversation_judge")}
    assert answered["candidate"] > 0 and answered["conversation_judge"] > 0
    # every body is answered 429 twice, then served: each wait is the server's Retry-After
    assert slept == [RETRY_AFTER_MS / 1000] * (answered["candidate"] + answered["conversation_judge"])
    saved = RunManifest.model_validate_json((out / "manifest.json").read_text(encoding="utf-8"))
    (here,) = saved.measured_at
    assert here.rate_limits is not None
    waits = {role: (w.answered_429, round(w.retry_wait_s, 6)) for role, w in here.rate_limits.items()}
    assert waits == {"candidate": (answered["candidate"], round(4.5 * answered["candidate"], 6)),
                     "caller": (0, 0.0), "task_judge": (0, 0.0),
                     "conversation_judge": (answered["conversation_judge"],
                                            round(4.5 * answered["conversation_judge"], 6))}
    by_candidate = here.candidate_rate_limits[slug]
    assert (by_candidate.answered_429, by_candidate.retry_wait_s) == (answered["candidate"],
                                                                      4.5 * answered["candidate"])
    # the episodes' own ledgers hold the same candidate seconds
    ledgers = [json.loads(p.read_text(encoding="utf-8")) for p in (out / "faults").glob("*.json")]
    assert sum(d["roles"]["candidate"]["rate_limit_wait_s"] for d in ledgers) == 4.5 * answered["candidate"]
    # and the report says so, beside the latency notes, naming the throttled candidate
    notes = build_report(load_runs([out]), n_samples=50).latency_warnings
    n, seconds = answered["candidate"], 4.5 * answered["candidate"]
    said = f"candidate {n} answered 429, {seconds:.1f} s waited before retrying"
    assert any(said in line for line in notes)
    assert any(line.startswith("Candidates whose requests waited on rate limits: ")
               and f"({n} answered 429, {seconds:.1f} s waited" in line for line in notes)


async def test_the_preflights_waits_are_recorded_apart_from_the_runs(tmp_path: Path, dairy: Bundle) -> None:
    """A provider that answers the preflight's requests 429 (twice each, then serves them) and
    nothing else: the invocation's ``preflight_rate_limits`` hold exactly those, by role, its
    ``rate_limits`` none, and the report names them as before measuring."""
    out = tmp_path / "run"
    manifest, _, log, slept, slug = await _run_against_429s(out, dairy, frozenset({"probe"}), preflight=True)
    assert manifest.completed == len(manifest.planned) > 0
    answered = {role: sum(1 for e in log if e.model == model and e.status == 429)
                for role, model in (("candidate", "fake-agent"), ("conversation_judge", "fake-judge"))}
    assert answered["candidate"] >= 2 and answered["conversation_judge"] >= 2
    assert {e.role for e in log if e.status == 429} == {"probe"}
    assert slept == [RETRY_AFTER_MS / 1000] * sum(answered.values())
    saved = RunManifest.model_validate_json((out / "manifest.json").read_text(encoding="utf-8"))
    (here,) = saved.measured_at
    assert here.preflight_rate_limits is not None and here.rate_limits is not None
    pre = {role: (w.answered_429, round(w.retry_wait_s, 6)) for role, w in here.preflight_rate_limits.items()}
    assert pre == {"candidate": (answered["candidate"], round(4.5 * answered["candidate"], 6)),
                   "caller": (0, 0.0), "task_judge": (0, 0.0),
                   "conversation_judge": (answered["conversation_judge"],
                                          round(4.5 * answered["conversation_judge"], 6))}
    assert all(w.answered_429 == 0 and w.retry_wait_s == 0 for w in here.rate_limits.values())
    assert here.candidate_rate_limits[slug].answered_429 == 0
    notes = build_report(load_runs([out]), n_samples=50).latency_warnings
    n = answered["candidate"]
    assert any(line.startswith("Rate limits before measuring (the preflight's one request per role): ")
               and f"candidate {n} answered 429, {4.5 * n:.1f} s waited before retrying" in line
               for line in notes)
    assert not any(line.startswith("Candidates whose requests waited on rate limits") for line in notes)


def test_an_old_manifest_entry_without_waits_still_loads() -> None:
    old = {"started": "2024-05-01T10:00:00+00:00", "platform": "Linux", "cpu_count": 2, "concurrency": 3}
    at = MeasuredAt.model_validate(old)
    assert at.rate_limits is None and at.candidate_rate_limits == {}
    assert at.preflight_rate_limits is None and at.event_loop == ""
    assert at.concurrency == 3


def test_waits_add_by_role_and_by_candidate() -> None:
    at = MeasuredAt(started="2024-05-01T10:00:00+00:00")
    with collect_faults() as ledger:
        from callbench.models.faults import note_fault, note_retry
        note_fault("candidate", "rate_limit")
        note_retry("candidate", "rate_limit", 2.5)
        note_fault("caller", "server_error")
        note_retry("caller", "server_error", 7.0)  # a 5xx backoff is no rate-limit wait
    at.add_waits(ledger.roles, "cand-a")
    at.add_waits(ledger.roles, "cand-b")
    assert at.rate_limits is not None
    assert at.rate_limits["candidate"] == RateLimitWaits(answered_429=2, retry_wait_s=5.0)
    assert at.rate_limits["caller"] == RateLimitWaits()
    assert at.candidate_rate_limits == {"cand-a": RateLimitWaits(answered_429=1, retry_wait_s=2.5),
                                        "cand-b": RateLimitWaits(answered_429=1, retry_wait_s=2.5)}


class _Held:
    """A client whose calls end when ``release`` is set."""

    spec = "openai:held"
    settings = ModelSettings()

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.entered = asyncio.Event()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.entered.set()
        await self.release.wait()
        return ModelResponse(content="ok")

    async def aclose(self) -> None:
        pass


async def test_a_call_queued_for_its_provider_permit_records_the_wait(monkeypatch: Any) -> None:
    clock = [100.0]
    monkeypatch.setattr(guard, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    inner = _Held()
    limited = guard.limit_providers({"candidate:a": inner}, {"openai": 1}, 1)["candidate:a"]  # type: ignore[dict-item]
    request = ModelRequest.model_validate({"messages": [], "context": {"role": "caller"}})
    with collect_faults() as ledger:
        first = asyncio.ensure_future(limited.complete(request))
        await inner.entered.wait()
        second = asyncio.ensure_future(limited.complete(request))
        await asyncio.sleep(0)  # the second call is now queued on the permit
        clock[0] = 103.25
        inner.release.set()
        await asyncio.gather(first, second)
    assert ledger.roles["caller"].limiter_wait_s == 3.25  # the first call did not queue
