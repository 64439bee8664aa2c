"""Fixtures of the hostile-model tests: the starter bundle."""

from __future__ import annotations

import pytest
from tests.hostile.helpers import STARTER

from callbench.bundle.models import Bundle
from callbench.bundle.validate.audits import load_bundle


@pytest.fixture(scope="session")
def starter() -> Bundle:
    return load_bundle(STARTER)
