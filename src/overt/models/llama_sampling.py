"""Picking the next token from llama.cpp's logits, with a grammar checked lazily.

llama-cpp-python's ``generate`` samples through one llama.cpp sampler chain
(penalties, grammar, then greedy or top-k/top-p/temperature). A grammar in
that chain tests every one of the vocabulary's 151,936 tokens against the
grammar at every step: on a small CPU, a large part of what generating a token
costs, for the ~30 tokens of a tool call.

:class:`TokenPicker` does what llama.cpp's own ``common_sampler`` does: it
samples without the grammar, tests only the token picked, and only when the
grammar refuses it samples again with the grammar applied to every token
first. For greedy decoding (the default, temperature 0) the result is exactly
the chain's: the best token the grammar allows is the best token when it is
allowed. With a temperature above 0 the draw can differ from the chain's (a
token is drawn from the unconstrained distribution first), as in llama.cpp.

:func:`feed` has ``llm`` evaluate a prompt, reusing the longest prefix its KV
cache already holds (the system turn, the prompt of the call before), so only
the new tokens are prefilled.

Everything here runs on the inference thread, under :class:`~overt.models.local.LocalModel`'s lock.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Generator, Sequence
from typing import Any


def feed(llm: Any, tokens: Sequence[int]) -> int:
    """Make ``llm``'s context hold exactly ``tokens``, with the logits of the last one.

    Evaluates only the tokens past the longest prefix already held (at least
    the last token, whose logits the next pick reads). Returns how many tokens
    were evaluated.
    """
    import numpy as np

    if not tokens:
        raise ValueError("nothing to evaluate")
    limit = min(int(llm.n_tokens), len(tokens) - 1)
    held = np.asarray(llm.input_ids[:limit])
    wanted = np.asarray(tokens[:limit], dtype=held.dtype)
    differ = np.flatnonzero(held != wanted)
    shared = int(differ[0]) if len(differ) else limit
    llm.n_tokens = shared  # eval drops the KV cells past n_tokens first
    llm.eval(list(tokens[shared:]))
    return len(tokens) - shared


def sample_tokens(llm: Any, tokens: Sequence[int], *, grammar: Any = None,
                  temperature: float = 0.0, top_k: int = 40, top_p: float = 0.95,
                  repeat_penalty: float = 1.0,
                  seed: int = 0) -> Generator[int, None, None]:
    """The tokens ``llm`` generates after ``tokens``, one at a time, for as long as the
    caller reads: each token read is evaluated before the next is picked (so when
    the caller stops, the context holds ``tokens`` and every token read but the last).
    """
    feed(llm, tokens)
    picker = TokenPicker(llm, grammar=grammar, temperature=temperature, top_k=top_k,
                         top_p=top_p, repeat_penalty=repeat_penalty, seed=seed)
    try:
        while True:
            token = picker.pick()
            yield token
            llm.eval([token])
    finally:
        picker.close()


class TokenPicker:
    """The sampler of one reply step: penalties, an optional grammar, then greedy
    (``temperature`` 0) or top-k, typical, top-p, min-p and temperature.

    Call :meth:`pick` after each evaluation; it returns the token and records it
    (penalty history, grammar state). :meth:`close` frees the llama.cpp samplers.
    """

    def __init__(self, llm: Any, *, grammar: Any = None, temperature: float = 0.0,
                 top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05,
                 repeat_penalty: float = 1.0, seed: int = 0) -> None:
        import llama_cpp
        import numpy as np

        self._c = llama_cpp
        self._llm = llm
        self._n_vocab = int(llm.n_vocab())
        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        self._chain: Any = chain
        add = llama_cpp.llama_sampler_chain_add
        add(chain, llama_cpp.llama_sampler_init_penalties(
            self._n_vocab, int(llm.last_n_tokens_size), repeat_penalty, 0.0, 0.0))
        if temperature <= 0.0:
            add(chain, llama_cpp.llama_sampler_init_greedy())
        else:
            add(chain, llama_cpp.llama_sampler_init_top_k(top_k))
            add(chain, llama_cpp.llama_sampler_init_typical(1.0, 1))
            add(chain, llama_cpp.llama_sampler_init_top_p(top_p, 1))
            add(chain, llama_cpp.llama_sampler_init_min_p(min_p, 1))
            add(chain, llama_cpp.llama_sampler_init_temp(temperature))
            add(chain, llama_cpp.llama_sampler_init_dist(seed))
        self._grammar: Any = None
        if grammar is not None:
            vocab = llama_cpp.llama_model_get_vocab(llm.model)
            self._grammar = llama_cpp.llama_sampler_init_grammar(
                vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8"))
            if not self._grammar:
                self.close()
                raise ValueError("llama.cpp refused the grammar")
        item = llama_cpp.llama_token_data
        self._items = np.zeros(self._n_vocab, dtype=np.dtype(
            [("id", np.int32), ("logit", np.float32), ("p", np.float32)], align=True))
        if self._items.itemsize != ctypes.sizeof(item):
            self.close()
            raise ValueError("llama_token_data has a layout this code does not know")
        self._ids = np.arange(self._n_vocab, dtype=np.int32)
        self._all = llama_cpp.llama_token_data_array(
            self._items.ctypes.data_as(llama_cpp.llama_token_data_p), self._n_vocab, -1, False)
        self._one = (item * 1)()
        self._single = llama_cpp.llama_token_data_array(self._one, 1, -1, False)

    def pick(self) -> int:
        """The next token, from the logits of the last token evaluated."""
        import numpy as np

        c = self._c
        logits = np.ctypeslib.as_array(c.llama_get_logits_ith(self._llm.ctx, -1),
                                       shape=(self._n_vocab,))
        token = self._apply(logits, grammar_first=False)
        if self._grammar is not None and not self._allowed(token):
            token = self._apply(logits, grammar_first=True)
        c.llama_sampler_accept(self._chain, token)
        if self._grammar is not None:
            c.llama_sampler_accept(self._grammar, token)
        return token

    def _apply(self, logits: Any, *, grammar_first: bool) -> int:
        c = self._c
        self._items["id"] = self._ids
        self._items["logit"] = logits
        self._items["p"] = 0.0
        self._all.size = self._n_vocab
        self._all.selected = -1
        self._all.sorted = False
        if grammar_first:
            c.llama_sampler_apply(self._grammar, ctypes.byref(self._all))
        c.llama_sampler_apply(self._chain, ctypes.byref(self._all))
        if not 0 <= self._all.selected < self._all.size:
            raise RuntimeError("llama.cpp's sampler selected no token")
        return int(self._items["id"][self._all.selected])

    def _allowed(self, token: int) -> bool:
        """Whether the grammar, in its present state, accepts ``token`` next."""
        self._one[0] = self._c.llama_token_data(token, 0.0, 0.0)
        self._single.size = 1
        self._single.selected = -1
        self._single.sorted = False
        self._c.llama_sampler_apply(self._grammar, ctypes.byref(self._single))
        return math.isfinite(self._one[0].logit)

    def close(self) -> None:
        """Free the llama.cpp samplers (idempotent)."""
        if self._chain is not None:
            self._c.llama_sampler_free(self._chain)
            self._chain = None
        if self._grammar is not None:
            self._c.llama_sampler_free(self._grammar)
            self._grammar = None
