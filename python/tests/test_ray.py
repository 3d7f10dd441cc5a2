"""simengine.ray on a real local Ray cluster: a panel's shards as Ray tasks,
a worker killed mid-shard and retried, a shard that always fails."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

ray = pytest.importorskip("ray", reason="the optional extra: pip install \".[ray]\"")

import simengine  # noqa: E402
import simengine.ray  # noqa: E402

# Modelled chat calls of 150 ms, one at a time: a shard's tick takes about
# half a second, so a worker can be killed between its first and last.
SLOW = '[chat]\nprovider = "modelled"\nconcurrency = 1\n[chat.modelled]\nlatency_ms = 150\n'


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """A local Ray cluster sized for this machine: two CPUs (two worker
    processes), a small object store, no dashboard."""
    ray.init(num_cpus=2, object_store_memory=100 * 1024 * 1024, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def cli_digest(tmp_path: Path, *args: str) -> dict[str, Any]:
    cli = os.environ.get("SIM_CLI")
    assert cli, "SIM_CLI must name a sim-cli binary (bash .ci/test sets it)"
    done = subprocess.run([cli, "run", *args, "--out", str(tmp_path / "cli"), "--json"], check=True, capture_output=True, text=True)
    return dict(json.loads(done.stdout))


def committed_ticks(directory: Path) -> int:
    """Ticks committed in a shard's trace so far (0 while it has none)."""
    if not (directory / "trace.bin").exists():
        return 0
    try:
        return int(simengine.replay(directory)["ticks_recorded"])
    except simengine.SimEngineError:
        return 0


def test_ray_is_started_and_shut_down_only_when_the_caller_has_not(tmp_path: Path) -> None:
    assert not ray.is_initialized()
    merged = simengine.ray.run_sharded(2, out=tmp_path / "out", personas=4, ticks=1, progress=False)
    assert merged.summary["personas"] == 4
    assert not ray.is_initialized(), "no cluster is left behind"


def test_a_worker_killed_mid_shard_is_retried_and_the_merge_is_the_unsharded_run(tmp_path: Path, cluster: None) -> None:
    config = tmp_path / "slow.toml"
    config.write_text(SLOW)
    args: dict[str, Any] = {"personas": 8, "ticks": 4, "seed": 9, "config": str(config)}
    out = tmp_path / "out"
    seen: set[int] = set()
    result: dict[str, Any] = {}

    def sharded() -> None:
        try:
            result["run"] = simengine.ray.run_sharded(4, out=out, progress=lambda s, *_: seen.add(s), **args)
        except BaseException as e:  # noqa: BLE001 - reported by the test's thread below
            result["error"] = e

    thread = threading.Thread(target=sharded)
    thread.start()
    victim = simengine.ray.shard_directory(out, 1, 4)
    deadline = time.monotonic() + 90
    while committed_ticks(victim) < 1 and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.05)
    try:
        record = json.loads((out / "workers" / "shard-0001.json").read_text())
        at_kill = committed_ticks(victim)
        os.kill(record["pid"], signal.SIGKILL)
    finally:
        thread.join(timeout=120)
    assert not thread.is_alive(), "the sharded run did not finish in time"
    assert 1 <= at_kill < 4, f"shard 1 had {at_kill} of 4 ticks when its worker was killed: {result}"
    assert "error" not in result, result.get("error")
    merged: simengine.Run = result["run"]
    retried = json.loads((out / "workers" / "shard-0001.json").read_text())
    assert retried["pid"] != record["pid"], "shard 1 ran again in another worker"
    assert committed_ticks(victim) == 4
    whole = cli_digest(tmp_path, "--personas", "8", "--ticks", "4", "--seed", "9", "--config", str(config))
    assert merged.digest == whole["digest"]
    assert merged.path == (out / "merged")
    assert seen == {0, 1, 2, 3}, "every shard's progress reached the caller"


def test_a_shard_that_always_fails_raises_and_the_rerun_redoes_only_it(tmp_path: Path, cluster: None) -> None:
    out = tmp_path / "out"
    out.mkdir()
    blocked = simengine.ray.shard_directory(out, 2, 4)
    blocked.write_text("a file where shard 2's directory goes")
    args: dict[str, Any] = {"personas": 8, "ticks": 2, "seed": 4}
    with pytest.raises(simengine.ShardError) as failed:
        simengine.ray.run_sharded(4, out=out, max_retries=1, progress=False, **args)
    assert (failed.value.shard, failed.value.directory) == (2, str(blocked.resolve()))
    assert "shard 2 of 4" in str(failed.value)
    done = {i: simengine.ray.shard_directory(out, i, 4) / "summary.json" for i in (0, 1, 3)}
    assert all(p.exists() for p in done.values()), "the other shards' work is kept"
    before = {i: p.stat().st_mtime_ns for i, p in done.items()}
    blocked.unlink()
    merged = simengine.ray.run_sharded(4, out=out, progress=False, **args)
    assert {i: p.stat().st_mtime_ns for i, p in done.items()} == before, "finished shards are not run again"
    assert merged.digest == cli_digest(tmp_path, "--personas", "8", "--ticks", "2", "--seed", "4")["digest"]
    with pytest.raises(simengine.ConfigError, match="shard"):
        simengine.ray.run_sharded(2, out=out, shard=(0, 2), progress=False)
    with pytest.raises(simengine.ConfigError, match="persona is not an argument"):
        simengine.ray.run_sharded(2, out=out, persona=8, progress=False)
    with pytest.raises(simengine.ConfigError, match="every shard needs"):
        simengine.ray.run_sharded(4, out=out, personas=3, progress=False)
    assert ray.is_initialized(), "a cluster the caller started is left running"
