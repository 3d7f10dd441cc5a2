"""What a caller gives: paths, DataFrames and CSV files of panels and
answers, panel maps, counts; read and converted into what the engine takes,
and refused (``PanelError``, ``ConfigError``) with their names."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Union

from . import _native
from .errors import ConfigError, PanelError
from .tables import _pandas

__all__ = ["PathLike"]

PathLike = Union[str, "os.PathLike[str]"]


def _read(what: str, path: PathLike) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise PanelError(f"{what} {path}: cannot read it: {e}") from e


def _csv(what: str, data: Any) -> tuple[str, str]:
    """A DataFrame's CSV text (written in memory) or a CSV file's, and the
    name its errors use."""
    pd = _pandas()
    if isinstance(data, pd.DataFrame):
        frame = data.copy()
        for column in frame.columns:
            values = frame[column]
            present = values.dropna()
            # An integer column with a missing value is float in pandas; its
            # CSV must say 2, not 2.0, and leave the missing cell empty.
            if pd.api.types.is_float_dtype(values) and len(present) and (present == present.round()).all():
                frame[column] = values.astype("Int64")
        return frame.to_csv(index=False), f"<{what} DataFrame>"
    if isinstance(data, (str, os.PathLike)):
        return _read(what, data), str(data)
    raise PanelError(f"{what}: expected a pandas DataFrame or a CSV file's path, not {type(data).__name__}")


def _map(panel_map: Any) -> tuple[str, str]:
    """A panel map's TOML text (from a dict shaped like ``[panel.columns]``,
    or a file's), and the name its errors use."""
    if isinstance(panel_map, Mapping):
        return _native.panel_map_toml(json.dumps(dict(panel_map))), "<panel_map dict>"
    if isinstance(panel_map, (str, os.PathLike)):
        return _read("panel_map", panel_map), str(panel_map)
    raise PanelError(
        f"panel_map: expected a dict shaped like [panel.columns] or a panel-map file's path, not {type(panel_map).__name__}"
    )


def _panel(panel: Any, panel_map: Any) -> tuple[str, str, str, str] | None:
    if panel is None and panel_map is None:
        return None
    if panel is None or panel_map is None:
        raise PanelError("panel and panel_map go together: a panel needs its map, and a map its panel")
    csv, csv_name = _csv("panel", panel)
    map_text, map_name = _map(panel_map)
    return csv, csv_name, map_text, map_name


def _counts(**counts: tuple[int | None, int]) -> None:
    """Refuses a count that is not a whole number of at least its least
    value (``None`` is the default), as ``ConfigError``."""
    for name, (value, least) in counts.items():
        if value is not None and (not isinstance(value, int) or value < least):
            raise ConfigError(f"{name}: expected a whole number of at least {least}, not {value!r}")
