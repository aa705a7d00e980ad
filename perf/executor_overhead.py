"""The one executor's own cost per item (cafe.execution.execute), calls doing nothing:

- async: N no-op async calls, at most 32 in flight (every step's and judge's path);
- threads: N items in batches of 8 on 4 threads, a no-op synchronous call (`cafe run`'s path).

Prints microseconds per item, the best of five rounds. Run it in two checkouts to compare
(an older one has no ``threads`` and prints the async figure only):

    PYTHONPATH=. python perf/executor_overhead.py [--n 20000]"""

from __future__ import annotations

import asyncio
import inspect
import time

import click

from cafe.execution import execute


class _Discard:
    def write_many(self, records: object) -> None:
        pass


async def _noop(i: int) -> int:
    await asyncio.sleep(0)
    return i


def _best(run: object, n: int) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        run()  # type: ignore[operator]
        best = min(best, time.perf_counter() - t0)
    return best / n * 1e6


@click.command()
@click.option("--n", default=20_000, show_default=True, help="Items per round.")
def main(n: int) -> None:
    items = list(range(n))

    def run_async() -> None:
        asyncio.run(execute(items, _noop, lambda i, why: None, _Discard(), concurrency=32,
                            desc="async", progress=False))  # fmt: skip

    print(f"executor, async calls (c32):          {_best(run_async, n):6.1f} us/item")
    if "threads" not in inspect.signature(execute).parameters:
        return

    def run_threads() -> None:
        asyncio.run(execute(items, list, lambda i, why: None, _Discard(), concurrency=4,
                            batch_size=8, threads=True, desc="t", progress=False))  # fmt: skip

    print(f"executor, batches of 8 on 4 threads: {_best(run_threads, n):6.1f} us/item")


if __name__ == "__main__":
    main()
