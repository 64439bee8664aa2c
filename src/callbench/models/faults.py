"""Per-episode fault accounting: requests, retries and provider faults by role and kind.

Every :class:`~callbench.models.remote.client.RemoteClient` request is noted in the :class:`FaultLedger`
of the task it runs in (a ``contextvars.ContextVar``: the episode runner and the grader each set a
fresh ledger per episode, and asyncio tasks inherit it), so the counts land in the episode's trace
(candidate and caller) and episode grade (judges) without threading a ledger through every call.
Nothing is noted when no ledger is set (a client used on its own).

Fault kinds: ``rate_limit`` (429), ``server_error`` (5xx, 408, 409), ``timeout``,
``connection``, ``reset`` (the connection closed in the middle of the body), ``auth`` (401/403),
``not_found`` (404), ``client_error`` (other 4xx), ``malformed_body`` (200 whose body is not JSON,
e.g. truncated), ``not_utf8``, ``html_body`` (200 with a non-JSON content type such as
``text/html``), ``error_body`` (200 whose body is an error object, e.g. Anthropic's ``type: error``),
``missing_choices``, ``empty_choices`` (OpenAI), ``missing_content`` (Anthropic), ``empty_reply`` (a
completion with no content and no tool calls), ``invalid_request`` (a 4xx/5xx whose body is a
request-validation error: never retried, it drives the OpenAI adapter's negotiation,
``negotiation.py``), ``rejected_shape`` (server errors that always answer requests of one shape while others
succeed: not retried as an outage, ``anthropic_client.py``), ``tool_call_in_content`` (tool calls
returned as JSON text in ``content``; a candidate output error unless ``parse_content_tool_calls``
is set), ``truncated_call`` (a reply cut off in the middle of a tool call written as text: a
candidate output error, ``content_calls.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from pydantic import BaseModel, Field

FAULT_KINDS: tuple[str, ...] = (
    "rate_limit", "server_error", "timeout", "connection", "reset", "auth", "not_found", "client_error",
    "malformed_body", "not_utf8", "html_body", "error_body", "missing_choices", "empty_choices",
    "missing_content", "empty_reply", "rejected_shape", "truncated_call",
)
"""Every fault kind an adapter reports (see the module docstring)."""


class RoleFaults(BaseModel):
    """One role's counts: HTTP requests sent (every attempt), retries, and faults by kind."""

    requests: int = 0
    retries: int = 0
    faults: dict[str, int] = Field(default_factory=dict)
    notes: dict[str, int] = Field(default_factory=dict)
    """Replies used as they were but with something read in place of what they lacked, by kind:
    ``usage_missing`` (no token counts: read as 0, so the call's tokens and cost are undercounted)."""
    rate_limit_wait_s: float = 0.0
    """Seconds callbench slept before retrying requests answered 429 (``rate_limit``): the backoff,
    never less than the server's Retry-After (``models/remote/retry.py``)."""
    limiter_wait_s: float = 0.0
    """Seconds requests waited for a permit of callbench's own per-provider concurrency limit
    (``runs/guard.py``, ``--concurrency`` and the provider limits) before they were sent."""

    def add(self, other: RoleFaults) -> None:
        """Add ``other``'s counts to these (in place)."""
        self.requests += other.requests
        self.retries += other.retries
        self.rate_limit_wait_s += other.rate_limit_wait_s
        self.limiter_wait_s += other.limiter_wait_s
        for k, n in other.faults.items():
            self.faults[k] = self.faults.get(k, 0) + n
        for k, n in other.notes.items():
            self.notes[k] = self.notes.get(k, 0) + n


class FaultLedger(BaseModel):
    """Counts by role (``candidate``, ``caller``, ``task_judge``, ``conversation_judge``)."""

    roles: dict[str, RoleFaults] = Field(default_factory=dict)
    skip_role: str | None = None
    """The role whose fault skipped the episode (None when it was not skipped for a fault)."""
    skip_kind: str | None = None

    def role(self, role: str) -> RoleFaults:
        return self.roles.setdefault(role, RoleFaults())

    def snapshot(self) -> dict[str, RoleFaults]:
        """A copy of the counts, roles sorted, roles without requests left out."""
        return {r: f.model_copy(deep=True) for r, f in sorted(self.roles.items())
                if f.requests or f.faults or f.notes}


