"""No model output crashes an episode or a save: very deep JSON and lone surrogates in tool
arguments end as a trace on disk that reads back, charged to the candidate."""

from __future__ import annotations

import json
from pathlib import Path

from tests.hostile.helpers import SCENARIO, Replies

from callbench.bundle.models import Bundle
from callbench.models.base import ModelResponse, ToolCall, Usage
from callbench.models.output_limits import TOOL_ARGUMENT_LIMITS, safe_text
from callbench.models.scripted.models import create_scripted
from callbench.runfolder.store import RunStore, text_sha256
from callbench.sim.episode import run_episode
from callbench.trace import Trace


def _calls(arguments: str) -> ModelResponse:
    call = ToolCall(id="c1", name="verify_customer", arguments=arguments)
    return ModelResponse(content="One moment.", tool_calls=[call], usage=Usage(calls=1))


async def _episode(bundle: Bundle, candidate: Replies) -> Trace:
    agent, scen = bundle.scenario(SCENARIO)
    return await run_episode(
        agent, scen, candidate=candidate, caller=create_scripted("scripted:plan", None, bundle),
        bundle_name=bundle.meta.name, bundle_version=bundle.meta.version, bundle_hash=bundle.content_hash,
        episode_id="hostile-r0", run_seed=7, repeat=0,
    )


def _saved(tmp_path: Path, trace: Trace) -> Trace:
    """Save as a run saves, read back, and check the index hash is over the stored text."""
    store = RunStore(tmp_path / "run")
    sha = store.save_trace(trace)
    back = store.load_trace(trace.episode_id)
    assert back.sha256() == trace.sha256()  # the content hash, over what is stored
    assert text_sha256(back.canonical_json()) == sha  # the index's hash: the file's text
    from callbench.runfolder.episode_files import read_text

    assert text_sha256(read_text(store.trace_path(trace.episode_id))) == sha
    return back


async def test_deep_arguments_are_a_parse_error(starter: Bundle, tmp_path: Path) -> None:
    deep = "[" * 5000 + "]" * 5000
    raw = json.dumps({"identifier_type": "customer_id", "identifier": "x"})[:-1] + f', "x": {deep}}}'
    cand = Replies([_calls(raw), "Goodbye."])
    trace = await _episode(starter, cand)
    (ev,) = trace.tool_events
    assert ev.outcome == "parse_error" and ev.arguments is None
    assert f"nested deeper than {TOOL_ARGUMENT_LIMITS.max_depth} levels" in (ev.parse_error or "")
    back = _saved(tmp_path, trace)
    assert back.tool_events[0].raw_arguments == raw


async def test_lone_surrogate_saves(starter: Bundle, tmp_path: Path) -> None:
    raw = '{"identifier_type": "customer_id", "identifier": "\\ud800", "card_last4": "0719", ' \
          '"date_of_birth": "1967-05-11"}'
    cand = Replies([ModelResponse(content="Hello \ud800 there", usage=Usage(calls=1)), _calls(raw), "Bye."])
    trace = await _episode(starter, cand)
    (ev,) = trace.tool_events
    assert ev.arguments is not None and ev.arguments["identifier"] == "\\ud800"  # its escape's text
    assert ev.outcome == "schema_error"  # the escaped text does not fit the identifier pattern
    assert trace.messages[1].content == "Hello \\ud800 there"
    back = _saved(tmp_path, trace)
    assert back.messages[1].content == "Hello \\ud800 there"
    assert back.tool_events[0].arguments == ev.arguments


def test_safe_text_keeps_what_utf8_holds() -> None:
    text = "tab\there NUL\x00 bell\x07 தமிழ் 😀"
    assert safe_text(text) is text
    assert safe_text("a\udc80b\ud83d") == "a\\udc80b\\ud83d"


def test_every_role_parser_locates_a_limit() -> None:
    """Deep, long or oversized JSON is each role's located output error, never a RecursionError."""
    import pytest

    from callbench.grade.parse import ReplyError, extract_json
    from callbench.models.base import ModelOutputError
    from callbench.models.output import check_json_output
    from callbench.models.output_limits import REPLY_LIMITS
    from callbench.sim.caller import validate_turn

    deep = '{"speech": ' + "[" * 4000 + "]" * 4000 + "}"
    long = json.dumps({"speech": "x" * (REPLY_LIMITS.max_string_chars + 1)})
    brief_free = validate_turn(deep, _brief(), [])  # the caller's: a rejection (then a rerun)
    assert brief_free.rejection is not None and "nested deeper than 64 levels" in brief_free.rejection
    assert "at /speech" in (validate_turn(long, _brief(), []).rejection or "")
    with pytest.raises(ReplyError, match="nested deeper than 64"):  # the judge's: a judge error
        extract_json(deep)
    with pytest.raises(ModelOutputError, match="nested deeper than 64"):  # the generator's (and any
        check_json_output(deep, {"type": "object"})  # response_schema reply): an output error
    with pytest.raises(ModelOutputError, match="characters of JSON"):
        check_json_output("{}" + " " * REPLY_LIMITS.max_chars, {"type": "object"})


def _brief():  # type: ignore[no-untyped-def]
    from tests.hostile.helpers import STARTER

    from callbench.bundle.validate.audits import load_bundle

    return load_bundle(STARTER).scenario(SCENARIO)[1].brief
