"""The `ids` route: a gold chunk ID is covered when its best place in the logged ranking (over
all retrieval steps) is within the served k. Places come straight from the lists kept at
ingest (requests.chunk_ids / chunk_ranks); misses are diagnosed per gold chunk
(sql/route_ids.sql)."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.routes import DEFAULT_ROUTE
from pipeline.warehouse import run_script


@dataclass(frozen=True)
class IdsRoute:
    name: str = DEFAULT_ROUTE
    needs: tuple[str, ...] = ("gold_chunk_ids",)

    def score_window(self, con, params: dict) -> None:
        run_script(con, "route_ids", params)
