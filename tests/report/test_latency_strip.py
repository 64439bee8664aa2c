"""The latency strip of the trace viewer: a trace with known timings shows the right numbers and
bars in the single file's template and in the folder report's call data (the browser comparison
of the two renderings is tests/report/test_browser_equivalence.py, whose calls carry
:func:`known_latency`)."""

from __future__ import annotations

import re
from pathlib import Path

from callbench.report.html.call_script import call_record, json_source
from callbench.report.html.latency_strip import latency_view
from callbench.report.html.page import render_episode
from callbench.report.html.viewer import CallData, SharedTexts, episode_view
from callbench.report.model.load import load_runs
from callbench.sim.latency import turn_latency
from callbench.trace import EpisodeLatency, RequestLatency

from .conftest import write_run


def _req(turn: int, waited: float, *, first_speech: float | None = None, gap: float = 0.0,
         tools: int = 0, streamed: bool = True) -> RequestLatency:
    speech = first_speech is not None
    return RequestLatency(role="candidate", turn=turn, start_s=0.0, gap_s=gap,
                          first_token_s=first_speech or waited, first_speech_s=first_speech, waited_s=waited,
                          streamed=streamed, speech=speech,
                          tool_calls=tools)  # fmt: skip


def known_latency() -> EpisodeLatency:
    """Three candidate turns with hand-computed figures:

    - turn 0: streamed speech, first word at 0.4 s, complete at 1.0 s;
    - turn 1: a tool-call answer (0.8 s), tools for 0.3 s, then speech whose first word comes
      0.5 s into its request: first word 1.6 s, complete 2.3 s, one round trip before speech;
    - turn 2: "Yes." not streamed (0.9 s; spoken 0.4 s at 2.5 words/s, so heard until 1.3 s),
      tools 0.2 s, then speech ready 0.3 s into a 0.6 s request (1.4 s): 0.1 s of dead air,
      complete 1.7 s.
    A caller request in between is not the candidate's and is left out."""
    turns: dict[int, list[tuple[RequestLatency, str | None]]] = {
        0: [(_req(0, 1.0, first_speech=0.4), "Hello, how can I help?")],
        1: [(_req(1, 0.8, tools=1), None), (_req(1, 1.2, first_speech=0.5, gap=0.3), "Booked for Monday.")],
        2: [(_req(2, 0.9, first_speech=0.9, streamed=False), "Yes."),
            (_req(2, 0.6, first_speech=0.3, gap=0.2), "Anything else?")],
    }  # fmt: skip
    caller = RequestLatency(role="caller", turn=1, start_s=0.0, first_token_s=9.0, waited_s=9.0, speech=True,
                            source="harness")  # a scripted caller: the episode's timings are mixed
    requests = [r for items in turns.values() for r, _ in items]
    return EpisodeLatency(started_at="2026-01-01T00:00:00.000+00:00", speech_rate="en: 2.5 words/s",
                          source="mixed", requests=[*requests[:1], caller, *requests[1:]],
                          turns=[turn_latency(t, items) for t, items in turns.items()])  # fmt: skip


EXPECTED_ROWS = [
    # turn, first word ms, dead air ms, complete ms, round trips before speech, requests, streamed
    ["0", "400", "0", "1000", "0", "1", "streamed"],
    ["1", "1600", "0", "2300", "1", "2", "streamed"],
    ["2", "900", "100", "1700", "0", "2", "not streamed"],
]
# turn 1 on its own scale (2.3 s): model 0-0.8 s, tools 0.8-1.1 s, waiting
# 1.1-1.6 s, the answer arriving 1.6-2.3 s; the first word at 1.6 s
TURN1_BARS = [("wait", "0.0", "34.8"), ("tool", "34.8", "13.0"), ("wait", "47.8", "21.7"),
              ("speak", "69.6", "30.4")]


def test_strip_figures_and_bars() -> None:
    view = latency_view(known_latency())
    assert view is not None
    rows = [[t[k] for k in ("turn", "first_word", "dead_air", "completion", "tools", "requests", "streamed")]
            for t in view["turns"]]  # fmt: skip
    assert rows == EXPECTED_ROWS
    t1 = view["turns"][1]
    assert [(b["kind"], b["left"], b["width"]) for b in t1["bars"]] == TURN1_BARS
    assert t1["mark"] == "69.6"
    assert "tools 300 ms" in [b["title"] for b in t1["bars"]]
    # a not-streamed answer has no "arriving" stretch: its first word is the whole answer
    assert [b["kind"] for b in view["turns"][2]["bars"]] == ["wait", "tool", "wait", "speak"]
    assert view["turns"][2]["bars"][0]["width"] == f"{100 * 0.9 / 1.7:.1f}" == "52.9"  # its own 1.7 s
    assert view["turns"][0]["mark"] == "40.0"
    assert "en: 2.5 words/s" in view["note"] and "replayed" not in view["note"]  # the caller's are not shown


