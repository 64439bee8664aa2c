"""The grammar probe of the local provider (``grammar._parsable_grammar``): llama.cpp prints a
grammar it refuses to fd 2 with a C ``fprintf``; that dump is silenced (only during the probe) and
the fallback to a looser grammar leaves one line in the log. A fake llama.cpp writes to fd 2 the
way the C parser does, so no model is needed."""

from __future__ import annotations

import logging
import os
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from callbench.models.local import grammar as local_grammar
from callbench.models.local.native_stderr import silenced_stderr

DUMP = "".join(f"root_{i} ::= \"x\" root_{i + 1}\n" for i in range(300))


class FakeLlamaCpp:
    """``llama_sampler_init_grammar`` as llama.cpp behaves: a grammar it refuses is printed whole
    to fd 2 and the handle is NULL (0)."""

    def __init__(self) -> None:
        self.freed: list[int] = []

    def llama_sampler_init_grammar(self, vocab: Any, grammar: bytes, root: bytes) -> int:
        if b"strict" in grammar:
            os.write(2, b"parse: error parsing grammar: number of repetitions exceeds sane defaults\n\n")
            os.write(2, grammar)
            return 0
        return 7

    def llama_sampler_free(self, handle: int) -> None:
        self.freed.append(handle)


def _grammar(schema: dict[str, Any]) -> Any:
    text = (DUMP if schema.get("title") == "strict" else "root ::= \"{}\"\n").replace("root", schema["title"])
    return SimpleNamespace(_grammar=text, _root="root", schema=schema)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeLlamaCpp:
    lib = FakeLlamaCpp()
    monkeypatch.setattr(local_grammar, "_llama", lambda: lib)
    monkeypatch.setattr(local_grammar, "_converts", lambda schema: True)
    monkeypatch.setattr(local_grammar, "_grammar", _grammar)
    monkeypatch.setattr(local_grammar, "_PARSES", {})
    return lib


LLM = SimpleNamespace(_model=SimpleNamespace(vocab=object()))
STRICT = {"title": "strict", "type": "object", "properties": {"a": {"type": "string", "maxLength": 400}}}
LOOSE = {"title": "loose", "type": "object"}


def test_a_refused_grammar_is_not_dumped_and_the_fallback_is_one_line(
    fake: FakeLlamaCpp, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="callbench.models.local.grammar"):
        chosen = local_grammar._parsable_grammar(LLM, [STRICT, LOOSE])
    assert chosen.schema is LOOSE
    assert fake.freed == [7]
    err = capfd.readouterr().err
    assert "root_" not in err and "strict_" not in err and "error parsing grammar" not in err
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 1
    assert "llama.cpp refused the grammar of 1 of 2 output schema(s)" in notes[0]
    assert "\n" not in notes[0]
    # fd 2 is back: the next native write reaches it
    os.write(2, b"after the probe\n")
    assert capfd.readouterr().err == "after the probe\n"
    # the verdict is kept: a second probe of the same schemas asks llama.cpp nothing and says nothing
    caplog.clear()
    assert local_grammar._parsable_grammar(LLM, [STRICT, LOOSE]).schema is LOOSE
    assert fake.freed == [7] and caplog.records == []


def test_no_parsable_grammar_raises_and_restores_fd2(
    fake: FakeLlamaCpp, capfd: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ValueError, match=r"llama\.cpp cannot parse a grammar for this output schema"):
        local_grammar._parsable_grammar(LLM, [STRICT])
    os.write(2, b"still here\n")
    assert capfd.readouterr().err == "still here\n"


def test_silenced_stderr_restores_fd2_after_an_error_and_across_threads(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(RuntimeError), silenced_stderr():
        os.write(2, b"lost\n")
        raise RuntimeError("boom")
    os.write(2, b"kept 1\n")

    def probe() -> None:
        for _ in range(50):
            with silenced_stderr():
                os.write(2, b"lost\n")

    threads = [threading.Thread(target=probe) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    os.write(2, b"kept 2\n")
    assert capfd.readouterr().err == "kept 1\nkept 2\n"
