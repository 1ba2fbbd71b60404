"""Benchmark: the passages route's similarity scoring (pipeline.routes.passages.covering_pairs:
Arrow batches, each batch's distinct pairs in one multi-threaded rapidfuzz call that stops a
pair once it cannot pass the threshold) against a plain Python double loop
calling `Levenshtein.normalized_similarity` per (passage, chunk text) pair, on the same data.

    .venv/bin/python bench/score_passages.py [--requests 100000] [--chunks 20] [--passages 3]
                                             [--loop-share 0.02] [--seed 7]

The data are generated (seeded): per request `--chunks` chunk texts of ~300 characters and
`--passages` gold passages, the first a lightly edited copy of one of its chunks (covered), the
others fresh text (not covered). Generation is not timed. The double loop runs on the first
`--loop-share` of the requests and its time is extrapolated linearly (pairs are all alike in
length, so time is proportional to requests); it prints what it measured and the factor. Both
sides must find the same covered passages on the subsample. Prints both times, the ratio and
the machine's core count. Batches are generated and scored one at a time, so memory holds one
batch and the double loop's sample, not every pair."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.routes.passages import (  # noqa: E402
    BATCH_PAIRS,
    SIMILARITY_THRESHOLD,
    covering_pairs,
)

WORDS = np.array("the a fee balance minimum account branch urban rural semi monthly charge "
                 "card interest rate loan deposit savings current transfer limit daily "
                 "statement service customer bank product segment value is of for and".split())
TEXT_WORDS = 48   # ~300 characters


def texts(rng: np.random.Generator, n: int) -> list[str]:
    picks = rng.integers(0, len(WORDS), size=(n, TEXT_WORDS))
    return [" ".join(row) for row in WORDS[picks]]


def edited(rng: np.random.Generator, text: str) -> str:
    chars = list(text)
    for i in rng.integers(0, len(chars), size=len(chars) // 10):
        chars[i] = "x"
    return "".join(chars)


def request_batches(n_requests: int, n_chunks: int, n_passages: int, seed: int,
                    requests_per_batch: int):
    """Arrow batches shaped like sql/route_passages_pairs.sql: one row per passage x chunk."""
    rng = np.random.default_rng(seed)
    for first in range(0, n_requests, requests_per_batch):
        n = min(requests_per_batch, n_requests - first)
        chunk_texts = texts(rng, n * n_chunks)
        fresh = texts(rng, n * (n_passages - 1))
        request_id, passage_no, place, passage, text = [], [], [], [], []
        for r in range(n):
            own = chunk_texts[r * n_chunks:(r + 1) * n_chunks]
            passages = [edited(rng, own[rng.integers(0, n_chunks)])]
            passages += fresh[r * (n_passages - 1):(r + 1) * (n_passages - 1)]
            for p_no, p in enumerate(passages, 1):
                request_id += [f"r-{first + r}"] * n_chunks
                passage_no += [p_no] * n_chunks
                place += range(1, n_chunks + 1)
                passage += [p] * n_chunks
                text += own
        yield pa.record_batch({"request_id": request_id, "passage_no": passage_no,
                               "place": pa.array(place, pa.int32()), "passage": passage,
                               "text": text})


def double_loop(batches, threshold: float) -> set[tuple[str, int, int]]:
    from rapidfuzz.distance import Levenshtein

    covered = set()
    for batch in batches:
        rows = zip(*(batch.column(c).to_pylist() for c in
                     ("request_id", "passage_no", "place", "passage", "text")), strict=True)
        for request_id, passage_no, place, passage, text in rows:
            if Levenshtein.normalized_similarity(passage, text) > threshold:
                covered.add((request_id, passage_no, place))
    return covered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--passages", type=int, default=3)
    parser.add_argument("--loop-share", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    per_batch = max(1, BATCH_PAIRS // (args.chunks * args.passages))

    n_loop = max(1, round(args.requests * args.loop_share))
    sample_pairs = min(args.requests, n_loop) * args.chunks * args.passages
    # Batches stream through: one is generated (not timed), scored (timed) and dropped, so
    # memory holds one batch plus the double loop's sample, whatever --requests is.
    generated = vectorized = 0.0
    pairs, n_batches, covers, sample = 0, 0, [], []
    source = request_batches(args.requests, args.chunks, args.passages, args.seed, per_batch)
    while True:
        t0 = time.perf_counter()
        batch = next(source, None)
        generated += time.perf_counter() - t0
        if batch is None:
            break
        t0 = time.perf_counter()
        covers.append(covering_pairs([batch], SIMILARITY_THRESHOLD))
        vectorized += time.perf_counter() - t0
        if pairs < sample_pairs:  # the same rows the route scored: requests are in order
            sample.append(batch.slice(0, sample_pairs - pairs))
        if n_batches == 0:
            chars = sum(len(t) for t in batch.column("text").to_pylist()[:1000]) / 1000
        pairs += batch.num_rows
        n_batches += 1
    covers = pa.concat_tables(covers)
    print(f"data: {args.requests} requests x {args.chunks} chunks (~{chars:.0f} chars) x "
          f"{args.passages} passages = {pairs} pairs in {n_batches} batches "
          f"(generated in {generated:.1f} s, not timed)")
    print(f"route (distinct pairs, rapidfuzz cpdist with score_cutoff, workers=-1): "
          f"{vectorized:.2f} s for {pairs} pairs ({pairs / vectorized / 1e6:.2f} M pairs/s), "
          f"{covers.num_rows} covering pairs")

    t0 = time.perf_counter()
    loop_covers = double_loop(sample, SIMILARITY_THRESHOLD)
    looped = time.perf_counter() - t0
    factor = pairs / sample_pairs
    route_sample = {(r["request_id"], r["passage_no"], r["place"])
                    for r in covers.to_pylist()
                    if int(r["request_id"][2:]) < n_loop}
    assert route_sample == loop_covers, "the double loop and the route disagree"
    print(f"double loop (Levenshtein.normalized_similarity per pair): {looped:.2f} s on the "
          f"first {n_loop} requests ({sample_pairs} pairs, same covering pairs as the route); "
          f"extrapolated x{factor:.0f} to {looped * factor:.1f} s")
    print(f"ratio double loop / route: {looped * factor / vectorized:.1f}x "
          f"on {os.cpu_count()} cores (os.cpu_count)")


if __name__ == "__main__":
    main()
