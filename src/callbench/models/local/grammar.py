"""Constrained decoding for the embedded model: the output's JSON schema compiled to a llama.cpp
grammar by llama-cpp-python's ``json_schema_to_gbnf``, simplified where the converter or llama.cpp's
own grammar parser cannot take it (the output is still checked against the request's schema: a
looser grammar only lets more wrong answers through to that check)."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from callbench.models.base import ModelRequest
from callbench.models.local.format import candidate_output_schema, tool_arguments_schema
from callbench.models.local.library import llama_lib as _llama
from callbench.models.local.native_stderr import silenced_stderr
from callbench.models.remote.schemas import bounded_integers_as_enums, map_subschemas

LOG = logging.getLogger(__name__)
_GRAMMAR_DROP = frozenset(
    {
        "pattern",
        "not",
        "if",
        "then",
        "else",
        "patternProperties",
        "dependentSchemas",
        "propertyNames",
        "contains",
        "format",
    }
)
_GRAMMARS: dict[str, Any] = {}
_GRAMMARS_LOCK = threading.Lock()


def _strip_keywords(schema: Any) -> Any:
    """``schema`` without the keywords the grammar converter often cannot express (keyword
    positions only: a property named ``format`` is kept)."""
    if not isinstance(schema, dict):
        return schema
    kept = {key: value for key, value in schema.items() if key not in _GRAMMAR_DROP}
    return map_subschemas(kept, _strip_keywords)


def _unbounded(schema: Any) -> Any:
    """``schema`` without ``maxLength`` and ``maxItems`` (keyword positions only): llama.cpp
    expands each bound into nested optional rules, and a large schema with many bounds (the
    scenario schema) exceeds what its parser accepts."""
    if not isinstance(schema, dict):
        return schema
    kept = {key: value for key, value in schema.items() if key not in ("maxLength", "maxItems")}
    return map_subschemas(kept, _unbounded)


def _converts(schema: dict[str, Any]) -> bool:
    try:
        _llama().llama_grammar.json_schema_to_gbnf(json.dumps(schema))
    except Exception:  # the converter raises AssertionError/ValueError/KeyError on what it cannot express
        return False
    return True


def grammar_schema(request: ModelRequest) -> dict[str, Any]:
    """The schema the output is constrained to, simplified per tool until llama.cpp can compile it;
    bounded integers as enums (:func:`~callbench.models.remote.schemas.bounded_integers_as_enums`:
    the converter ignores ``minimum``/``maximum``)."""
    schema: dict[str, Any] = bounded_integers_as_enums(_schema_before_enums(request))
    return schema


def _schema_before_enums(request: ModelRequest) -> dict[str, Any]:
    if request.response_schema is not None:
        schema = request.response_schema
        if _converts(schema):
            return schema
        stripped = _strip_keywords(schema)
        return stripped if _converts(stripped) else {"type": "object"}
    arguments: dict[str, dict[str, Any]] = {}
    for tool in request.tools:
        original = tool_arguments_schema(tool)
        probe = candidate_output_schema([tool])
        if _converts(probe):
            continue
        stripped = _strip_keywords(original)
        arguments[tool.name] = (
            stripped
            if _converts(candidate_output_schema([tool], {tool.name: stripped}))
            else {"type": "object"}
        )
    return candidate_output_schema(request.tools, arguments)


_PARSES: dict[str, bool] = {}


def _parsable_grammar(llm: Any, schemas: list[dict[str, Any]]) -> Any:
    """The grammar of the first of ``schemas`` that llama.cpp's own grammar parser accepts. The
    Python converter can write a grammar the C parser refuses ("number of rules that are going to
    be repeated ... exceeds sane defaults": the scenario schema of ``callbench generate``, capped
    to 400-character strings, has hundreds of bounded repetitions), which would fail the call;
    the next, looser schema is tried then (the output is still checked against the request's
    schema; a looser grammar only lets more wrong answers through to that check). The C parser
    prints a grammar it refuses whole to fd 2, so the probe runs with fd 2 silenced
    (:func:`~callbench.models.local.native_stderr.silenced_stderr`) and a fallback is logged as one
    warning line instead (once per set of schemas: verdicts are kept for the process). Raises
    ValueError when none parses."""
    llama_cpp = _llama()
    refused = 0
    for schema in schemas:
        key = json.dumps(schema, sort_keys=True)
        if not _converts(schema):
            continue
        grammar = _grammar(schema)
        if key not in _PARSES:
            with silenced_stderr():
                handle = llama_cpp.llama_sampler_init_grammar(
                    llm._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8"))
            _PARSES[key] = bool(handle)
            if handle:
                llama_cpp.llama_sampler_free(handle)
            else:
                refused += 1
        if _PARSES[key]:
            if refused:
                LOG.warning(
                    "llama.cpp refused the grammar of %d of %d output schema(s); decoding with a looser "
                    "one (the answer is still checked against the request's schema)", refused, len(schemas),
                )
            return grammar
    raise ValueError("llama.cpp cannot parse a grammar for this output schema")


def _grammar(schema: dict[str, Any]) -> Any:
    key = json.dumps(schema, sort_keys=True)
    with _GRAMMARS_LOCK:
        grammar = _GRAMMARS.get(key)
        if grammar is None:
            grammar = _llama().LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
            _GRAMMARS[key] = grammar
        return grammar
