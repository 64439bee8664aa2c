"""Grammar-constrained sampling with the grammar checked after the sampling chain.

llama-cpp-python puts the grammar sampler inside the sampling chain, so every generated token
first runs the grammar over the whole vocabulary (151,936 tokens for Qwen2.5): ~38 ms a token on
this project's 2-core reference machine, as long as the 0.5B model's own forward pass. llama.cpp's
own tools do it the other way round (``common_sampler_sample`` in ``common/sampling.cpp``,
``grammar_first = false``):

1. run the sampling chain (penalties, top-k, top-p, min-p, temperature, then greedy or a seeded
   draw) on the unconstrained logits and take its token;
2. check that single token against the grammar;
3. only if the grammar rejects it, run the grammar over the whole vocabulary and then the chain
   again on what is left.

Then the grammar and the chain both accept the chosen token. At temperature 0 (greedy) the result
is exactly the grammar-first result: the unconstrained argmax, when the grammar allows it, is also
the constrained argmax. At temperature > 0 the draw follows llama.cpp's rejection rule rather than
the renormalised constrained distribution (the same trade llama.cpp makes).

:func:`fast_llama_class` returns a ``llama_cpp.Llama`` subclass whose ``_init_sampler`` builds a
:class:`GrammarRejectionSampler` when a grammar is given, so ``create_completion`` (prefix cache,
stop handling, usage) is unchanged.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

import numpy as np


class GrammarRejectionSampler:
    """A sampler object with the interface llama-cpp-python's ``Llama.sample`` calls:
    ``sample(ctx, idx) -> token id`` (``ctx`` a ``LlamaContext``, ``idx`` the logits row, -1 for
    the last). ``chain`` is a ``llama_cpp._internals.LlamaSampler`` without a grammar; ``grammar``
    a ``llama_cpp.LlamaGrammar``; ``vocab`` the model's ``llama_vocab`` pointer.

    ``fast_accepts`` and ``full_passes`` count how often the chain's token passed the grammar
    check and how often the whole vocabulary had to be constrained (for the debug log and tests).
    """

    def __init__(self, chain: Any, grammar: Any, vocab: Any, n_vocab: int) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self.chain = chain
        self.grammar = llama_cpp.llama_sampler_init_grammar(
            vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
        )
        if not self.grammar:
            raise ValueError("llama.cpp could not parse the grammar")
        self.n_vocab = n_vocab
        self._buffer = (llama_cpp.llama_token_data * n_vocab)()
        self._view = np.ctypeslib.as_array(self._buffer)
        self._ids = np.arange(n_vocab, dtype=np.int32)
        self._one = llama_cpp.llama_token_data()
        self.fast_accepts = 0
        self.full_passes = 0

    def _candidates(self, ctx: Any, idx: int) -> Any:
        logits = np.ctypeslib.as_array(
            self._lib.llama_get_logits_ith(ctx.ctx, idx), shape=(self.n_vocab,)
        )
        self._view["id"] = self._ids
        self._view["logit"] = logits
        self._view["p"] = 0.0
        return self._lib.llama_token_data_array(
            data=ctypes.cast(self._buffer, self._lib.llama_token_data_p),
            size=self.n_vocab,
            selected=-1,
            sorted=False,
        )

    def allows(self, token: int) -> bool:
        """Whether the grammar, in its current state, admits ``token`` next."""
        lib = self._lib
        self._one = lib.llama_token_data(token, 1.0, 0.0)
        single = lib.llama_token_data_array(
            data=ctypes.pointer(self._one), size=1, selected=-1, sorted=False
        )
        lib.llama_sampler_apply(self.grammar, ctypes.byref(single))
        return not math.isinf(self._one.logit)

    def sample(self, ctx: Any, idx: int = -1) -> int:
        """The next token (see the module docstring); both samplers accept it."""
        lib = self._lib
        cur = self._candidates(ctx, idx)
        lib.llama_sampler_apply(self.chain.sampler, ctypes.byref(cur))
        token = int(cur.data[cur.selected].id)
        if self.allows(token):
            self.fast_accepts += 1
        else:
            self.full_passes += 1
            cur = self._candidates(ctx, idx)
            lib.llama_sampler_apply(self.grammar, ctypes.byref(cur))
            lib.llama_sampler_apply(self.chain.sampler, ctypes.byref(cur))
            token = int(cur.data[cur.selected].id)
        lib.llama_sampler_accept(self.grammar, token)
        self.chain.accept(token)
        return token

    def close(self) -> None:
        """Free the grammar sampler and the chain (idempotent)."""
        if self.grammar:
            self._lib.llama_sampler_free(self.grammar)
            self.grammar = None
        self.chain.close()

    def __del__(self) -> None:
        self.close()


def fast_llama_class() -> type:
    """``llama_cpp.Llama`` with :class:`GrammarRejectionSampler` for grammar-constrained calls.

    Relies on llama-cpp-python's ``Llama._init_sampler`` (builds the chain, 0.3.x) and
    ``Llama.sample`` (calls ``self._sampler.sample(self._ctx, idx)``); without a grammar the
    library's own sampler is used unchanged."""
    import llama_cpp

    class FastGrammarLlama(llama_cpp.Llama):
        last_sampler: GrammarRejectionSampler | None = None

        def _init_sampler(self, *args: Any, **kwargs: Any) -> Any:
            grammar = kwargs.pop("grammar", None)
            chain = super()._init_sampler(*args, **kwargs)
            if grammar is None:
                self.last_sampler = None
                return chain
            sampler = GrammarRejectionSampler(chain, grammar, self._model.vocab, self._n_vocab)
            self.last_sampler = sampler
            return sampler

    return FastGrammarLlama
