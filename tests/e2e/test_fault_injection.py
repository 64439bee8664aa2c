"""End to end against the fault-injecting OpenAI-compatible fake: every role on a
provider that fails one request in five in every listed way; a judge with a bad key; a judge that
goes down in the middle of a run."""

from __future__ import annotations

import csv
import json
import re
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from callbench.cli import app
from callbench.models.faults import FAULT_KINDS as KNOWN_KINDS
from callbench.runfolder import episode_files
from callbench.runs.machine import EXIT_PROVIDER
from fakes.fault_server import FAULT_KINDS, LEDGER_KIND, RETRYABLE_KINDS, FaultServer
from waiting import limit

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"
SCENARIOS = "bank_balance_salary_check,clinic_ortho_reschedule,parcel_address_landmark_fix"
KEY = "sk-fault-test-key-0001"
MORE = "dairy_buffalo_died_pause_calls,pension_status_pending_income_certificate,bank_emi_phone_purchase"
HEADER_SECRET = "apim-subscription-value-9f8e7d"
ACCESS_SECRET = "access-key-value-51c0aa"
LITERAL_TAG = "client-tag-literal-77e1"
ROLE_NAMES = ("candidate", "caller", "task_judge", "conversation_judge")
TIMEOUT_S = limit(10.0)
"""Every attempt's limit, one per role as in a real settings file, so a hang is any request's to
meet: a valid reply must never reach it (the ledgers must equal the faults the server injected, and
a valid attempt cut short on a loaded machine would add a timeout: a 3 s limit was near enough
for that at load 10 to 14), and each hang costs this much of the run's time."""
HANG_S = limit(600.0)
"""A hang lasts until the server is closed (at most this): only the client's limit ends it."""


def _settings(
    tmp: Path, url: str, judge_headers: dict[str, str] | None = None, provider: str = "openai"
) -> Path:
    common = {"base_url": url, "timeout_s": TIMEOUT_S, "max_attempts": 8, "retry_base_delay_s": 0.01}
    data = {
        "candidate": {
            "spec": f"{provider}:fake-agent",
            **common,
            "extra_headers": {"Ocp-Apim-Subscription-Key": "env:FAULT_TEST_SUB_KEY"},
        },
        "caller": {
            "spec": f"{provider}:fake-caller",
            **common,
            "extra_headers": {"X-Access-Key": "env:FAULT_TEST_ACCESS_KEY"},
        },
        "task_judge": {
            "spec": f"{provider}:fake-judge",
            **common,
            "extra_headers": judge_headers or {"X-Client-Tag": LITERAL_TAG},
        },
        "conversation_judge": {
            "spec": f"{provider}:fake-judge",
            **common,
            "extra_headers": judge_headers or {},
        },
    }
    path = tmp / "settings.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _run(
    out: Path, settings: Path, *extra: str, provider: str = "openai", scenarios: str = SCENARIOS
) -> object:
    return CliRunner().invoke(
        app,
        [
            "run",
            str(STARTER),
            "--candidate",
            f"{provider}:fake-agent",
            "--caller",
            f"{provider}:fake-caller",
            "--task-judge",
            f"{provider}:fake-judge",
            "--conversation-judge",
            f"{provider}:fake-judge",
            "--out",
            str(out),
            "--settings",
            str(settings),
            "--scenarios",
            scenarios,
            "--seed",
            "5",
            "--max-turns",
            "8",
            "--concurrency",
            "3",
            *extra,
        ],
        env={"COLUMNS": "250"},
    )


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("FAULT_TEST_SUB_KEY", HEADER_SECRET)
    monkeypatch.setenv("FAULT_TEST_ACCESS_KEY", ACCESS_SECRET)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


def _ledgers(out: Path) -> dict[str, Counter[str]]:
    """Faults by role and kind over every episode's trace ledger and grade (judges)."""
    total: dict[str, Counter[str]] = {}
    for path in [*(out / "faults").glob("*.json"), *(out / "grades").glob("*/episodes/*.json.gz")]:
        data = json.loads(episode_files.read_text(path))
        for role, counts in (data.get("roles") or data.get("faults") or {}).items():
            total.setdefault(role, Counter()).update(counts["faults"])
    return {role: c for role, c in total.items() if c}


