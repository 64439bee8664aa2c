"""Property: whatever a candidate, a caller or a judge replies (any JSON value, any string, lone
surrogates, control characters, NULs, very deep nesting), the episode ends with a trace on disk
that reads back, and its grade is saved and reads back too."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.hostile.helpers import SCENARIO, Replies, output_error

from callbench.bundle.models import Bundle
from callbench.grade.grader import grade_trace
from callbench.grade.store import read_episode_grade, save_episode_grade
from callbench.models.base import ModelResponse, ToolCall, Usage
from callbench.runfolder.store import RunStore, text_sha256
from callbench.sim.episode import LoopLimits, run_episode

TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=30)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)
DEEP = st.integers(min_value=30, max_value=3000).map(lambda n: "[" * n + "]" * n)
RAW = st.one_of(TEXT, JSON.map(json.dumps), JSON.map(lambda v: json.dumps(v, ensure_ascii=False)), DEEP)
NAMES = st.sampled_from(["verify_customer", "end_call", "set_card_lock", "no_such_tool"]) | TEXT


def _call(name: str, args: str) -> ToolCall:
    return ToolCall(id="c", name=name, arguments=args)


CANDIDATE = st.one_of(
    RAW,
    st.builds(lambda c, calls: ModelResponse(content=c, tool_calls=calls, usage=Usage(calls=1)),
              st.none() | TEXT, st.lists(st.builds(_call, NAMES, RAW), max_size=3)),
    st.builds(output_error, TEXT, st.none() | RAW),
)
CALLER = st.one_of(
    RAW,
    st.builds(lambda s, step, done: json.dumps({"speech": s, "expressed_step": step, "done": done}),
              TEXT, st.none() | TEXT | st.just("ask_unlock"), st.booleans()),
    st.builds(output_error, TEXT, st.none() | RAW),
)
JUDGE = st.one_of(RAW, st.builds(output_error, TEXT, st.none() | RAW))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(cand=st.lists(CANDIDATE, min_size=1, max_size=4), caller=st.lists(CALLER, min_size=1, max_size=4),
       judge=st.lists(JUDGE, min_size=1, max_size=3))
async def test_any_reply_ends_with_a_saved_trace(starter: Bundle, cand: list[Any], caller: list[Any],
                                                 judge: list[Any]) -> None:
    agent, scen = starter.scenario(SCENARIO)
    trace = await run_episode(
        agent, scen, candidate=Replies(cand), caller=Replies(caller),
        bundle_name=starter.meta.name, bundle_version=starter.meta.version,
        bundle_hash=starter.content_hash, episode_id="any-r0", run_seed=3, repeat=0,
        limits=LoopLimits(max_caller_turns=3, conversation_reruns=1),
    )
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(Path(tmp) / "run")
        sha = store.save_trace(trace)
        back = store.load_trace(trace.episode_id)
        assert text_sha256(back.canonical_json()) == sha  # the file's text, timings included
        assert back.sha256() == trace.sha256()  # the content hash, over what is stored
        assert len(back.messages) == len(trace.messages)
        grade = await grade_trace(trace, starter, Replies(judge), Replies(judge), grade_set_id="g")
        path = save_episode_grade(Path(tmp) / "run", grade)
        again = read_episode_grade(path)
        assert again.episode_id == trace.episode_id and again.trace_sha256 == grade.trace_sha256
        store.close()
