"""Every starter-bundle scenario runs with scripted:reference + scripted:plan and ends as a call
should: call_ended or caller_done, never skipped (the issue's "Done when")."""

from pathlib import Path

import pytest

from callbench.bundle.loader import load_bundle_collect
from callbench.bundle.models import Bundle
from callbench.models.scripted.models import create_scripted
from callbench.sim.episode import run_episode
from callbench.sim.views import candidate_messages
from callbench.trace import EndReason

STARTER = Path(__file__).parents[2] / "src" / "callbench" / "examples" / "starter"


def _load() -> Bundle | None:
    if not (STARTER / "agents").is_dir():
        return None
    bundle, _ = load_bundle_collect(STARTER)
    return bundle


_BUNDLE = _load()
_IDS = [s.id for _, s in _BUNDLE.scenarios()] if _BUNDLE is not None else []


@pytest.mark.skipif(not _IDS, reason="the starter bundle has no scenarios yet")
@pytest.mark.parametrize("scenario_id", _IDS)
async def test_reference_path_episode(scenario_id: str) -> None:
    assert _BUNDLE is not None
    agent, scen = _BUNDLE.scenario(scenario_id)
    if not scen.reference_path:
        pytest.skip(f"{scenario_id} has no reference path")
    trace = await run_episode(
        agent,
        scen,
        candidate=create_scripted("scripted:reference", None, _BUNDLE),
        caller=create_scripted("scripted:plan", None, _BUNDLE),
        bundle_name=_BUNDLE.meta.name,
        bundle_version=_BUNDLE.meta.version,
        bundle_hash=_BUNDLE.content_hash,
        episode_id=f"{scenario_id}-r0",
        run_seed=20260314,
        repeat=0,
    )
    assert trace.end_reason in (EndReason.CALL_ENDED, EndReason.CALLER_DONE), (
        f"{scenario_id}: {trace.end_reason} {trace.skip_reason or ''}"
    )
    assert not any(m.error for m in trace.messages), [m.error for m in trace.messages if m.error]
    expressed = [s for ct in trace.caller_turns for s in ct.expressed_steps]
    assert expressed == [s.id for s in scen.brief.plan][: len(expressed)]
    assert candidate_messages(trace.messages)[0].content == trace.messages[0].content
    # Every authored channel event (ASR event, VAD split) is reached and applies on this replay
    # (an anchor on digits the caller's words do not contain never fires).
    authored = [e for ct in trace.caller_turns for e in ct.channel_events if e.source == "authored"]
    assert len(authored) == len(scen.channel.asr_events) + len(scen.channel.vad_splits), scenario_id
    assert [(e.kind, e.span, e.detail) for e in authored if not e.applied] == [], scenario_id