@pytest.mark.slow  # a whole run through a faulty server: about 20 s at load 7
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_twenty_percent_mixed_faults_charge_nothing_to_the_candidate(
    tmp_path: Path, env: None, provider: str
) -> None:
    out = tmp_path / "run"
    cache = tmp_path / "cache.sqlite"
    with FaultServer(rate=0.2, seed=12, keys={KEY}, hang_s=HANG_S) as server:
        url = server.url if provider == "openai" else server.root
        result = _run(
            out,
            _settings(tmp_path, url, provider=provider),
            "--cache",
            str(cache),
            "--repeats",
            "2",
            provider=provider,
            scenarios=f"{SCENARIOS},{MORE}",
        )
        log = list(server.log)
    assert result.exit_code == 0, result.output
    assert {e.dialect for e in log} == {provider}
    injected = [e for e in log if e.kind is not None]
    kinds = Counter(e.kind for e in injected)
    assert len(injected) >= 20 and len(kinds) >= 8, kinds
    assert {e.role for e in injected} >= {"candidate", "caller"}, Counter(e.role for e in injected)
    # every candidate message in every trace is a reply the server sent validly
    valid_speech = {e.content for e in log if e.kind is None and e.role == "candidate" and e.content}
    messages = 0
    traces = [json.loads(episode_files.read_text(p)) for p in sorted((out / "traces").glob("*.json.gz"))]
    for trace in traces:
        for m in trace["messages"]:
            if m["role"] != "assistant":
                continue
            messages += 1
            assert m["error"] is None, (trace["episode_id"], m)
            assert m["content"] in valid_speech or (m["content"] is None and m["tool_calls"]), m
    assert messages > 0
    # the ledgers count exactly the faults the server injected into episodes (not the preflight's),
    # per role and kind
    expected: dict[str, Counter[str]] = {}
    for e in injected:
        if e.role != "probe":
            expected.setdefault(e.role, Counter())[LEDGER_KIND[e.kind or ""]] += 1
    assert _ledgers(out) == expected
    # skipped episodes name provider, role and fault class
    for trace in traces:
        if trace["end_reason"] == "skipped":
            reason = trace["skip_reason"]
            assert reason.startswith(f"infrastructure: {provider}:fake-"), reason
            ledger = json.loads((out / "faults" / f"{trace['episode_id']}.json").read_text())
            assert f"{provider} {ledger['skip_role']}: {ledger['skip_kind']}" in reason
    # no header value is on disk (the literal nor the env values) nor in the output, though the
    # server received them
    sent = {v for e in log for v in e.headers.values()}
    assert {HEADER_SECRET, ACCESS_SECRET, LITERAL_TAG} <= sent
    files = {k: tmp_path / f"r.{k}" for k in ("json", "csv", "html")}
    report = CliRunner().invoke(
        app,
        [
            "report",
            str(out),
            "--json",
            str(files["json"]),
            "--csv",
            str(files["csv"]),
            "--html",
            str(files["html"]),
        ],
        env={"COLUMNS": "250"},
    )
    assert report.exit_code == 0, report.output
    secrets = (HEADER_SECRET, ACCESS_SECRET, LITERAL_TAG, KEY)
    on_disk = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "settings.yaml"]
    assert cache in on_disk and files["html"] in on_disk and len(on_disk) > 20
    for path in on_disk:
        data = episode_files.file_bytes(path)  # traces and grades decompressed
        assert not any(s.encode() in data for s in secrets), path
    assert not any(s in result.output + report.output for s in secrets)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["candidates"][0]["settings"]["extra_headers"] == {
        "Ocp-Apim-Subscription-Key": "[not saved]"
    }
    assert manifest["caller"]["settings"]["extra_headers"] == {"X-Access-Key": "[not saved]"}
    assert manifest["task_judge"]["settings"]["extra_headers"] == {"X-Client-Tag": "[not saved]"}
    # the report's fault ledger says what went wrong and how often, per role, in every format; each
    # number is checked against the server's own log
    assert "Fault ledger" in report.output
    faults = json.loads(files["json"].read_text())["runs"][0]["faults"]
    # the report adds the preflight's ledger (faults/preflight/): its faults are
    # exactly those the server injected into the probes
    preflight = {r: c for path in (out / "faults" / "preflight").glob("*.json")
                 for r, c in json.loads(path.read_text())["roles"].items()}
    probe_faults = Counter(LEDGER_KIND[e.kind or ""] for e in injected if e.role == "probe")
    assert sum((Counter(c["faults"]) for c in preflight.values()), Counter()) == probe_faults
    assert sum(c["requests"] for c in preflight.values()) == sum(1 for e in log if e.role == "probe")
    expected = {r: expected.get(r, Counter()) + Counter(preflight.get(r, {}).get("faults", {}))
                for r in set(expected) | set(preflight)}
    expected = {r: c for r, c in expected.items() if c}
    assert {r: Counter(c["faults"]) for r, c in faults["roles"].items() if c["faults"]} == expected
    html = files["html"].read_text()
    for role in sorted(expected):
        sent_for_role = sum(1 for e in log if e.role == role) + preflight.get(role, {}).get("requests", 0)
        counts = faults["roles"][role]
        assert counts["requests"] == sent_for_role, role
        assert counts["retries"] <= sum(counts["faults"].values())
        row = re.search(rf"│ {role}\s+│ (\d+)\s+│ (\d+)\s+│ (\d+)\s+│", report.output)
        assert row is not None, report.output
        n_faults = sum(expected[role].values())
        assert row.groups() == (str(sent_for_role), str(counts["retries"]), str(n_faults))
        assert f"<td>{role}</td><td>{sent_for_role}</td><td>{counts['retries']}</td>" in html
    skipped = [t for t in traces if t["end_reason"] == "skipped"]
    assert sum(faults["skipped"].values()) == len(skipped)
    assert all(k.startswith("infrastructure/") for k in faults["skipped"])
    assert faults["empty_replies"] == 0 and faults["not_graded"] == {}
    # end reasons in the CSV, one row per episode, as the traces say
    with files["csv"].open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["episode_id"]: r["end_reason"] for r in rows} == {
        t["episode_id"]: t["end_reason"] for t in traces
    }
    assert "not_graded_reason" in rows[0]
    assert "Fault ledger" in html


