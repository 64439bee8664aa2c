"""Grammar checked after the sampling chain (skipped unless llama-cpp-python and the 0.5B weights
are installed): the same greedy answers as llama-cpp-python's grammar-first chain, the fallback
pass when the chain's token breaks the grammar, and sampled answers that still match the grammar."""

from __future__ import annotations

import json

import jsonschema
import pytest

from callbench.models.local.weights import VARIANTS, find_parts

pytest.importorskip("llama_cpp")
if find_parts(VARIANTS["0.5b"]) is None:
    pytest.skip("the 0.5B weights (callbench[local]) are not installed", allow_module_level=True)

import llama_cpp

from callbench.models.local.sampling import GrammarRejectionSampler, fast_llama_class
from callbench.models.local.weights import ensure_weights

JUDGE_SCHEMA = {
    "type": "object",
    "properties": {
        "labels": {
            "type": "array",
            "maxItems": 4,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": 40},
                    "passed": {"type": "boolean"},
                    "cited": {"type": "array", "maxItems": 4, "items": {"type": "integer"}},
                },
                "required": ["name", "passed", "cited"],
            },
        },
        "summary": {"type": "string", "maxLength": 200},
    },
    "required": ["labels", "summary"],
}
PROMPT = (
    "<|im_start|>system\nYou grade phone calls. Answer in JSON: a label for the greeting and one "
    "for the identity check, citing message indices.<|im_end|>\n<|im_start|>user\nCall:\n"
    "[0] agent: Hello, LPG helpline, how can I help?\n[1] caller: Book a refill, consumer number 4471."
    "\n[2] agent: Booked for 4471.\n[3] caller: thanks bye<|im_end|>\n<|im_start|>assistant\n"
)


@pytest.fixture(scope="module")
def models():
    path = str(ensure_weights("0.5b"))
    plain = llama_cpp.Llama(path, n_ctx=1024, verbose=False)
    fast = fast_llama_class()(path, n_ctx=1024, verbose=False)
    yield plain, fast
    plain.close()
    fast.close()


def _complete(llm, schema, **kwargs):
    grammar = llama_cpp.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    tokens = llm.tokenize(PROMPT.encode(), add_bos=False, special=True)
    out = llm.create_completion(tokens, max_tokens=160, grammar=grammar, **kwargs)
    return out["choices"][0]["text"]


def test_greedy_answer_is_the_grammar_first_answer(models) -> None:
    plain, fast = models
    expected = _complete(plain, JUDGE_SCHEMA, temperature=0.0)
    got = _complete(fast, JUDGE_SCHEMA, temperature=0.0)
    assert got == expected
    jsonschema.validate(json.loads(got), JUDGE_SCHEMA)
    sampler = fast.last_sampler
    assert isinstance(sampler, GrammarRejectionSampler)
    assert sampler.fast_accepts > sampler.full_passes


def test_rejected_token_falls_back_to_the_constrained_pass(models) -> None:
    _, fast = models
    schema = {
        "type": "object",
        "properties": {"verdict": {"enum": ["zebra-umbrella-7"]}},
        "required": ["verdict"],
        "additionalProperties": False,
    }
    text = _complete(fast, schema, temperature=0.0)
    assert json.loads(text) == {"verdict": "zebra-umbrella-7"}
    assert fast.last_sampler.full_passes >= 1


def test_sampled_answers_match_the_grammar(models) -> None:
    _, fast = models
    for seed in (1, 2, 3):
        text = _complete(fast, JUDGE_SCHEMA, temperature=0.9, seed=seed)
        jsonschema.validate(json.loads(text), JUDGE_SCHEMA)


def test_without_grammar_the_library_sampler_is_used(models) -> None:
    _, fast = models
    tokens = fast.tokenize(PROMPT.encode(), add_bos=False, special=True)
    out = fast.create_completion(tokens, max_tokens=4, temperature=0.0)
    assert out["usage"]["completion_tokens"] >= 1 and fast.last_sampler is None
