"""The report says which candidates are deployed agents, whether their deployment was read and
checked against the bundle, and what no adapter can observe of them."""

from __future__ import annotations

from types import SimpleNamespace

from callbench.report.model.fairness import deployed_notes


def _run(run_id: str, configs: dict[str, str | None]) -> SimpleNamespace:
    return SimpleNamespace(manifest=SimpleNamespace(run_id=run_id, deployed_configs=configs))


def test_read_and_unreadable_deployments_are_named() -> None:
    lines = deployed_notes([_run("r1", {"deployed:vapi:asst": "ab" * 32, "deployed:http:http://x": None}),
                            _run("r2", {})])  # type: ignore[list-item]
    assert len(lines) == 2
    http, vapi = lines
    assert http.startswith("deployed:http:http://x (run r1) is a deployed agent: its configuration cannot "
                           "be read on this platform, so its tools and prompt were not checked")
    assert "read and its tools checked against the bundle before the run (sha256 abababababab)" in vapi
    assert all("cannot observe its system prompt, token usage, model reasoning" in x for x in lines)


def test_no_deployed_candidate_no_line() -> None:
    assert deployed_notes([_run("r", {})]) == []  # type: ignore[list-item]
