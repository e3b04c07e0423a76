"""The token picker with real weights: greedy decoding, with a grammar checked lazily, picks
exactly the tokens llama-cpp-python's own sampler chain (grammar on every token) picks."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from overt.models import llama_sampling
from overt.models.assets import DEFAULT_ASSET, asset_path, is_prepared
from overt.models.qwen_chat import call_schema
from overt.tools.builtin import builtin_tools
from tests import needs

needs.module("llama_cpp", reason="llama_cpp is not installed: pip install 'overt[local]'")

pytestmark = pytest.mark.real_model

TOOLS = tuple(t.spec for t in builtin_tools())
PROMPT = ("<|im_start|>user\nHow much did I spend over the last 7 days? Call get_usage."
          "<|im_end|>\n<|im_start|>assistant\n<tool_call>\n")
HAIKU = "<|im_start|>user\nWrite a haiku about rain.<|im_end|>\n<|im_start|>assistant\n"
N = 40


def _weights() -> Path:
    cache_dir = os.environ.get("OVERT_CACHE_DIR") or None
    if not is_prepared(DEFAULT_ASSET, cache_dir):
        needs.missing("the embedded model is not prepared: overt model prepare local")
    return asset_path(DEFAULT_ASSET, cache_dir)


@pytest.fixture(scope="module")
def llm() -> Any:
    import llama_cpp

    return llama_cpp.Llama(model_path=str(_weights()), n_ctx=512, verbose=False)


def _theirs(llm: Any, prompt: list[int], grammar: Any) -> list[int]:
    llm.reset()
    out: list[int] = []
    for token in llm.generate(prompt, temp=0.0, top_k=20, top_p=0.8, repeat_penalty=1.05,
                              grammar=grammar):
        if token == llm.token_eos() or len(out) == N:
            break
        out.append(token)
    return out


def _ours(llm: Any, prompt: list[int], grammar: Any) -> list[int]:
    llm.reset()
    out: list[int] = []
    sampled = llama_sampling.sample_tokens(llm, prompt, grammar=grammar, repeat_penalty=1.05)
    for token in sampled:
        if token == llm.token_eos() or len(out) == N:
            break
        out.append(token)
    sampled.close()
    return out


@pytest.mark.parametrize(("text", "constrained"), [
    (PROMPT, True), (PROMPT, False),
    (HAIKU, True),  # the grammar refuses what the model would write: the slow path
], ids=["call-grammar", "call-free", "haiku-grammar"])
def test_the_picker_decodes_as_llama_cpp_python_does(llm: Any, text: str,
                                                     constrained: bool) -> None:
    from llama_cpp.llama_grammar import LlamaGrammar

    grammar = (LlamaGrammar.from_json_schema(json.dumps(call_schema(TOOLS)), verbose=False)
               if constrained else None)
    prompt = llm.tokenize(text.encode(), add_bos=False, special=True)
    ours = _ours(llm, prompt, grammar)
    assert ours == _theirs(llm, prompt, grammar)
    assert len(ours) > 5
    if constrained:
        call = json.loads(llm.detokenize(ours).decode())
        assert call["name"] in {t.name for t in TOOLS}


def test_feed_prefills_only_what_the_context_does_not_hold(llm: Any) -> None:
    prompt = llm.tokenize(PROMPT.encode(), add_bos=False, special=True)
    llm.reset()
    assert llama_sampling.feed(llm, prompt) == len(prompt)
    assert llama_sampling.feed(llm, [*prompt, *prompt[:3]]) == 3
    assert llama_sampling.feed(llm, prompt[:-2]) == 1  # the last token again, for its logits
    assert llm.n_tokens == len(prompt) - 2
