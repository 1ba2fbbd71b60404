"""The demo world as a whole: `generate_demo_world` runs the steps, and `DemoWorld` says where
their files went. The steps draw from one random generator in a fixed order; reordering them,
or adding a draw, changes the files a seed writes."""

from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import numpy as np

from pipeline.demo.catalogue import (
    choose_deleted_chunks,
    chunk_catalogue,
    index_timeline,
    make_goldens,
)
from pipeline.demo.shape import INDEX_VERSIONS, REBUILD_AFTER_DAYS
from pipeline.demo.simulate import simulate_requests
from pipeline.demo.write import write_gold, write_logs, write_manifest


@dataclass(frozen=True)
class DemoWorld:
    """Where the demo world was written and what it contains."""

    root: Path
    logs_dir: Path
    gold_path: Path
    gold_version: str
    index_manifests: dict[str, Path]  # index_version -> manifest Parquet file
    rebuild_day: date  # first day served by idx-v2
    start: date
    end: date  # exclusive
    n_requests: int  # log records written, bad ones included
    n_bad_records: int
    deleted_chunk_ids: tuple[str, ...]  # gold chunks missing from every index version
    log_files: tuple[Path, ...] = ()  # the day files written, the only logs the demo loads


def generate_demo_world(
    out_dir: Path,
    *,
    seed: int = 7,
    days: int = 30,
    start: date = date(2026, 10, 1),
    requests_per_day: int = 1800,
) -> DemoWorld:
    """Write gold set, index manifests and request logs under `out_dir`; same seed, same bytes."""
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}.")
    if requests_per_day < 10:
        raise ValueError(f"requests_per_day must be at least 10, got {requests_per_day}.")
    out_dir = Path(out_dir)
    _remove_previous_world(out_dir)
    rng = np.random.default_rng(seed)

    timeline = index_timeline(rng, days)
    goldens = make_goldens(rng, timeline.allocated[0])
    deleted = choose_deleted_chunks(rng, goldens)
    chunks = chunk_catalogue(goldens, int(timeline.allocated[-1]))
    requests = simulate_requests(rng, goldens, deleted, timeline, requests_per_day)

    gold_path = out_dir / "gold" / "gold.jsonl"
    write_gold(gold_path, goldens, chunks)
    manifests = {}
    for version in sorted(set(timeline.version_of_day.tolist())):
        last_day = int(np.flatnonzero(timeline.version_of_day == version)[-1])
        name = INDEX_VERSIONS[version]
        manifests[name] = out_dir / "index" / f"{name}.parquet"
        write_manifest(manifests[name], name, int(timeline.allocated[last_day]), deleted, chunks)
    logs_dir = out_dir / "logs"
    n_bad = write_logs(rng, logs_dir, requests, start, requests_per_day, timeline, goldens,
                       chunks)

    return DemoWorld(
        root=out_dir,
        logs_dir=logs_dir,
        gold_path=gold_path,
        gold_version=f"gold-{start:%Y-%m}",
        index_manifests=manifests,
        rebuild_day=start + timedelta(days=REBUILD_AFTER_DAYS),
        start=start,
        end=start + timedelta(days=days),
        n_requests=days * requests_per_day + n_bad,
        n_bad_records=n_bad,
        deleted_chunk_ids=tuple(f"c-{n:06d}" for n in sorted(deleted)),
        log_files=tuple(sorted(logs_dir.glob("dt=*/requests.*"))),
    )


def _remove_previous_world(out_dir: Path) -> None:
    """Delete the files an earlier demo world left here, and nothing else.

    A partition left over from a longer or differently dated world would otherwise be ingested
    with the new one.
    """
    stale = [out_dir / "gold" / "gold.jsonl"]
    stale += [out_dir / "index" / f"{version}.parquet" for version in INDEX_VERSIONS]
    stale += sorted(out_dir.glob("logs/dt=*/requests.jsonl"))
    stale += sorted(out_dir.glob("logs/dt=*/requests.parquet"))
    for path in stale:
        path.unlink(missing_ok=True)
    for partition in sorted(out_dir.glob("logs/dt=*")):
        if partition.is_dir() and not any(partition.iterdir()):
            partition.rmdir()
