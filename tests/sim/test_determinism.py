"""Same seed and scripted models: byte-identical traces; a different seed changes seeded noise."""

from pathlib import Path

from callbench.bundle.models import VadSplit
from callbench.trace import load_trace, save_trace


def _noisy(dairy):  # type: ignore[no-untyped-def]
    _, scen = dairy
    prog = scen.channel.model_copy(
        update={"seeded_noise": True, "vad_splits": [VadSplit(step="s3_reason", after=["mastitis"])]}
    )
    return scen.model_copy(update={"channel": prog})


async def test_same_seed_gives_byte_identical_traces(run, dairy, tmp_path: Path) -> None:
    scen = _noisy(dairy)
    a = await run(scenario=scen, seed=11)
    b = await run(scenario=scen, seed=11)
    # identical apart from the timings, which are measurements (never in the content hash)
    assert a.canonical_json(content_only=True) == b.canonical_json(content_only=True)
    assert a.sha256() == b.sha256()
    assert a.latency is not None and b.latency is not None
    assert [r.turn for r in a.latency.requests] == [r.turn for r in b.latency.requests]
    save_trace(a, tmp_path / "a.json")
    save_trace(b, tmp_path / "b.json")
    assert load_trace(tmp_path / "a.json") == a
    assert load_trace(tmp_path / "a.json").sha256() == load_trace(tmp_path / "b.json").sha256()


async def test_a_different_seed_changes_seeded_noise(run, dairy) -> None:
    scen = _noisy(dairy)
    firsts = set()
    for seed in range(1, 7):
        t = await run(scenario=scen, seed=seed)
        firsts.add(t.caller_turns[0].observed[0])
        assert t.caller_turns[0].intended == "Greet back and confirm you are Meena Patel."
        assert t.seeds.run == seed
    assert len(firsts) > 1


async def test_vad_fragments_become_consecutive_user_messages(run, dairy) -> None:
    t = await run(scenario=_noisy(dairy), seed=3)
    turn3 = t.caller_turns[2]
    assert turn3.observed == [
        "One cow has mastitis",
        "and the veterinary worker said to discard today's milk.",
    ]
    msgs = [t.messages[i] for i in turn3.message_indices]
    assert [(m.role, m.caller_turn, m.fragment) for m in msgs] == [("user", 3, 0), ("user", 3, 1)]
    assert turn3.message_indices[1] == turn3.message_indices[0] + 1
    assert [m.content for m in msgs] == turn3.observed
