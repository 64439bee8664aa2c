"""The folder report builds each call's element in the browser from data (``templates/report.js``,
``buildCall``); the single file has it rendered by the Jinja template. Both are written from the
SAME calls here and opened in Chromium, and every call's ``details.episode`` element must have the
same outerHTML in both (so a missing or extra element, class, attribute, text or white space
between elements shows). The calls hold hostile text (markup, ``javascript:`` and ``://`` links,
RTL controls, NUL, CR), skipped and ungraded episodes, tool events with parse errors and odd JSON
numbers, channel events, judged items citing messages that do not exist, voice-channel turns with
and without their audio in the cache, latency strips with known timings, and four scripts.

Two intended differences are kept out of the comparison: the ``open`` attribute of the element
itself (the folder opens the call it loads; the single file leaves it closed), and an audio
player's ``src`` (the single file's ``data:`` URI, the folder's ``calls/audio/<sha256>.wav``).
Skipped when playwright or chromium is missing.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from callbench.bundle.state.models import StateChange
from callbench.grade.models import GradedItem, Label
from callbench.models.base import ToolCall
from callbench.report.html.folder import write_html_folder
from callbench.report.html.page import embed_fonts, render_episode, render_page
from callbench.report.html.viewer import (
    CallData,
    SharedTexts,
    call_data,
    embed_audio,
    episode_row,
    episode_view,
)
from callbench.report.model.audio import AudioFiles
from callbench.report.model.build import build_report
from callbench.report.model.load import load_runs
from callbench.sim.voice.keys import tts_key
from callbench.trace import CallerTurn, ChannelEvent, MatcherOutcome, ToolEvent, TraceMessage, VoiceEvent

from .conftest import write_run
from .test_latency_strip import known_latency

sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip("no chromium installed (apt-get install chromium)", allow_module_level=True)
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip

HOSTILE = (
    '<script>alert("x")</script> "><img src=x onerror=alert(1)> <a href="javascript:alert(1)">go</a> '
    "javascript:alert(2) https://evil.example/?a=1&b=2 &amp; &lt; \u202eRTL override\u202c \u200f"
    "\x00NUL\x01\x1f line\r\nCRLF\rCR end"
)
LANG_TEXT = {"ta": "தமிழ் உரை", "hi": "हिंदी पाठ", "ar": "نص عربي", "zh": "中文文本"}
ODD_JSON = {
    "float": 1.0, "big": 12345678901234567890123, "exp": 1e16, "tiny": 5e-324, "neg": -0.0,
    "nan": float("nan"), "inf": float("-inf"), "empty": {}, "list": [], "nested": [{"a": [1, [], {}]}],
    "quote\"key": "va,l}ue\\ \"q\" [x]", "ключ": HOSTILE,
}  # fmt: skip


def hostile_trace(call: CallData, lang: str) -> Any:
    """The call's trace with hostile text, odd JSON and every kind of row the viewer shows."""
    trace = call.trace
    assert trace is not None
    text = f"{LANG_TEXT[lang]} {HOSTILE}"
    messages = [
        *trace.messages[:2],
        TraceMessage(index=2, role="user", content=text, caller_turn=1, fragment=0),
        TraceMessage(index=3, role="user", content="\nsecond fragment", caller_turn=1, fragment=1),
        TraceMessage(
            index=4, role="assistant", content=None, candidate_turn=1, error=f"bad output {HOSTILE}",
            tool_calls=[
                ToolCall(id='c1"><b>', name="book<i>", arguments='\n{"day": mon'),
                ToolCall(id="c2", name="look", arguments='{"x": 1.0, "y": [], "z": {"w": "a://b"}}'),
            ],
        ),
        TraceMessage(index=5, role="tool",
                     content='{"ok": 1.50, "n": 10000000000000000000001, "s": "\\u0000"}',
                     tool_call_id="c2", name="look", tool_event=1),
        TraceMessage(index=6, role="tool", content=f"not json {HOSTILE}", tool_call_id='c1"><b>',
                     tool_event=0),
        TraceMessage(index=7, role="assistant", content=text, candidate_turn=2),
    ]  # fmt: skip
    events = [
        ToolEvent(
            index=0, candidate_turn=1, message_index=4, result_message_index=6, tool_call_id='c1"><b>',
            name="book<i>", raw_arguments='\n{"day": mon', parse_error=f"Expecting value {HOSTILE}",
            double_encoded=True, known_tool=False, queue_position=None, outcome="parse_error", executed=False,
            result={"error": HOSTILE}, call_ending=True, success_condition_met=False, ended_call=True,
        ),
        ToolEvent(
            index=1, candidate_turn=1, message_index=4, result_message_index=5, tool_call_id="c2",
            name="look", raw_arguments="{}", arguments=ODD_JSON, queue_position=0, outcome="state",
            matcher_results=[MatcherOutcome(field="day", ok=True, reason="equal"),
                             MatcherOutcome(field="x<y>", ok=False, reason=HOSTILE)],
            result=ODD_JSON, call_ending=True, success_condition_met=True,
            state_changes=[StateChange(table="t<1>", key="k", path="a.b", before=None, after={"v": HOSTILE})],
        ),
    ]  # fmt: skip
    turns = [
        CallerTurn(
            index=1, intended=f"I want to book a table {LANG_TEXT[lang]} now", message_indices=[2, 3, 99],
            observed=[f"I want to cook the {LANG_TEXT[lang]}", "\nnow please"],
            expressed_steps=["s1", "s<2>"],
            done=True, attempts=3, rejections=["too long", HOSTILE],
            channel_events=[
                ChannelEvent(kind="substitute", source="authored", turn=1, span="book", replacement="cook",
                             applied=True, detail=HOSTILE),
                ChannelEvent(kind="drop", source="seeded", turn=1, span="", applied=False),
                ChannelEvent(kind="vad_split", source="seeded", turn=1, replacement="", applied=True),
            ],
        ),
        CallerTurn(index=2, intended="", observed=[""], message_indices=[]),
        CallerTurn(index=3, intended="same  words\there", observed=["same words here"], message_indices=[7]),
    ]  # fmt: skip
    unreached = [ChannelEvent(kind="double", source="authored", turn=9, span=HOSTILE, applied=False),
                 ChannelEvent(kind="drop", source="authored", turn=10, applied=False)]  # fmt: skip
    return trace.model_copy(update={"messages": messages, "tool_events": events, "caller_turns": turns,
                                    "unreached_channel_events": unreached, "language": lang,
                                    "skip_reason": None, "latency": known_latency()})  # fmt: skip