@pytest.mark.slow  # a graded run through a faulty judge server: about 11 s idle
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_judges_failing_often_in_every_retryable_way_still_grade_every_episode(
    tmp_path: Path, env: None, provider: str
) -> None:
    out = tmp_path / "run"
    judges = frozenset({"task_judge", "conversation_judge"})
    with FaultServer(rate=0.4, seed=3, keys={KEY}, hang_s=HANG_S, kinds=RETRYABLE_KINDS,
                     roles=judges) as server:
        url = server.url if provider == "openai" else server.root
        result = _run(out, _settings(tmp_path, url, provider=provider), provider=provider)
        log = list(server.log)
    assert result.exit_code == 0, result.output
    injected = Counter(LEDGER_KIND[e.kind] for e in log if e.kind is not None)
    assert sum(injected.values()) >= 2 and {e.role for e in log if e.kind} <= judges
    grades = [json.loads(episode_files.read_text(p)) for p in (out / "grades").glob("*/episodes/*.json.gz")]
    assert len(grades) == 3 and not any(g["not_graded"] or g["skipped"] for g in grades)
    assert all(g["judge_errors"] == 0 and g["overall"] is not None for g in grades)
    counted: Counter[str] = Counter()
    requests: Counter[str] = Counter()
    for g in grades:
        assert set(g["faults"]) <= judges
        for role, c in g["faults"].items():
            counted.update(c["faults"])
            requests[role] += c["requests"]
    assert counted == injected
    assert requests == Counter(e.role for e in log if e.role in judges)  # every judge request counted


