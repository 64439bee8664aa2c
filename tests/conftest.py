"""Settings for every test: ``callbench validate``'s result cache is off (a test that patches an
audit must see the audit run, and no test writes to the user's cache folder);
``tests/bundle/test_validate_cache.py`` turns it on in a temporary folder."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_validate_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALLBENCH_VALIDATE_CACHE", "0")
