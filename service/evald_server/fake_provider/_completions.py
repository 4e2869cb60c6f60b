"""The fake's ``/v1/completions``: echo with exact, known log-probabilities.

The fake's tokenizer splits a text into words with the spaces before them
(``"Answer: A"`` → ``"Answer:"``, ``" A"``); ``Vocabulary`` numbers the tokens it has
seen, for the vLLM-style tokenizer API (``/tokenize``, ``/detokenize``,
``/tokenizer_info``) that lm-evaluation-harness' ``local-completions`` uses as its
remote tokenizer, so that both tools see the same tokens.

A token's log-probability is ``EchoLogprobFn(prefix, token)``: the text before it and
the token. The default, ``hashed_logprob``, is a fixed function of both (a test can
compute every number it serves); a test may pass a table instead. With ``echo`` and
``max_tokens`` 1 the fake generates one token, ``"."``, after the prompt; without echo
(a plain prompt) it generates the answer the chat endpoint would give.

``EchoMode.LLAMA_CPP`` reproduces llama-cpp-python 0.3.36's echo as measured against
its server: the generated token's text is in ``text`` but not in ``tokens`` (nor its
log-probability or offset), and the number listed beside each prompt token is read one
position late: ``log P(token_i | tokens up to and including token_i)``.
"""

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any

_TOKEN = re.compile(r"\s*\S+|\s+")
GENERATED = "."  # what the fake generates after an echoed prompt (max_tokens >= 1)

EchoLogprobFn = Callable[[str, str], float]


class EchoMode(StrEnum):
    CONSISTENT = "consistent"  # what vLLM and OpenAI's legacy completions send
    LLAMA_CPP = "llama_cpp"  # llama-cpp-python 0.3.36: shifted by one, final token left out


def tokenize(text: str) -> list[str]:
    """The fake's tokens of ``text``; they join back to it exactly."""
    return _TOKEN.findall(text)


def hashed_logprob(prefix: str, token: str) -> float:
    """A fixed log-probability in [-5, -0.5] for ``token`` after ``prefix``."""
    digest = hashlib.sha256(f"{prefix}\x00{token}".encode()).digest()
    return -0.5 - int.from_bytes(digest[:4], "big") % 4501 / 1000.0


class Vocabulary:
    """Token ids, numbered in order of first sight (0 is the end-of-text token)."""

    EOS = "<|endoftext|>"

    def __init__(self) -> None:
        self._ids: dict[str, int] = {self.EOS: 0}
        self._tokens: list[str] = [self.EOS]

    def encode(self, text: str) -> list[int]:
        ids = []
        for token in tokenize(text):
            if token not in self._ids:
                self._ids[token] = len(self._tokens)
                self._tokens.append(token)
            ids.append(self._ids[token])
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self._tokens[i] for i in ids if 0 < i < len(self._tokens))

    def info(self) -> dict[str, Any]:
        return {"eos_token": self.EOS, "eos_token_id": 0, "bos_token": None, "pad_token": None}


def prompts_of(prompt: object, vocabulary: Vocabulary) -> list[str]:
    """The texts of a ``prompt`` field: a string, strings, token ids or lists of them."""
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt and all(isinstance(p, int) for p in prompt):
        return [vocabulary.decode(prompt)]
    if isinstance(prompt, list) and prompt:
        texts = []
        for item in prompt:
            if isinstance(item, str):
                texts.append(item)
            elif isinstance(item, list) and all(isinstance(p, int) for p in item):
                texts.append(vocabulary.decode(item))
            else:
                raise ValueError("prompt: strings or lists of token ids")
        return texts
    raise ValueError("prompt: required string, list of strings or token ids")


def completion_choice(
    index: int,
    prompt: str,
    *,
    echo: bool,
    max_tokens: int,
    logprob: EchoLogprobFn,
    mode: EchoMode,
    answer: str = GENERATED,
    finish_reason: str = "length",
) -> tuple[dict[str, Any], int, int]:
    """One ``choices[]`` entry, and its prompt and completion token counts: ``answer``
    is what was generated (already cut to ``max_tokens``; nothing for 0)."""
    prompt_tokens = tokenize(prompt)
    generated = tokenize(answer) if max_tokens != 0 else []
    listed = [*prompt_tokens, *generated] if echo else generated
    text = ("".join(prompt_tokens) if echo else "") + "".join(generated)
    tokens, numbers, offsets, tops = [], [], [], []
    position, prefix = 0, "" if echo else prompt
    for i, token in enumerate(listed):
        tokens.append(token)
        offsets.append(position)
        if mode is EchoMode.LLAMA_CPP:
            value = logprob(prefix + token, token) if i else None
        else:
            value = logprob(prefix, token) if (i or not echo) else None
        numbers.append(value)
        tops.append(None if value is None else {token: value})
        position += len(token)
        prefix += token
    # llama-cpp-python lists the prompt's tokens only, the generated one left out.
    kept = len(prompt_tokens) if mode is EchoMode.LLAMA_CPP and echo else len(tokens)
    block = {
        "tokens": tokens[:kept],
        "token_logprobs": numbers[:kept],
        "text_offset": offsets[:kept],
        "top_logprobs": tops[:kept],
    }
    choice = {"text": text, "index": index, "logprobs": block, "finish_reason": finish_reason}
    return choice, len(prompt_tokens), len(generated)


def completions_body(
    seq: int, model: str, choices: list[dict[str, Any]], prompt_tokens: int, completion_tokens: int
) -> bytes:
    return json.dumps(
        {
            "id": f"cmpl-fake-{seq}",
            "object": "text_completion",
            "created": 0,
            "model": model,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    ).encode()
