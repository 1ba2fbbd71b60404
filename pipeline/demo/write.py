"""Writing the demo world in the formats the README's Inputs section describes: the gold set as
JSON Lines, one Parquet manifest per index version, and one hive partition of request logs per
day, JSON Lines on even days and Parquet on odd ones, with a few deliberately broken lines."""

import io
import json
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.demo.catalogue import Chunks, Golden, IndexTimeline
from pipeline.demo.shape import CANDIDATES, INDEX_VERSIONS, N_BAD_RECORDS, RETRIEVER, SERVED_K
from pipeline.demo.simulate import Requests
from pipeline.demo.vocabulary import NO_ANSWER_RESPONSE, NOVEL_QUERIES

PARQUET_COMPRESSION = "zstd"
RANKED_CHUNK = pa.struct([
    ("chunk_id", pa.string()), ("rank", pa.int32()), ("score", pa.float64()),
    ("text", pa.string()),
])
LOG_SCHEMA = pa.schema([
    ("request_id", pa.string()), ("timestamp", pa.string()), ("query", pa.string()),
    ("gold_id", pa.string()), ("index_version", pa.string()), ("index_size", pa.int64()),
    ("k", pa.int32()), ("retrieved", pa.list_(RANKED_CHUNK)),
    ("retrieval_steps", pa.list_(pa.list_(RANKED_CHUNK))), ("session_id", pa.string()),
    ("turn", pa.int32()), ("response", pa.string()),
    ("tags", pa.struct([("tenant", pa.string()), ("retriever", pa.string())])),
])


def write_gold(path: Path, goldens: list[Golden], chunks: Chunks) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for g in goldens:
        lines.append(json.dumps({
            "gold_id": g.gold_id,
            "question": g.question,
            "reference": g.reference,
            "gold_chunk_ids": [chunks.ids[n].as_py() for n in g.chunk_numbers],
            "gold_passages": list(g.gold_passages),
            # Given, so the claims route needs no judge call to split the reference.
            "claims": list(g.claims),
        }))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_manifest(path: Path, version: str, n_allocated: int, deleted: set[int],
                   chunks: Chunks) -> None:
    numbers = np.arange(1, n_allocated + 1)
    numbers = numbers[~np.isin(numbers, sorted(deleted))]
    table = pa.table({
        "index_version": pa.array(np.full(len(numbers), version, dtype=object), pa.string()),
        "chunk_id": chunks.ids.take(numbers),
        "content_hash": chunks.hashes.take(numbers),
        "text": chunks.texts.take(numbers),
    })
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, compression=PARQUET_COMPRESSION)


def write_logs(rng: np.random.Generator, logs_dir: Path, requests: Requests, start: date,
               per_day: int, timeline: IndexTimeline, goldens: list[Golden],
               chunks: Chunks) -> int:
    """One hive partition per day: JSON Lines on even days, Parquet on odd ones. Returns the
    number of broken records written."""
    days = len(timeline.sizes)
    json_days = list(range(0, days, 2))
    # Spread the bad records over the JSON Lines days after the first one when there are any.
    bad_days = [json_days[min(i + 1, len(json_days) - 1)] for i in range(N_BAD_RECORDS)]
    for d in range(days):
        day = start + timedelta(days=d)
        day_label = f"{day:%Y%m%d}"
        rows = np.arange(d * per_day, (d + 1) * per_day)
        instants = (np.datetime64(day.isoformat(), "s")
                    + requests.seconds[rows].astype("timedelta64[s]"))
        timestamps = [t + "Z" for t in np.datetime_as_string(instants, unit="s").tolist()]
        table = _day_table(requests, rows, day_label, timestamps, int(timeline.sizes[d]),
                           INDEX_VERSIONS[timeline.version_of_day[d]], goldens, chunks)
        partition = logs_dir / f"dt={day.isoformat()}"
        partition.mkdir(parents=True, exist_ok=True)
        if d % 2:
            pq.write_table(table, partition / "requests.parquet", compression=PARQUET_COMPRESSION)
            continue
        kinds = [k for k, bad_day in enumerate(bad_days) if bad_day == d]
        _write_json_lines(rng, partition / "requests.jsonl", table, day_label, per_day, kinds)
    return N_BAD_RECORDS


def _write_json_lines(rng: np.random.Generator, path: Path, table: pa.Table, day_label: str,
                      per_day: int, bad_kinds: list[int]) -> None:
    """The day's table as JSON Lines, with the broken records of `bad_kinds` slipped in."""
    buffer = io.BytesIO()
    pl.from_arrow(table).write_ndjson(buffer)
    # Producers that have no gold_id omit the key; JSON escaping keeps this pattern out of
    # string values.
    lines = buffer.getvalue().replace(b',"gold_id":null', b"").decode().splitlines()
    if bad_kinds:
        template = next(json.loads(line) for line in lines if '"retrieved":[' in line)
        for line in _bad_records(template, day_label, per_day + 1, bad_kinds):
            lines.insert(int(rng.integers(0, len(lines) + 1)), line)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _day_table(requests: Requests, rows: np.ndarray, day_label: str, timestamps: list[str],
               index_size: int, version: str, goldens: list[Golden],
               chunks: Chunks) -> pa.Table:
    n = len(rows)
    queries, gold_ids, responses = _asked_and_answered(requests, rows, goldens)
    retrieved, retrieval_steps = _candidate_columns(requests, rows, chunks)
    numbers = np.arange(1, n + 1)
    session = requests.session[rows]
    return pa.table([
        pa.array([f"r-{day_label}-{i:05d}" for i in numbers]),
        pa.array(timestamps),
        pa.array(queries),
        pa.array(gold_ids, pa.string()),
        pa.array([version] * n),
        pa.array(np.full(n, index_size, dtype=np.int64)),
        pa.array(np.full(n, SERVED_K, dtype=np.int32)),
        retrieved,
        retrieval_steps,
        pa.array([f"s-{day_label}-{s:04d}" if s >= 0 else None for s in session], pa.string()),
        pa.array(requests.turn[rows].astype(np.int32)),
        pa.array(responses),
        pa.StructArray.from_arrays(
            [pa.array(np.where(requests.acme[rows], "acme", "globex")),
             pa.array([RETRIEVER] * n)],
            fields=list(LOG_SCHEMA.field("tags").type),
        ),
    ], schema=LOG_SCHEMA)