class RateLimitWaits(BaseModel):
    """One role's rate-limit pressure over a run invocation (``MeasuredAt.rate_limits``):
    ``answered_429`` requests the provider answered 429, ``retry_wait_s`` seconds callbench slept
    before retrying them (Retry-After included), ``limiter_wait_s`` seconds requests waited for
    callbench's own per-provider concurrency permit. None of these is in a turn's time to first
    word (each attempt is timed from its own send), but a provider answering 429 was under
    pressure while it was measured."""

    answered_429: int = 0
    retry_wait_s: float = 0.0
    limiter_wait_s: float = 0.0

    @classmethod
    def of(cls, counts: RoleFaults) -> RateLimitWaits:
        """The waits in one role's ledger counts."""
        return cls(answered_429=counts.faults.get("rate_limit", 0), retry_wait_s=counts.rate_limit_wait_s,
                   limiter_wait_s=counts.limiter_wait_s)

    def add(self, other: RateLimitWaits) -> None:
        """Add ``other``'s waits to these (in place)."""
        self.answered_429 += other.answered_429
        self.retry_wait_s += other.retry_wait_s
        self.limiter_wait_s += other.limiter_wait_s


_current: ContextVar[FaultLedger | None] = ContextVar("callbench_fault_ledger", default=None)


@contextmanager
def collect_faults() -> Iterator[FaultLedger]:
    """Set a fresh ledger for the current task (and tasks it starts) and yield it. When it ends,
    its counts are added to the ledger that was current before (if any), so an enclosing ledger
    (a run invocation's grading, ``runs/executor.py``) sees every nested episode's or grade's."""
    outer = _current.get()
    ledger = FaultLedger()
    token = _current.set(ledger)
    try:
        yield ledger
    finally:
        _current.reset(token)
        if outer is not None:
            for role, counts in ledger.roles.items():
                outer.role(role).add(counts)


def note_request(role: str) -> None:
    """Count one request sent for ``role``."""
    ledger = _current.get()
    if ledger is not None:
        ledger.role(role).requests += 1


def note_retry(role: str, kind: str | None = None, wait_s: float = 0.0) -> None:
    """Count one retry for ``role`` of a fault of ``kind``, retried after sleeping ``wait_s``
    seconds; the sleep after a ``rate_limit`` (429) adds to :attr:`RoleFaults.rate_limit_wait_s`."""
    ledger = _current.get()
    if ledger is not None:
        counts = ledger.role(role)
        counts.retries += 1
        if kind == "rate_limit":
            counts.rate_limit_wait_s += max(0.0, wait_s)


def note_limiter_wait(role: str, wait_s: float) -> None:
    """Add ``wait_s`` seconds that a request of ``role`` waited for its provider's permit
    (:attr:`RoleFaults.limiter_wait_s`)."""
    ledger = _current.get()
    if ledger is not None and wait_s > 0:
        ledger.role(role).limiter_wait_s += wait_s


def note_fault(role: str, kind: str) -> None:
    """Count one fault of ``kind`` for ``role``."""
    ledger = _current.get()
    if ledger is not None:
        faults = ledger.role(role).faults
        faults[kind] = faults.get(kind, 0) + 1


def note_reading(role: str, kind: str) -> None:
    """Count one reply of ``role`` used with ``kind`` read in place of what it lacked
    (:attr:`RoleFaults.notes`, e.g. ``usage_missing``)."""
    ledger = _current.get()
    if ledger is not None:
        notes = ledger.role(role).notes
        notes[kind] = notes.get(kind, 0) + 1


def note_skip(role: str, kind: str) -> None:
    """Record that a fault of ``kind`` in ``role`` ended the episode as skipped."""
    ledger = _current.get()
    if ledger is not None:
        ledger.skip_role, ledger.skip_kind = role or None, kind
