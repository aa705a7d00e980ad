"""`python -m llama_cpp.server` as `cafe serve` runs it, plus the route cafe probes for token
counts: ``POST /tokenize`` (vLLM's ``prompt`` or llama.cpp's ``content`` -> ``count`` and
``tokens``, no BOS, no special tokens), so a cafe-served model counts reasoning lengths in its
own tokens instead of a 404 and a warning (llama-cpp-python has only ``/extras/tokenize``,
which adds the BOS). Everything else is llama-cpp-python's own server, its arguments included."""

# no `from __future__ import annotations`: FastAPI reads the route's annotations as types
from typing import Any


def add_tokenize_route() -> None:
    """Add ``POST /tokenize`` to llama-cpp-python's router (before its app is made from it)."""
    from fastapi import Depends, Request
    from llama_cpp.server import app as server_app

    async def tokenize(
        request: Request, llama_proxy: Any = Depends(server_app.get_llama_proxy)
    ) -> dict[str, Any]:
        body = await request.json()
        text = body.get("prompt", body.get("content", ""))
        llama = llama_proxy(body.get("model"))
        tokens = llama.tokenize(str(text).encode("utf-8"), add_bos=False, special=False)
        return {"count": len(tokens), "tokens": tokens}

    server_app.router.add_api_route(
        "/tokenize", tokenize, methods=["POST"],
        dependencies=[Depends(server_app.authenticate)],
    )  # fmt: skip


def main() -> None:
    from llama_cpp.server.__main__ import main as serve

    add_tokenize_route()
    serve()


if __name__ == "__main__":
    main()
