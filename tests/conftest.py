"""Settings for every test: ``callbench validate``'s result cache is off (a test that patches an
audit must see the audit run, and no test writes to the user's cache folder);
``tests/bundle/test_validate_cache.py`` turns it on in a temporary folder.

Ctrl-C is Ctrl-C in the processes the tests start: a shell without job control starts a
background job (``pytest ... &``, a CI runner's script) with SIGINT ignored, and an ignored signal
stays ignored across ``exec`` (POSIX ``execve``), so every command a test started would ignore the
SIGINT it sends and the Ctrl-C tests would fail for the runner's reason, not callbench's. Giving the
test process Python's own handler leaves its children the default disposition, as under a
terminal."""

from __future__ import annotations

import signal

import pytest

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _no_validate_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALLBENCH_VALIDATE_CACHE", "0")
