"""The package's tables: pandas, imported when a table is first wanted, and
tables written to Parquet (``Run.to_parquet``, ``Validation.to_parquet``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas

    from .inputs import PathLike


def _pandas() -> Any:
    try:
        import pandas
    except ImportError as e:  # pragma: no cover - pandas is a dependency
        raise ImportError("simengine's tables are pandas DataFrames: pip install pandas") from e
    return pandas


def _write_parquet(directory: PathLike, frames: dict[str, "pandas.DataFrame"], what: str) -> list[Path]:
    """Writes each frame to ``directory/NAME.parquet``; returns the paths."""
    try:
        import pyarrow  # noqa: F401
    except ImportError as e:
        raise ImportError(f"{what} needs pyarrow: pip install pyarrow") from e
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, frame in frames.items():
        path = out / f"{name}.parquet"
        frame.to_parquet(path, index=False)
        written.append(path)
    return written
