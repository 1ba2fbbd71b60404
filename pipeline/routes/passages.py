"""The `passages` route: RAGAS NonLLMContextRecall on gold passages (text, no chunk IDs). A gold
passage is covered when its best string similarity to the text of a retrieved chunk lies
strictly above a threshold; the similarity is 1 - normalized Levenshtein distance
(rapidfuzz's `Levenshtein.normalized_similarity`, RAGAS's NonLLMStringSimilarity default) and
the threshold 0.5. Its place is the best place among the chunks that cover it, so recall@k at
the cutoffs works exactly as for IDs (the shared part caps places at the served k).

A chunk's text is the logged `text`, else the index manifest's text of that chunk in the
request's index version; a chunk with neither cannot cover anything (a passage only it would
have matched shows as `not_retrieved`). SQL picks the pairs (sql/route_passages*.sql); this
module only scores them: the pairs stream out of DuckDB as Arrow batches of bounded size, each
batch is scored in one multi-threaded rapidfuzz call, and the pairs above the threshold go back
as an Arrow table that the last SQL step turns into places.

Reference: RAGAS `NonLLMContextRecall` (ragas/metrics/_context_recall.py): per reference
context, max similarity over retrieved contexts, covered when `> threshold`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.warehouse import run_script, sql

ROUTE_NAME = "passages"
SIMILARITY_THRESHOLD = 0.5   # RAGAS NonLLMContextRecall default; covered when strictly above
BATCH_PAIRS = 100_000        # (passage, text) pairs scored per rapidfuzz call: bounds memory

_COVERS_SCHEMA = pa.schema([("request_id", pa.string()), ("passage_no", pa.int64()),
                            ("place", pa.int32())])


def similarities(passages: list[str], texts: list[str]) -> np.ndarray:
    """1 - normalized Levenshtein distance of each pair (passages[i], texts[i]), in [0, 1], as
    float64 (the arithmetic RAGAS does in Python, so a pair exactly at the threshold stays
    exactly there). Vectorized and multi-threaded: rapidfuzz.process.cpdist, the paired form
    of cdist (cdist over a batch would also compare passages with other requests' texts)."""
    from rapidfuzz.distance import Levenshtein
    from rapidfuzz.process import cpdist

    if not passages:
        return np.zeros(0, dtype=np.float64)
    return cpdist(passages, texts, scorer=Levenshtein.normalized_similarity,
                  dtype=np.float64, workers=-1)


def covering_pairs(batches: Iterable[pa.RecordBatch],
                   threshold: float = SIMILARITY_THRESHOLD) -> pa.Table:
    """The (request_id, passage_no, place) of every pair whose similarity is > threshold."""
    kept = []
    for batch in batches:
        if batch.num_rows == 0:
            continue
        scores = similarities(batch.column("passage").to_pylist(),
                              batch.column("text").to_pylist())
        mask = pa.array(scores > threshold)
        kept.append(pa.table({
            "request_id": pc.filter(batch.column("request_id"), mask).cast(pa.string()),
            "passage_no": pc.filter(batch.column("passage_no"), mask).cast(pa.int64()),
            "place": pc.filter(batch.column("place"), mask).cast(pa.int32()),
        }))
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
    threshold: float = SIMILARITY_THRESHOLD
    batch_pairs: int = BATCH_PAIRS

    def score_window(self, con, params: dict) -> None:
        run_script(con, "route_passages", params)
        reader = con.sql(sql("route_passages_pairs")).to_arrow_reader(self.batch_pairs)
        covers = covering_pairs(reader, self.threshold)
        con.register("passage_covers", covers)
        try:
            run_script(con, "route_passages_write", params)
        finally:
            con.unregister("passage_covers")