def test_replayed_turns_say_so() -> None:
    latency = known_latency()
    latency.turns = [t.model_copy(update={"source": "replayed"}) for t in latency.turns]
    view = latency_view(latency)
    assert view is not None and "replayed from the response cache" in view["note"]
    assert [t["streamed"] for t in view["turns"]] == ["streamed, replayed", "streamed, replayed",
                                                      "not streamed, replayed"]


def test_no_timings_no_strip() -> None:
    assert latency_view(None) is None
    assert latency_view(EpisodeLatency(started_at="x")) is None


def test_template_and_call_data_show_the_numbers(tmp_path: Path) -> None:
    run = write_run(tmp_path, candidates=("cand-a",), agents=1, scenarios=1, repeats=1,
                    latency=lambda c, a, s, r: known_latency())  # fmt: skip
    (rec, trace, grade), = load_runs([run], None)[0].iter_episodes()  # fmt: skip
    assert trace is not None and trace.latency is not None
    call = CallData(rec, trace, grade)
    html = str(render_episode(episode_view(call, 0, SharedTexts("i"), SharedTexts("b"))))
    rows = re.findall(r'<tr class="lat-row">(.*?)</tr>', html)
    assert len(rows) == 3
    cells = [re.findall(r"<td[^>]*>([^<]*)</td>", r)[:7] for r in rows]
    assert cells == EXPECTED_ROWS
    spans = re.findall(r'<span class="lat-(\w+)" style="left:([\d.]+)%;width:([\d.]+)%"', rows[1])
    assert spans == TURN1_BARS
    assert '<span class="lat-mark" style="left:69.6%" title="first word 1600 ms">' in rows[1]
    assert html.index("<h4>Latency</h4>") < html.index("<h4>Messages</h4>")
    # the folder report's script gets the same text to print
    record = call_record(episode_view(call, 0, SharedTexts("i"), SharedTexts("b"), json_text=json_source))
    assert [[t[k] for k in ("turn", "first_word", "dead_air", "completion", "tools", "requests", "streamed")]
            for t in record["latency"]["turns"]] == EXPECTED_ROWS  # fmt: skip
    assert [(b["kind"], b["left"], b["width"]) for b in record["latency"]["turns"][1]["bars"]] == TURN1_BARS


def test_the_budget_is_marked_where_it_falls_on_each_turns_scale(tmp_path: Path) -> None:
    view = latency_view(known_latency(), budget_s=0.8)
    assert view is not None
    # turn 0 on 1.0 s, turn 1 on 2.3 s, turn 2 on 1.7 s
    assert [t["budget"] for t in view["turns"]] == ["80.0", f"{80 / 2.3:.1f}", f"{80 / 1.7:.1f}"]
    assert {t["budget_label"] for t in view["turns"]} == {"budget 800 ms"}
    late = latency_view(known_latency(), budget_s=1.2)
    assert late is not None
    # a turn over before the budget (turn 0, 1.0 s) shows none rather than a stretched bar
    assert [t["budget"] for t in late["turns"]] == [None, f"{120 / 2.3:.1f}", f"{120 / 1.7:.1f}"]
    run = write_run(tmp_path, candidates=("cand-a",), agents=1, scenarios=1, repeats=1,
                    latency=lambda c, a, s, r: known_latency())  # fmt: skip
    (rec, trace, grade), = load_runs([run], None)[0].iter_episodes()  # fmt: skip
    call = CallData(rec, trace, grade)
    html = str(render_episode(episode_view(call, 0, SharedTexts("i"), SharedTexts("b"), budget_s=1.2)))
    rows = re.findall(r'<tr class="lat-row">(.*?)</tr>', html)
    assert "lat-budget" not in rows[0]
    assert (f'<span class="lat-budget" style="left:{120 / 2.3:.1f}%" title="budget 1200 ms" '
            'data-label="budget 1200 ms"></span>') in rows[1]
    record = call_record(episode_view(call, 0, SharedTexts("i"), SharedTexts("b"), json_text=json_source,
                                      budget_s=1.2))
    assert [t["budget"] for t in record["latency"]["turns"]] == [None, f"{120 / 2.3:.1f}", f"{120 / 1.7:.1f}"]


def test_the_single_file_report_marks_its_own_budget(tmp_path: Path) -> None:
    from callbench.report.html.page import render_html
    from callbench.report.model.build import build_report

    run = write_run(tmp_path, candidates=("cand-a",), agents=1, scenarios=1, repeats=1,
                    latency=lambda c, a, s, r: known_latency())  # fmt: skip
    runs = load_runs([run], None)
    page = render_html(build_report(runs, n_samples=20, latency_budget_s=1.2), runs)
    # turns 1 and 2 (2.3 s and 1.7 s) reach the budget, turn 0 (1.0 s) does not
    assert page.count('data-label="budget 1200 ms"') == 2
    assert f'class="lat-budget" style="left:{120 / 2.3:.1f}%"' in page
