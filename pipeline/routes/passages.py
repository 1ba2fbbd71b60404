"""The `passages` route: RAGAS NonLLMContextRecall on gold passages (text, no chunk IDs). A gold
passage is covered when its best string similarity to the text of a retrieved chunk lies
strictly above a threshold; the similarity is 1 - normalized Levenshtein distance
(rapidfuzz's `Levenshtein.normalized_similarity`, RAGAS's NonLLMStringSimilarity default) and
the threshold 0.5. Its place is the best place among the chunks that cover it, so recall@k at
the cutoffs works exactly as for IDs (the shared part caps places at the served k). One chunk
can cover several passages, so precision counts the covering chunks (route_window's
relevant_places), not the covered passages: it never exceeds 1.

A chunk's text is the logged `text`, else the index manifest's text of that chunk in the
request's index version; a chunk with neither cannot cover anything (a passage only it would
have matched shows as `not_retrieved`), and a request none of whose served chunks has a text
is `no_context_text`: not measured, never 0. SQL picks the pairs (sql/route_passages*.sql); this
module only scores them: the pairs stream out of DuckDB as Arrow batches bounded in pairs and
in bytes, each batch's distinct pairs are scored in one multi-threaded rapidfuzz call that
gives up on a pair once it cannot reach the threshold, and the pairs above the threshold go
back as an Arrow table that the last SQL step turns into places.

Both strings are compared in Unicode NFC (canonical composition; RAGAS compares code points as
given): a passage and a text that differ only in how their accents are composed are one text.
Nothing else is normalized (no case folding, no compatibility forms), as in RAGAS.

Reference: RAGAS `NonLLMContextRecall` (ragas/metrics/_context_recall.py): per reference
context, max similarity over retrieved contexts, covered when `> threshold`."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.warehouse import run_script, sql

ROUTE_NAME = "passages"
SIMILARITY_THRESHOLD = 0.5   # RAGAS NonLLMContextRecall default; covered when strictly above
# A rapidfuzz call scores one batch of (passage, text) pairs: at most BATCH_PAIRS of them and
# BATCH_BYTES of their columns, so that long texts (a pair repeats its passage and its text)
# make smaller batches rather than more memory. The pairs are read READ_ROWS at a time.
BATCH_PAIRS = 100_000
BATCH_BYTES = 64 << 20
READ_ROWS = 1_024

_COVERS_SCHEMA = pa.schema([("request_id", pa.string()), ("passage_no", pa.int64()),
                            ("chunk_id", pa.string()), ("place", pa.int32())])


def similarities(passages: list[str], texts: list[str],
                 score_cutoff: float | None = None) -> np.ndarray:
    """1 - normalized Levenshtein distance of each pair (passages[i], texts[i]), in [0, 1], as
    float64 (the arithmetic RAGAS does in Python, so a pair exactly at the threshold stays
    exactly there). Vectorized and multi-threaded: rapidfuzz.process.cpdist, the paired form
    of cdist (cdist over a batch would also compare passages with other requests' texts).
    With `score_cutoff`, a pair below it scores 0 and rapidfuzz stops its work early; a pair
    at or above it keeps its exact similarity (rapidfuzz's documented rule), but the edge is
    rapidfuzz's own rounding of the cutoff to edits: give a cutoff a little under a threshold
    and decide `> threshold` afterwards (covering_pairs)."""
    from rapidfuzz.distance import Levenshtein
    from rapidfuzz.process import cpdist

    if not passages:
        return np.zeros(0, dtype=np.float64)
    return cpdist(passages, texts, scorer=Levenshtein.normalized_similarity,
                  dtype=np.float64, workers=-1, score_cutoff=score_cutoff)


def distinct_pairs(passages: pa.Array, texts: pa.Array) -> tuple[list, list, np.ndarray]:
    """The distinct (passage, text) pairs of two aligned string columns, as Python lists, and
    for every row the position of its pair in them. Requests that ask the same question and
    get the same chunks repeat their pairs, and a pair is scored once. Only the distinct
    strings become Python objects: Arrow dictionary-encodes each column, and a pair is the
    pair of its two codes. A null stays None, which rapidfuzz scores 0."""
    p, distinct_passages = _codes(passages)
    t, distinct_texts = _codes(texts)
    _, first, row_pair = np.unique(p * len(distinct_texts) + t,
                                   return_index=True, return_inverse=True)
    return (distinct_passages[p[first]].tolist(), distinct_texts[t[first]].tolist(),
            row_pair.reshape(-1))


def _codes(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Per row the code of its string, and the strings by code (None last, for nulls), each in
    Unicode NFC: text that differs only in how its accents are composed is the same text."""
    encoded = pc.dictionary_encode(column)
    values = np.array([*(unicodedata.normalize("NFC", text)
                         for text in encoded.dictionary.to_pylist()), None], dtype=object)
    codes = pc.fill_null(encoded.indices, len(values) - 1)
    return codes.to_numpy().astype(np.int64), values


def bounded_batches(batches: Iterable[pa.RecordBatch], max_rows: int,
                    max_bytes: int) -> Iterator[pa.RecordBatch]:
    """The rows of `batches`, in order, gathered into batches of at most `max_rows` rows and
    `max_bytes` bytes (Arrow's buffers; one incoming batch is never split, so a batch larger
    than `max_bytes` on its own passes as it is)."""
    held: list[pa.RecordBatch] = []
    rows = size = 0
    for batch in batches:
        if held and (rows + batch.num_rows > max_rows or size + batch.nbytes > max_bytes):
            yield pa.concat_batches(held)
            held, rows, size = [], 0, 0
        held.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
    if held:
        yield pa.concat_batches(held)


def covering_pairs(batches: Iterable[pa.RecordBatch],
                   threshold: float = SIMILARITY_THRESHOLD) -> pa.Table:
    """The (request_id, passage_no, chunk_id, place) of every pair whose similarity is >
    threshold (chunk_id only when the batches carry it)."""
    kept = []
    for batch in batches:
        if batch.num_rows == 0:
            continue
        passages, texts, row_pair = distinct_pairs(batch.column("passage"),
                                                   batch.column("text"))
        # rapidfuzz stops early below the cutoff, turning it into a whole number of edits with
        # its own rounding: 1 - 7/10 is 0.30000000000000004 > 0.3 in float64 (as RAGAS
        # computes it) yet cut at 0.3. A cutoff a little under the threshold keeps every such
        # pair; `>` on the exact values decides. Cutoffs are taken in [0, 1].
        cutoff = min(max(threshold - 1e-6, 0.0), 1.0)
        covers = similarities(passages, texts, score_cutoff=cutoff) > threshold
        mask = pa.array(covers[row_pair])
        kept.append(pa.table({
            field.name: pc.filter(batch.column(field.name), mask).cast(field.type)
            for field in _COVERS_SCHEMA if field.name in batch.schema.names}))
    if not kept:
        return _COVERS_SCHEMA.empty_table()
    return pa.concat_tables(kept)


@dataclass(frozen=True)
class PassagesRoute:
    """Register `PassagesRoute(threshold=...)` to judge with another threshold. It is not a
    warehouse setting: pipeline.state does not record it, so days scored with the old one
    would not be found stale."""

    name: str = ROUTE_NAME
    needs: tuple[str, ...] = ("gold_passages",)
    # 2: no_context_text for served chunks without a text, texts compared in NFC; 3: a chunk
    # logged with its text in one copy and without in another is read as logged
    rules: ClassVar[str] = "3"
    threshold: float = SIMILARITY_THRESHOLD
    batch_pairs: int = BATCH_PAIRS
    batch_bytes: int = BATCH_BYTES

    def score_window(self, con, params: dict) -> None:
        run_script(con, "route_passages", params)
        reader = con.sql(sql("route_passages_pairs")).to_arrow_reader(
            min(READ_ROWS, self.batch_pairs))
        covers = covering_pairs(bounded_batches(reader, self.batch_pairs, self.batch_bytes),
                                self.threshold)
        con.register("passage_covers", covers)
        try:
            run_script(con, "route_passages_write", params)
        finally:
            con.unregister("passage_covers")
