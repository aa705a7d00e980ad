"""Match a free-text output to the nearest choice by embedding cosine similarity (MMAU-Pro's
closed-question rule), through sentence-transformers (the `embed` extra) and a model of the
user's choosing: a hub name (read from the local hub cache when offline) or a folder.

Where the library or the model is not available the caller gets EmbedderUnavailable and the
figure stays absent: no other matcher stands in for it."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from cafe.errors import CafeError


class EmbedderUnavailable(CafeError):
    """The embedding library or model cannot be loaded here."""

    def __str__(self) -> str:  # what it means for the figure, wherever it is printed
        return f"{super().__str__()}: the embedding path's figure stays absent"


@lru_cache(maxsize=2)
def load_embedder(name: str) -> Any:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as e:
        raise EmbedderUnavailable(
            f"embedding model {name}: sentence-transformers is not installed "
            f"(pip install 'cafe-audio-eval[embed]') ({e})"
        ) from None
    try:
        # NV-Embed-v2 (MMAU-Pro's official embedder) ships its own model code
        return SentenceTransformer(name, device="cpu", trust_remote_code=True)
    except Exception as e:  # offline without a cached copy, a broken folder, missing code
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise EmbedderUnavailable(f"embedding model {name} cannot be loaded ({first})") from None


def nearest_choices(name: str, items: Sequence[tuple[str, Sequence[str]]]) -> list[str]:
    """For each (output, choices): the choice whose embedding is most similar (cosine) to the
    output's; ties go to the first choice, as argmax does."""
    if not items:
        return []
    import numpy as np

    model = load_embedder(name)
    texts = sorted({t for out, choices in items for t in (out, *choices)})
    index = {t: i for i, t in enumerate(texts)}
    vectors = np.asarray(model.encode(texts, normalize_embeddings=True, batch_size=64))
    picks = []
    for out, choices in items:
        sims = vectors[[index[c] for c in choices]] @ vectors[index[out]]
        picks.append(choices[int(np.argmax(sims))])
    return picks
