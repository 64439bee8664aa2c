"""Failed tool results and success claims."""

from __future__ import annotations

import pytest

from callbench.bundle.validate.outcomes import claims_success, failed_result


@pytest.mark.parametrize(
    ("result", "why"),
    [
        ({"success": False, "error": "slot not held"}, "success: false"),
        ({"ok": False}, "ok: false"),
        ({"error": "not_found"}, "error: not_found"),
        ({"errors": ["bad date"]}, "errors: ['bad date']"),
        ({"status": "Not Found"}, "status: Not Found"),
        ({"status": "slot-unavailable"}, None),  # not a listed status and no error field
        ({"status": "booked", "confirmation": "C-1"}, None),
        ({"success": True, "error": None}, None),
        ("done", None),
        ([{"error": "x"}], None),
    ],
)
def test_failed_result(result: object, why: str | None) -> None:
    assert failed_result(result) == why


@pytest.mark.parametrize(
    ("text", "claim"),
    [
        ("Great, you're booked for Tuesday at 3.", "you're booked"),
        ("Your appointment has been scheduled.", "has been scheduled"),
        ("All set! Anything else?", "All set"),
        ("Your confirmation number is 4417.", "confirmation number is"),
        ("I'm sorry, that slot is not booked; it was taken.", None),
        ("Unfortunately the booking is confirmed only after payment.", None),
        ("Let me check the calendar.", None),
        ("I couldn't book it. But your details are updated.", "are updated"),
    ],
)
def test_claims_success(text: str, claim: str | None) -> None:
    assert claims_success(text) == claim
