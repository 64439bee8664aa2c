"""A trace's harness CPU per request edited by hand to a value no measurement gives (negative, NaN,
infinite): the report used to read it and publish nonsense (a p90 of "inf ms", a NaN in the
quantiles). The trace model now refuses it, so the report stops with one line naming the file
and the field, and the file itself is left as it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from callbench.report.model.episode_read import ReportInputError
from callbench.report.model.load import load_run
from callbench.runfolder import episode_files
from callbench.runfolder.store import RunStore
from callbench.trace import RequestLatency, TurnLatency


@pytest.mark.parametrize("bad", ["NaN", "-3.0", "Infinity", "-Infinity"])
def test_a_hand_edited_harness_cpu_stops_the_report_with_a_located_line(graded: Path, bad: str) -> None:
    store = RunStore(graded)
    eid = next(iter(episode_files.paths(store.traces)))
    path = store.trace_path(eid)
    store.close()
    data = json.loads(episode_files.read_text(path))
    req = next(r for r in data["latency"]["requests"] if r["role"] == "candidate")
    assert isinstance(req["harness_cpu_s"], float) and req["harness_cpu_s"] >= 0
    text = json.dumps(data).replace(f'"harness_cpu_s": {json.dumps(req["harness_cpu_s"])}',
                                    f'"harness_cpu_s": {bad}', 1)
    assert text.count(f'"harness_cpu_s": {bad}') == 1
    episode_files.write_text(store.traces, eid, text)
    with pytest.raises(ReportInputError) as err:
        load_run(graded, workers=1)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{path}: not a valid trace") and "harness_cpu_s" in msg
    assert episode_files.read_text(path) == text  # nothing saved is touched


def test_the_models_refuse_a_harness_cpu_no_meter_gives() -> None:
    base = {"role": "candidate", "turn": 1, "start_s": 0.0, "first_token_s": 0.1, "waited_s": 0.2}
    assert RequestLatency.model_validate({**base, "harness_cpu_s": 0.0}).harness_cpu_s == 0.0
    assert RequestLatency.model_validate({**base, "harness_cpu_s": None}).harness_cpu_s is None
    for bad in (-0.001, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="harness_cpu_s"):
            RequestLatency.model_validate({**base, "harness_cpu_s": bad})
        with pytest.raises(ValueError, match="harness_cpu_s"):
            TurnLatency.model_validate({"turn": 1, "start_s": 0.0, "completion_s": 1.0, "harness_cpu_s": bad})


@pytest.mark.parametrize(("field", "bad"), [("time_to_first_word_s", "NaN"), ("spoken_s", "Infinity"),
                                            ("dead_air_s", "-Infinity")])
def test_any_non_finite_turn_timing_stops_the_report(graded: Path, field: str, bad: str) -> None:
    # "talk s/call: inf [nan, nan]" was published from such a trace
    store = RunStore(graded)
    eid = next(iter(episode_files.paths(store.traces)))
    path = store.trace_path(eid)
    store.close()
    data = json.loads(episode_files.read_text(path))
    data["latency"]["turns"][0][field] = 0.125
    text = json.dumps(data).replace(f'"{field}": 0.125', f'"{field}": {bad}', 1)
    episode_files.write_text(store.traces, eid, text)
    with pytest.raises(ReportInputError) as err:
        load_run(graded, workers=1)
    assert str(err.value).startswith(f"{path}: not a valid trace") and field in str(err.value)
