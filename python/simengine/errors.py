"""The package's exceptions.

Every error of the engine is raised as one of these, carrying the engine's
message unchanged; a panic in the engine becomes a ``SimEngineError``, never
a crash of the interpreter. Where the engine's error is structured, its
fields are attributes (``PanelError.row``, ``Interrupted.run_dir``).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "SimEngineError",
    "ConfigError",
    "ScenarioError",
    "PanelError",
    "ProviderError",
    "BudgetError",
    "Interrupted",
    "ShardError",
]


class SimEngineError(Exception):
    """Any error of the engine: a file it cannot read, a trace it refuses, a
    replay that diverged, and the base of every exception below."""


class ConfigError(SimEngineError):
    """A configuration file or value, or an argument, is refused."""


class ScenarioError(SimEngineError):
    """A scenario (a built-in name or a scenario file) is refused."""


class PanelError(SimEngineError):
    """A panel (a DataFrame or a CSV file), its map, or survey data is refused.

    ``file`` names the input (``"<panel DataFrame>"`` or ``"<answers
    DataFrame>"`` for a frame), ``row`` the
    row's id (or its line when the id is missing) and ``column`` the column,
    where the engine says them; otherwise they are ``None``.
    """

    file: str | None = None
    row: str | None = None
    column: str | None = None


class ProviderError(SimEngineError):
    """A chat or embedding provider failed (after its retries)."""


class BudgetError(SimEngineError):
    """Spend was refused: a live model not confirmed for its cost
    (``confirm_live=True``), or a budget that is not a positive amount."""


class Interrupted(SimEngineError):
    """The run stopped at a tick boundary (Ctrl-C, or the circuit breaker after
    permanent provider errors). Everything committed is kept:
    ``simengine.run(resume=e.run_dir)`` or ``sim-cli run --resume DIR``
    continues it to the digest of an uninterrupted run.
    """

    run_dir: str | None = None
    after_tick: int | None = None
    reason: str | None = None


class ShardError(SimEngineError):
    """A shard of ``simengine.ray.run_sharded`` failed past its retries.

    ``shard`` is its index (from 0) and ``directory`` its run directory,
    where its committed ticks stay; every other shard's work stays on disk
    too, and the same call again redoes only what is missing.
    """

    def __init__(self, message: str, shard: int, directory: str) -> None:
        super().__init__(message)
        self.shard = shard
        self.directory = directory

    def __reduce__(self) -> tuple[Any, tuple[str, int, str]]:
        return (type(self), (str(self), self.shard, self.directory))
