"""The chance baseline: picks one of the request's choices with a generator seeded from the
request (seed, sample id, run index), so a run is reproducible and its accuracy sits near
1 / number of choices. It reads choices from the prompt exactly as the reference adapter does
(through the prompt style's template when the request was rendered from it).

Option ``letters: true`` answers with the option's letter, "(B)", instead of its text: the bare
letter the official rule scores wrong (SPEC §9) and the lenient mapping scores right."""

from __future__ import annotations

import hashlib
import random

from cafe.adapters.base import Adapter
from cafe.adapters.reference import request_choices
from cafe.records import Completion, Request


def pick(request: Request, choices: list[str]) -> str:
    key = f"{request.seed}:{request.sample_id}:{request.run_index}".encode()
    rng = random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))
    return rng.choice(choices)


class RandomAdapter(Adapter):
    """Seeded uniform guess among the choices, written as ``<answer>CHOICE</answer>``."""

    default_batch_size = 64
    reads_audio = False  # a guess on the metadata alone: runs where the clips are missing

    def generate(self, requests: list[Request]) -> list[Completion]:
        out = []
        for req in requests:
            _, choices = request_choices(req)
            if not choices:
                out.append(
                    Completion(req.sample_id, req.run_index, None, error="prompt has no choices")
                )
                continue
            choice = pick(req, choices)
            if self.options.get("letters"):
                choice = f"({chr(ord('A') + choices.index(choice))})"
            text = f"<answer>{choice}</answer>"
            out.append(
                Completion(
                    req.sample_id,
                    req.run_index,
                    text,
                    output_tokens=self.count_tokens(text),
                    backend={"engine": "cpu", "model": "random"},
                )
            )
        return out
