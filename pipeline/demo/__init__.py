"""Generate the demo world that `recallwatch demo` ingests and scores: a seeded, fully synthetic
bank-support RAG deployment written to disk in the formats the README's Inputs section describes
(request logs, gold set, index manifests). It holds a gold set of ~300 goldens (10 of them
without evidence), index manifests for two index versions (idx-v1, rebuilt as idx-v2 with better
embeddings 20 days in), and 30 days of request logs as hive partitions alternating JSON Lines
and Parquet. The story is built into the retrieval simulation: as the index grows, distractor
chunks push gold chunks down the ranking, so recall@5 falls from ~0.87 to ~0.6, jumps back at
the rebuild and then drifts down slowly again. Six gold chunks are missing from the index, ~30%
of requests carry no gold_id and must join by normalized question text, ~2% ask questions no
golden covers, ~1% are agentic (two retrieval steps) and five records are deliberately
malformed so quarantine has something to show. The same seed writes byte-identical files;
nothing reads the clock.

The modules, in the order the generator uses them: `shape` and `vocabulary` (the world's
constants and words), `catalogue` (index growth, gold set, chunk texts), `simulate` (requests
and their rankings), `write` (the files), and `world`, which runs the steps. `run` then runs
the pipeline on a world as `recallwatch demo` does, the claims route on a bounded sample when a
judge is configured.
"""

from pipeline.demo.world import DemoWorld, generate_demo_world

__all__ = ["DemoWorld", "generate_demo_world"]