def _asked_and_answered(
    requests: Requests, rows: np.ndarray, goldens: list[Golden],
) -> tuple[list[str], list[str | None], list[str]]:
    """Query, gold_id (None when the producer did not know it) and response of each row."""
    queries, gold_ids, responses = [], [], []
    for r in rows:
        g = requests.golden[r]
        if g < 0:
            queries.append(NOVEL_QUERIES[requests.novel_query[r]])
            gold_ids.append(None)
            responses.append(NO_ANSWER_RESPONSE)
            continue
        golden = goldens[g]
        if requests.with_gold_id[r]:
            queries.append(golden.question)
            gold_ids.append(golden.gold_id)
        else:
            queries.append(_mangled(golden.question, int(requests.query_variant[r]),
                                    requests.variant_draw[r]))
            gold_ids.append(None)
        responses.append(golden.answer if requests.main_fact_served[r] else NO_ANSWER_RESPONSE)
    return queries, gold_ids, responses


def _mangled(question: str, variant: int, draw: np.ndarray) -> str:
    """The question as a user typed it: same text after NFKC, casefold and whitespace collapse."""
    words = question.split(" ")
    i, j = int(draw[0]) % len(words), int(draw[1]) % len(words)
    if variant == 1:
        words[i] = words[i].upper()
        words[j] = words[j].upper()
    elif variant == 2:
        return question.lower()
    elif variant == 3:
        words[i % (len(words) - 1)] += " "  # double and triple spaces between words
        words[j % (len(words) - 1)] += "  "
    elif variant == 4:
        words[i] = _full_width(words[i])
        words[-1] = words[-1][:-1] + "\uff1f"  # full-width question mark
    elif variant == 5:
        # A no-break space between two words, which NFKC turns into a plain one.
        gap = i % (len(words) - 1)
        words[gap : gap + 2] = [words[gap] + "\u00a0" + words[gap + 1]]
    elif variant == 6:
        return "  ".join(words).upper()
    return " ".join(words)


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _candidate_columns(
    requests: Requests, rows: np.ndarray, chunks: Chunks,
) -> tuple[pa.ListArray, pa.ListArray]:
    """`retrieved` for plain requests and `retrieval_steps` (two lists) for agentic ones; each
    row has exactly one of them."""
    plain = ~requests.agentic[rows]
    plain_rows = rows[plain]
    retrieved = _list_array(
        _ranked_values(requests.ranked[plain_rows], requests.scores[plain_rows], chunks),
        np.full(len(rows), CANDIDATES), plain,
    )
    agentic_rows = rows[~plain]
    second = requests.second_step_row[agentic_rows]
    both_steps = np.stack([requests.ranked[agentic_rows], requests.second_ranked[second]], axis=1)
    both_scores = np.stack([requests.scores[agentic_rows], requests.second_scores[second]],
                           axis=1)
    steps = _list_array(
        _ranked_values(both_steps.reshape(-1, CANDIDATES), both_scores.reshape(-1, CANDIDATES),
                       chunks),
        np.full(2 * len(agentic_rows), CANDIDATES), np.ones(2 * len(agentic_rows), bool),
    )
    return retrieved, _list_array(steps, np.full(len(rows), 2), ~plain)


def _ranked_values(ranked: np.ndarray, scores: np.ndarray, chunks: Chunks) -> pa.StructArray:
    flat = ranked.reshape(-1)
    ranks = np.tile(np.arange(1, ranked.shape[1] + 1, dtype=np.int32), ranked.shape[0])
    return pa.StructArray.from_arrays(
        [chunks.ids.take(flat), pa.array(ranks), pa.array(scores.reshape(-1)),
         chunks.texts.take(flat)],
        fields=list(RANKED_CHUNK),
    )


def _list_array(values: pa.Array, lengths: np.ndarray, present: np.ndarray) -> pa.ListArray:
    offsets = np.concatenate([[0], np.cumsum(np.where(present, lengths, 0))]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), values, mask=pa.array(~present))


def _bad_records(template: dict, day_label: str, first_number: int, kinds: list[int]) -> list:
    """The deliberately broken lines: each fails validation for one stated reason."""
    lines = []
    for offset, kind in enumerate(kinds):
        record = json.loads(json.dumps(template))
        record["request_id"] = f"r-{day_label}-{first_number + offset:05d}"
        if kind == 0:  # a write cut short: invalid JSON
            text = json.dumps(record, separators=(",", ":"), ensure_ascii=False)
            lines.append(text[: len(text) // 2])
            continue
        if kind == 1:
            del record["timestamp"]
        elif kind == 2:
            record["timestamp"] = "yesterday-ish"
        elif kind == 3:
            record["retrieved"] = ",".join(c["chunk_id"] for c in record["retrieved"])
        else:
            record["retrieved"][2]["chunk_id"] = None
        lines.append(json.dumps(record, separators=(",", ":"), ensure_ascii=False))
    return lines
