"""A panel's shards as Ray tasks: ``run_sharded``. An optional extra
(``pip install ".[ray]"``), imported on its own: ``import simengine.ray``.

Each shard is ``simengine.run(shard=(i, n), ...)`` in a Ray task, in its own
run directory under ``out``; when all are done they are merged, as ``sim-cli
merge`` merges them, to the unsharded run's digest. A shard whose worker
dies is run again (``max_retries``); the retry resumes the shard from its
last committed tick, and its chat log means it pays for nothing it had
committed. The same works on a Ray cluster of any size, given storage that
every node sees for ``out``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Union

import ray
from ray.util.queue import Queue

from .errors import ConfigError, ShardError
from .inputs import PathLike
from .progress import _Bar
from .run import Run, merge

__all__ = ["run_sharded", "ShardProgress"]

ShardProgress = Union[bool, Callable[[int, int, str, int, int], Any]]
"""True (a bar over the shards' ticks), False, or a callable ``(shard, tick,
stage, done, total)``, called on the caller's thread."""

# What run_sharded decides itself, so not passed through to simengine.run.
_OWN = ("shard", "out", "resume", "progress")


def shard_directory(out: PathLike, index: int, count: int) -> Path:
    """Shard ``index`` of ``count``'s run directory under ``out``."""
    return Path(out) / f"shard-{index:04}-of-{count:04}"


@ray.remote
def _run_shard(index: int, count: int, directory: str, run_args: dict[str, Any], queue: Any) -> str:
    """One shard, in a Ray worker: its worker's process id is written beside
    its directory (``workers/``), then it runs (or resumes) the shard."""
    import simengine

    workers = Path(directory).parent / "workers"
    workers.mkdir(parents=True, exist_ok=True)
    record = {"shard": index, "pid": os.getpid(), "node": ray.get_runtime_context().get_node_id()}
    (workers / f"shard-{index:04}.json").write_text(json.dumps(record))

    def forward(tick: int, stage: str, done: int, total: int) -> None:
        queue.put_nowait((index, tick, stage, done, total))

    r = simengine.run(shard=(index, count), out=directory, progress=forward if queue is not None else False, **run_args)
    return r.digest


def run_sharded(
    n_shards: int,
    *,
    out: PathLike,
    max_retries: int = 3,
    progress: ShardProgress = True,
    **run_args: Any,
) -> Run:
    """Runs a panel as ``n_shards`` Ray tasks and returns the merged ``Run``
    (in ``out/merged``), whose digest is the unsharded run's.

    ``run_args`` are ``simengine.run``'s (``personas``, ``ticks``, ``seed``,
    ``config``, ``scenario``, ...) but for ``shard``, ``out``, ``resume`` and
    ``progress``, which this decides. ``out`` is on storage every node sees;
    shard ``i`` runs in ``out/shard-000i-of-000n``. A shard whose worker
    dies is retried up to ``max_retries`` times, resuming from its last
    committed tick. A shard that fails past them raises ``ShardError`` (its
    ``shard`` and ``directory``) once the others are done; everything
    committed stays, and the same call again redoes only what is missing.

    Ray is started (on this machine) only when the caller has not, and then
    shut down before this returns.
    """
    if isinstance(n_shards, bool) or not isinstance(n_shards, int) or n_shards < 1:
        raise ConfigError(f"n_shards: expected a whole number of at least 1, not {n_shards!r}")
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ConfigError(f"max_retries: expected a whole number of at least 0, not {max_retries!r}")
    own = [k for k in _OWN if k in run_args]
    if own:
        raise ConfigError(f"run_sharded decides {', '.join(own)} itself: leave it out")
    if not (progress is True or progress is False or callable(progress)):
        raise ConfigError(f"progress: expected True, False or a callable, not {type(progress).__name__}")
    root = Path(out).resolve()
    root.mkdir(parents=True, exist_ok=True)
    directories = [shard_directory(root, i, n_shards) for i in range(n_shards)]
    started = not ray.is_initialized()
    if started:
        ray.init(include_dashboard=False, log_to_driver=False)
    queue: Any = None
    bar = _Bar(n_shards * int(run_args.get("ticks", 3)), "tick") if progress is True else None
    ticks_done = [0] * n_shards
    try:
        queue = Queue() if progress is not False else None
        task = _run_shard.options(max_retries=max_retries, retry_exceptions=False)
        pending = {
            task.remote(i, n_shards, str(d), run_args, queue): i for i, d in enumerate(directories)
        }
        failed: list[tuple[int, BaseException]] = []

        def drain() -> None:
            while queue is not None and not queue.empty():
                shard, tick, stage, done, total = queue.get_nowait()
                if bar is not None:
                    ticks_done[shard] = max(ticks_done[shard], tick - 1)
                    bar(sum(ticks_done) + 1, f"shard {shard}, {stage}", done, total)
                elif callable(progress):
                    progress(shard, tick, stage, done, total)

        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.25)
            drain()
            for ref in ready:
                index = pending.pop(ref)
                try:
                    ray.get(ref)
                except ray.exceptions.RayError as e:
                    failed.append((index, e))
        drain()
        if failed:
            index, error = failed[0]
            cause = getattr(error, "cause", None) or error
            raise ShardError(
                f"shard {index} of {n_shards} failed after up to {max_retries} retries ({directories[index]}): {cause}",
                shard=index,
                directory=str(directories[index]),
            ) from error
        # A finished merge run again does nothing: a rerun is safe.
        return merge(directories, root / "merged")
    finally:
        if bar is not None:
            bar.close(None)
        if queue is not None:
            queue.shutdown()
        if started:
            ray.shutdown()
