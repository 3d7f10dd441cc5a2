"""Progress of a run, a validation or the field's simulation: a tqdm.auto
bar, silence, or the caller's callable."""

from __future__ import annotations

from typing import Any, Callable, Union

from .errors import ConfigError

__all__ = ["Progress"]

Progress = Union[bool, Callable[[int, str, int, int], Any]]


class _Bar:
    """Progress on a tqdm.auto bar over the run's ticks (or the field's
    phases), when tqdm is installed."""

    def __init__(self, ticks: int, unit: str = "tick") -> None:
        self.unit = unit
        try:
            from tqdm.auto import tqdm
        except ImportError:
            self.bar = None
            return
        self.bar = tqdm(total=ticks or None, unit=unit, desc="simengine")
        self.tick = 0

    def __call__(self, tick: int, stage: str, done: int, total: int) -> None:
        if self.bar is None:
            return
        if tick - 1 > self.tick:
            self.bar.update(tick - 1 - self.tick)
            self.tick = tick - 1
        self.bar.set_postfix_str(f"{self.unit} {tick}: {stage} {done}/{total}", refresh=False)
        self.bar.refresh()

    def close(self, ticks_done: int | None) -> None:
        if self.bar is None:
            return
        if ticks_done is not None and ticks_done > self.tick:
            self.bar.update(ticks_done - self.tick)
        self.bar.close()


def _progress(
    progress: Progress, ticks: int, unit: str = "tick"
) -> tuple[_Bar | None, Callable[[int, str, int, int], Any] | None]:
    """The bar (for ``progress=True``) and the callable the engine's progress goes to."""
    if progress is True:
        bar = _Bar(ticks, unit)
        return bar, bar
    if progress is False or progress is None:
        return None, None
    if callable(progress):
        return None, progress
    raise ConfigError(f"progress: expected True, False or a callable, not {type(progress).__name__}")
