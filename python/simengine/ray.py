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

import inspect
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
from .run import run as _run

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
        # Progress is best effort: a lost queue never fails the shard.
        try:
            queue.put_nowait((index, tick, stage, done, total))
        except Exception:  # noqa: BLE001
            pass

    # One engine thread per CPU Ray gave the task, unless told otherwise.
    context: Any = ray.get_runtime_context()
    cpus = int(context.get_assigned_resources().get("CPU", 1))
    run_args = {"threads": max(1, cpus), **run_args}
    r = simengine.run(shard=(index, count), out=directory, progress=forward if queue is not None else False, **run_args)
    return r.digest


def _absolute(run_args: dict[str, Any]) -> dict[str, Any]:
    """The arguments with their files' paths made absolute, as the caller
    sees them: a worker may run in another directory."""
    out = dict(run_args)
    for key in ("config", "calibration", "scenario", "panel", "panel_map"):
        value = out.get(key)
        if isinstance(value, (str, os.PathLike)) and Path(value).exists():
            out[key] = str(Path(value).resolve())
    return out


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

    Each shard's engine runs on as many threads as Ray gave its task CPUs
    (one by default), unless ``threads`` says otherwise. Paths among
    ``run_args`` are made absolute first, as workers may run elsewhere.

    ``ray.init()`` is called (with Ray's defaults: a local instance, or
    the cluster ``RAY_ADDRESS`` names) only when the caller has not, and
    ``ray.shutdown()`` before this returns. If this stops early, the
    shards still running are cancelled.
    """
    if isinstance(n_shards, bool) or not isinstance(n_shards, int) or n_shards < 1:
        raise ConfigError(f"n_shards: expected a whole number of at least 1, not {n_shards!r}")
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ConfigError(f"max_retries: expected a whole number of at least 0, not {max_retries!r}")
    own = [k for k in _OWN if k in run_args]
    if own:
        raise ConfigError(f"run_sharded decides {', '.join(own)} itself: leave it out")
    known = set(inspect.signature(_run).parameters) - set(_OWN)
    unknown = sorted(set(run_args) - known)
    if unknown:
        raise ConfigError(f"run_sharded: {', '.join(unknown)} is not an argument of simengine.run")
    ticks = run_args.get("ticks", 3)
    if isinstance(ticks, bool) or not isinstance(ticks, int) or ticks < 1:
        raise ConfigError(f"ticks: expected a whole number of at least 1, not {ticks!r}")
    personas = run_args.get("personas")
    if isinstance(personas, int) and not isinstance(personas, bool) and personas < n_shards:
        raise ConfigError(f"{n_shards} shards for {personas} personas: every shard needs at least one persona")
    if not (progress is True or progress is False or callable(progress)):
        raise ConfigError(f"progress: expected True, False or a callable, not {type(progress).__name__}")
    run_args = _absolute(run_args)
    root = Path(out).resolve()
    root.mkdir(parents=True, exist_ok=True)
    directories = [shard_directory(root, i, n_shards) for i in range(n_shards)]
    started = False
    queue: Any = None
    bar: _Bar | None = None
    pending: dict[Any, int] = {}
    finished = False
    ticks_done = [0] * n_shards
    try:
        started = not ray.is_initialized()
        if started:
            ray.init(include_dashboard=False, log_to_driver=False)
        bar = _Bar(n_shards * ticks, "tick") if progress is True else None
        queue = Queue() if progress is not False else None
        task = _run_shard.options(max_retries=max_retries, retry_exceptions=False)
        pending = {task.remote(i, n_shards, str(d), run_args, queue): i for i, d in enumerate(directories)}
        failed: list[tuple[int, BaseException]] = []

        def drain() -> None:
            nonlocal queue
            if queue is None:
                return
            try:
                waiting = queue.qsize()
                items = queue.get_nowait_batch(waiting) if waiting else []
            except Exception:  # noqa: BLE001 - progress is best effort; the run goes on
                queue = None
                return
            for shard, tick, stage, done, total in items:
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
            others = f" (and shards {', '.join(str(i) for i, _ in failed[1:])})" if len(failed) > 1 else ""
            raise ShardError(
                f"shard {index} of {n_shards} failed{others} after up to {max_retries} retries of a dead worker "
                f"({directories[index]}): {cause}",
                shard=index,
                directory=str(directories[index]),
            ) from error
        finished = True
        # A finished merge run again does nothing: a rerun is safe.
        return merge(directories, root / "merged")
    finally:
        # Stopped early (an error, Ctrl-C): no shard goes on writing.
        for ref in pending:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - best effort on the way out
                pass
        if bar is not None:
            bar.close(n_shards * ticks if finished else None)
        if queue is not None:
            try:
                queue.shutdown()
            except Exception:  # noqa: BLE001
                pass
        if started:
            ray.shutdown()