def test_bad_judge_key_stops_at_preflight(tmp_path: Path, env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAULT_TEST_JUDGE_AUTH", "Bearer wrong-key-123")
    with FaultServer(keys={KEY}) as server:
        settings = _settings(tmp_path, server.url, {"Authorization": "env:FAULT_TEST_JUDGE_AUTH"})
        result = _run(tmp_path / "run", settings)
        log = list(server.log)
    assert result.exit_code == EXIT_PROVIDER, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "preflight: task_judge openai:fake-judge" in lines[0]
    assert "HTTP 401" in lines[0] and "Traceback" not in result.output
    # only preflight requests were made: no episode ran, nothing was spent on conversations
    assert {e.role for e in log} == {"probe"}
    assert not (tmp_path / "run" / "traces").exists()


@pytest.mark.slow  # a run, a judge outage and a second pass: about 25 s at load 7
@pytest.mark.parametrize("how", ["grade", "resume"])
def test_judge_down_mid_run_leaves_episodes_not_graded_then_grade_fills_them(
    tmp_path: Path, env: None, how: str
) -> None:
    out = tmp_path / "run"
    with FaultServer(keys={KEY}) as server:
        settings = _settings(tmp_path, server.url)
        original = server.valid_message
        judged = {"n": 0}

        def down_after_first_judgement(body: dict) -> dict:  # the judge fails after one episode's judgements
            if (
                body.get("model") == "fake-judge"
                and body.get("response_format", {}).get("json_schema", {}).get("name") != "preflight"
            ):
                judged["n"] += 1
                if judged["n"] > 2:
                    server.outages["fake-judge"] = 503
            return original(body)

        server.valid_message = down_after_first_judgement  # type: ignore[method-assign]
        result = _run(out, settings, "--concurrency", "1")
        assert result.exit_code == 0, result.output
        grades = [json.loads(episode_files.read_text(p))
                  for p in (out / "grades").glob("*/episodes/*.json.gz")]
        not_graded = [g for g in grades if g["not_graded"]]
        assert len(not_graded) >= 2, [(g["episode_id"], g["not_graded_reason"]) for g in grades]
        assert all(g["not_graded_reason"].startswith("judge_outage:") for g in not_graded)
        assert all(g["overall"] is None and g["passed"] is None for g in not_graded)
        args = ["report", str(out), "--no-html", "--json", str(tmp_path / "r.json")]
        report = CliRunner().invoke(app, args)
        assert report.exit_code == 0, report.output
        data = json.loads((tmp_path / "r.json").read_text())
        assert data["runs"][0]["faults"]["not_graded"] == {"judge_outage": len(not_graded)}
        # excluded from every score: counted, not scored (the one graded episode makes the means)
        (summary,) = data["candidates"]
        scored = [g for g in grades if not g["not_graded"] and not g["skipped"]]
        assert (summary["n_ungraded"], summary["n_scored"]) == (len(not_graded), len(scored))
        assert summary["overall_flat"]["estimate"] == pytest.approx(
            sum(g["overall"] for g in scored) / len(scored))
        # the judge comes back: callbench grade grades exactly those episodes, into the same set
        server.valid_message = original  # type: ignore[method-assign]
        server.outages.clear()
        gid = json.loads((out / "manifest.json").read_text())["grade_sets"][-1]
        before = len(server.log)
        if how == "grade":
            graded = CliRunner().invoke(app, ["grade", str(out), "--settings", str(settings)])
            assert graded.exit_code == 0, graded.output
            assert f"grade set {gid}:" in graded.output and "0 not graded" in graded.output
        else:  # the same run command resumes: no episode is run again, the judges grade the rest
            resumed = _run(out, settings, "--concurrency", "1")
            assert resumed.exit_code == 0, resumed.output
            assert {e.role for e in server.log[before:]} <= {"probe", "task_judge", "conversation_judge"}
            assert json.loads((out / "manifest.json").read_text())["grade_sets"][-1] == gid
        judge_requests = [e for e in server.log[before:] if e.model == "fake-judge" and e.role != "probe"]
        assert len(judge_requests) == 2 * len(not_graded)  # task and conversation judge, once each
    after = [json.loads(episode_files.read_text(p))
             for p in (out / "grades" / gid / "episodes").glob("*.json.gz")]
    assert not any(g["not_graded"] for g in after)
    assert all(g["overall"] is not None for g in after if not g["skipped"])
    with sqlite3.connect(out / "index.sqlite") as db:
        rows = dict(db.execute("SELECT episode_id, overall FROM grades WHERE grade_set_id = ?", (gid,)))
    assert rows == {g["episode_id"]: g["overall"] for g in after}


def test_every_fault_kind_is_known() -> None:
    assert set(LEDGER_KIND) == set(FAULT_KINDS)
    assert set(LEDGER_KIND.values()) <= set(KNOWN_KINDS)