TTS = {"name": "tone", "version": "1", "settings": {}}


def with_voice(trace: Any, audio_dir: Path, n: int) -> Any:
    """The trace with its first caller turn spoken: its clean and line audio kept in ``audio_dir``
    (a few bytes standing for a WAV), or for every other such call not kept."""
    turn = trace.caller_turns[0]
    wav, line = f"RIFF call {n}".encode(), f"RIFF line {n}".encode()
    if n % 2:
        (audio_dir / "tts").mkdir(parents=True, exist_ok=True)
        (audio_dir / "tts" / f"{tts_key(turn.intended, trace.language, TTS)}.wav").write_bytes(wav)
        (audio_dir / "line").mkdir(parents=True, exist_ok=True)
        (audio_dir / "line" / f"{hashlib.sha256(line).hexdigest()}.wav").write_bytes(line)
    voice = VoiceEvent(turn=1, intended=turn.intended, spoken=turn.intended, observed=turn.observed[0],
                       tts=TTS, asr=TTS, line={}, audio_sha256=hashlib.sha256(wav).hexdigest(),
                       audio_seconds=1.0, line_audio_sha256=hashlib.sha256(line).hexdigest())  # fmt: skip
    turns = [turn.model_copy(update={"voice": voice}), *trace.caller_turns[1:]]
    return trace.model_copy(update={"caller_turns": turns})


