"""Fixtures of the hostile-model tests: the starter bundle."""

from __future__ import annotations

import pytest
from tests.hostile.helpers import STARTER

from callbench.bundle.loader import load_bundle
from callbench.bundle.models import Bundle


@pytest.fixture(scope="session")
def starter() -> Bundle:
    return load_bundle(STARTER)
