import hashlib

import pytest

from callbench.sim.seeds import COMPONENTS, derive_seed, episode_seeds


def test_seed_is_sha256_of_the_canonical_string() -> None:
    digest = hashlib.sha256(b"callbench-seed-v1|42|dairy_zero_supply|0|channel").digest()
    assert derive_seed(42, "dairy_zero_supply", 0, "channel") == int.from_bytes(digest[:8], "big") >> 1


def test_seed_is_63_bit_and_stable() -> None:
    s = derive_seed(1, "x", 0, "episode")
    assert 0 <= s < 2**63
    assert s == derive_seed(1, "x", 0, "episode")


def test_every_key_part_changes_the_seed() -> None:
    base = derive_seed(1, "scen", 0, "channel")
    others = {
        derive_seed(2, "scen", 0, "channel"),
        derive_seed(1, "scen2", 0, "channel"),
        derive_seed(1, "scen", 1, "channel"),
        derive_seed(1, "scen", 0, "backend"),
    }
    assert base not in others and len(others) == 4


def test_scenario_id_is_nfc_normalised() -> None:
    assert derive_seed(1, "cafe\u0301", 0, "caller") == derive_seed(1, "caf\u00e9", 0, "caller")


def test_unknown_component_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown seed component 'judge'"):
        derive_seed(1, "s", 0, "judge")


def test_episode_seeds_cover_every_component() -> None:
    seeds = episode_seeds(9, "s", 2)
    assert seeds.run == 9
    assert [getattr(seeds, c) for c in COMPONENTS] == [derive_seed(9, "s", 2, c) for c in COMPONENTS]