def the_calls(runs: list[Any], audio_dir: Path) -> list[CallData]:
    calls = list(call_data(runs))
    out = []
    for n, c in enumerate(calls):
        if c.trace is None or not c.trace.messages or n % 3 == 2:
            out.append(c)  # as written: skipped episodes (no grade) and plain calls
            continue
        lang = ("ta", "hi", "ar", "zh")[n % 4]
        trace = hostile_trace(c, lang)
        if n % 4 in (0, 1):
            trace = with_voice(trace, audio_dir, n)
        grade = c.grade
        if n % 5 == 0:
            grade = None  # ungraded
        elif grade is not None:
            items = [*grade.items, GradedItem(id=f"x<{n}>", source="rating", pillar=grade.items[1].pillar,
                                              diagnostic=grade.items[1].diagnostic, weight=3, label=None,
                                              rating=None, r=None, reason=HOSTILE, cited_messages=[2, 42],
                                              cited_events=[1, 7]),
                     GradedItem(id="na", source="task_criterion", pillar=grade.items[0].pillar,
                                diagnostic=grade.items[0].diagnostic, weight=1, label=Label.NOT_APPLICABLE,
                                r=0.125, reason="")]  # fmt: skip
            update: dict[str, Any] = {"items": items}
            if n % 7 == 1:
                update.update(overall=None, passed=None, task_score=None)
            grade = grade.model_copy(update=update)
        record = c.record.model_copy(
            update={"language": lang, "status": "ungraded" if grade is None else "scored"}
        )
        out.append(CallData(record, trace, grade, AudioFiles((str(audio_dir),))))
    return out


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    root = tmp_path_factory.mktemp("equiv")
    run = write_run(root, agents=4, scenarios=2, repeats=2, skip=lambda c, a, s, r: (a, s, r) == (1, 0, 1))
    runs = load_runs([run], None)
    report = build_report(runs, n_samples=20)
    calls = the_calls(runs, root / "voice")
    instructions, briefs = SharedTexts("instr"), SharedTexts("brief")
    # the report's budget on every strip, as the single file marks it (page.py) and the folder does
    views = [episode_view(c, n, instructions, briefs, budget_s=report.settings.latency_budget_s)
             for n, c in enumerate(calls)]
    assert embed_audio(views) > 0
    page = render_page(report, [episode_row(v) for v in views], instructions.views(), briefs.views(),
                       episode_html=[render_episode(v) for v in views])  # fmt: skip
    single = root / "single.html"
    single.write_text(embed_fonts(page), encoding="utf-8")
    folder = root / "folder"
    assert write_html_folder(report, iter(calls), folder, reason="test") == len(calls)
    return single, folder, [v["anchor"] for v in views]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


# the element's markup with its own `open` attribute left out (the one intended difference)
OUTER = (
    "id => { const c = document.getElementById(id).cloneNode(true); c.removeAttribute('open');"
    " return c.outerHTML; }"
)


def test_folder_calls_equal_the_single_files(browser: Any, written: tuple[Path, Path, list[str]]) -> None:
    single, folder, anchors = written
    assert len(anchors) == 32
    errors: list[str] = []
    dialogs: list[str] = []
    page = browser.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(single.as_uri(), wait_until="load")
    expected = {a: page.evaluate(OUTER, a) for a in anchors}
    page2 = browser.new_page()
    page2.on("pageerror", lambda e: errors.append(str(e)))
    page2.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page2.goto((folder / "index.html").as_uri(), wait_until="load")
    got = {}
    for a in anchors:
        page2.evaluate("a => { location.hash = a; }", a)
        page2.wait_for_selector(f"#{a}", state="attached")
        got[a] = page2.evaluate(OUTER, a)
    # an audio player's src is the one intended difference inside the element
    data_src = re.compile(r'<audio controls="" preload="none" src="data:audio/wav;base64,[A-Za-z0-9+/=]+">')
    file_src = re.compile(r'<audio controls="" preload="none" src="calls/audio/[0-9a-f]{64}\.wav">')
    assert sum(len(data_src.findall(v)) for v in expected.values()) >= 1
    assert sum(len(file_src.findall(v)) for v in got.values()) >= 1
    for a in anchors:
        assert file_src.sub("<audio src>", got[a]) == data_src.sub("<audio src>", expected[a]), a
    # the calls did hold what they were meant to (so the equality above covers them)
    every = "".join(expected.values())
    for needle in ('&lt;script&gt;alert("x")&lt;/script&gt;', "<del class=\"w\">", "<ins class=\"w\">",
                   "parse error: ", "skipped: ", 'class="verdict-pass"', 'class="verdict-fail"', 'lang="ta"',
                   'lang="ar"', "\u202e", "12345678901234567890123", "1e+16", "NaN", "42?", "rating None",
                   "double-encoded", "“<span", "Authored channel events", "no pass/fail",
                   "0.12", "audio not in the run's voice cache",
                   '<span class="lat-tool" style="left:34.8%;width:13.0%" title="tools 300 ms">',
                   '<td class="num">1600</td>', "not streamed",
                   '<span class="lat-budget" style="left:34.8%" title="budget 800 ms" '
                   'data-label="budget 800 ms"></span>'):  # fmt: skip
        assert needle in every, needle
    assert "\x00" not in every and "\r" not in every
    # hostile text stayed text: no element, handler or script came from it, nothing ran
    assert (
        page2.evaluate("document.querySelectorAll('#calls img, #calls script, #calls [onerror]').length") == 0
    )
    hrefs = page2.evaluate(
        "Array.from(document.querySelectorAll('#calls a')).map(a => a.getAttribute('href'))"
    )
    assert hrefs and all(h.startswith("#") for h in hrefs)
    assert errors == [] and dialogs == []
