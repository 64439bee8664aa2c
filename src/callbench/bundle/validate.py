"""Static audits of a loaded bundle (placeholder: filled by the validator work)."""

from __future__ import annotations

from callbench.bundle.loader import Problem
from callbench.bundle.models import Bundle


def validate_loaded(bundle: Bundle) -> list[Problem]:
    """Run every audit over a loaded bundle and return all problems found."""
    return []
