"""Shared fixtures: a fresh warehouse per test, log/gold writers, and the CLI run in-process."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from pipeline import cli
from pipeline.warehouse import INTERNAL_TABLES, PUBLIC_TABLES, connect

ALL_TABLES = PUBLIC_TABLES + INTERNAL_TABLES


def write_jsonl(path: Path, records: list) -> Path:
    """Records may be dicts (dumped as JSON) or raw str/bytes lines (written as they are)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        for record in records:
            if isinstance(record, bytes):
                fh.write(record + b"\n")
            elif isinstance(record, str):
                fh.write(record.encode("utf-8") + b"\n")
            else:
                fh.write(json.dumps(record).encode("utf-8") + b"\n")
    return path


def request(request_id: str, chunks: list, *, ts: str = "2026-11-01T10:00:00Z",
            query: str = "what is the minimum balance?", gold_id: str | None = "g-1",
            index_version: str = "idx-1", **extra) -> dict:
    """A log record; chunks are chunk IDs in rank order (or dicts written as given)."""
    record = {
        "request_id": request_id, "timestamp": ts, "query": query,
        "index_version": index_version,
        "retrieved": [c if isinstance(c, dict) else {"chunk_id": c} for c in chunks],
    }
    if gold_id is not None:
        record["gold_id"] = gold_id
    record.update(extra)
    return record


def golden(gold_id: str, chunk_ids: list, question: str = "What is the minimum balance?",
           **extra) -> dict:
    return {"gold_id": gold_id, "question": question, "gold_chunk_ids": chunk_ids, **extra}


def graded_world(tmp_path: Path, lows: dict) -> tuple[Path, Path]:
    """A golden of 10 chunks and 100 requests on each day of `lows`, the i-th finding
    low + i % 5 of them (mean recall (low + 2) / 10). Returns the gold and log files."""
    gold = [f"c{j}" for j in range(10)]
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", gold)])
    records = []
    for day, low in lows.items():
        for i in range(100):
            hit = low + i % 5
            records.append(request(f"r{day}-{i}", gold[:hit] + [f"x{j}" for j in range(10 - hit)],
                                   ts=f"{day}T{i // 60:02d}:{i % 60:02d}:00Z"))
    write_jsonl(tmp_path / "logs.jsonl", records)
    return tmp_path / "gold.jsonl", tmp_path / "logs.jsonl"


def insert_rows(con, table: str, rows: list[dict]) -> None:
    """Insert dicts into a warehouse table as given (no-op for no rows); the table name is the
    calling test's literal, values are bound."""
    if not rows:
        return
    columns = list(rows[0])
    con.executemany(f"INSERT INTO {table} ({', '.join(columns)}) "
                    f"VALUES ({', '.join('$' + c for c in columns)})", rows)


CHROMIUM = "/usr/bin/chromium"
needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason="needs headless Chromium at /usr/bin/chromium (apt-get install chromium)",
)


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium with nothing to resolve: a page has to draw from its own bytes."""
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}",
         "--host-resolver-rules=MAP * ~NOTFOUND", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )


def snapshot(con) -> dict[str, str]:
    """A digest of every table's sorted rows, to show that a step changed nothing."""
    digests = {}
    for table in ALL_TABLES:
        rows = con.sql(f'SELECT * FROM "{table}"').fetchall()
        text = "\n".join(sorted(repr(r) for r in rows))
        digests[table] = hashlib.sha256(text.encode()).hexdigest()
    return digests


@pytest.fixture
def warehouse(tmp_path) -> Path:
    return tmp_path / "wh" / "recallwatch.duckdb"


@pytest.fixture
def con():
    connection = connect(":memory:")
    yield connection
    connection.close()


@pytest.fixture
def run_cli(warehouse, capsys):
    """Run `recallwatch --warehouse <tmp> ARGS...` in-process; returns (exit code, stdout,
    stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        code = cli.main(["--warehouse", str(warehouse), *map(str, args)])
        out, err = capsys.readouterr()
        return code, out, err

    return run
