"""Type stubs of the native module (python/src/binding.rs)."""

from typing import Any, Callable

__all__ = ["ENGINE_VERSION", "HAS_AGENTS", "field_simulate", "memory_columns", "merge", "outcome_columns", "panel_map_toml", "replay", "report", "run", "summary_json", "validate"]

ENGINE_VERSION: str
HAS_AGENTS: bool

def run(
    *,
    scenario: str,
    personas: int | None,
    ticks: int,
    seed: int,
    config: str | None,
    out: str | None,
    panel: tuple[str, str, str, str] | None,
    resume: str | None,
    threads: int | None,
    budget_usd: float | None,
    answer_mode: str | None,
    calibration: str | None,
    confirm_live: bool,
    progress: Callable[[int, str, int, int], Any] | None,
    shard: tuple[int, int] | None = None,
    cache: bool = True,
    pilot: int = 3,
) -> tuple[str, str]: ...
def summary_json(dir: str) -> str: ...
def outcome_columns(dir: str) -> dict[str, list[Any]]: ...
def memory_columns(dir: str, persona: str | None = None, history: bool = False) -> tuple[dict[str, list[Any]], list[str]]: ...
def replay(dir: str) -> dict[str, Any]: ...
def report(dir: str, out: str | None = None) -> str: ...
def merge(shards: list[str], out: str) -> tuple[str, str]: ...
def panel_map_toml(columns: str) -> str: ...
def validate(
    *,
    suite: str,
    texts: list[tuple[str, str]] | None,
    subgroups: str | None,
    config: str | None,
    seed: int,
    sample: int | None,
    out: str | None,
    resamples: int,
    answer_mode: str | None,
    option_order: str | None,
    calibrate: bool,
    rectify: bool,
    given: list[str],
    weights: str | None,
    confirm_live: bool,
    progress: Callable[[int, str, int, int], Any] | None,
    cache: bool = True,
    configs: list[str] = ...,
    pilot: int = 3,
) -> tuple[str, str, str]: ...

# Only in a build with the agents workload (HAS_AGENTS; the `agents` feature).
def field_simulate(
    *,
    seed: int,
    agents: int,
    phases: int,
    ops: int,
    dim: int,
    topics: int,
    k: int,
    hours_per_phase: float,
    lambda_: float,
    permeability: float,
    out: str | None,
    threads: int | None,
    progress: Callable[[int, str, int, int], Any] | None,
) -> str: ...
