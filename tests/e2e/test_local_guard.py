"""The shared guard of the embedded-model tests: skip without llama-cpp-python or the weights, fail
instead under ``CALLBENCH_REQUIRE_LOCAL=1``, and say which requirement is missing."""

from __future__ import annotations

import importlib.util

import pytest

from .conftest import REQUIRE_LOCAL_ENV, SERVER_MODULES, local_model_missing, require_local_model

REAL_FIND_SPEC = importlib.util.find_spec


def _modules(monkeypatch: pytest.MonkeyPatch, *, absent: set[str]) -> None:
    """llama_cpp and the server extra's modules installed, except those in ``absent``; any other
    module as it really is."""
    ours = {"llama_cpp", *SERVER_MODULES}

    def find_spec(name: str, package: str | None = None) -> object:
        if name in ours:
            return None if name in absent else object()
        return REAL_FIND_SPEC(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_an_extra_requirement_is_named_when_the_rest_is_there(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("callbench.models.local.weights.find_parts", lambda variant: ["part1"])
    _modules(monkeypatch, absent=set())
    assert local_model_missing(("no GPU here", False), ("reads /proc", True)) == "reads /proc"
    assert local_model_missing(("no GPU here", False)) == ""


def test_missing_weights_skip_or_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("callbench.models.local.weights.find_parts", lambda variant: None)
    _modules(monkeypatch, absent=set())
    why = "the 0.5B weights (callbench[local]) are not installed"
    assert local_model_missing(server=True) == why
    monkeypatch.delenv(REQUIRE_LOCAL_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"0\.5B weights"):
        require_local_model()
    monkeypatch.setenv(REQUIRE_LOCAL_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=r"CALLBENCH_REQUIRE_LOCAL=1 but the 0\.5B weights"):
        require_local_model()


def test_a_missing_server_extra_is_named_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("callbench.models.local.weights.find_parts", lambda variant: ["part1"])
    _modules(monkeypatch, absent={"fastapi"})
    assert local_model_missing(server=True) == "llama-cpp-python's [server] extra is not installed"
    assert local_model_missing() == ""
