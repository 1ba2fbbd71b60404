"""Routes behind one interface: a route defined here, in the test file alone, flows through
request_scores, recall_at_k, window_metrics and the report like the built-in `ids` route; the
shared part decides statuses from what the route says it needs."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pipeline.aggregate import aggregate
from pipeline.config import resolve
from pipeline.errors import RecallwatchError
from pipeline.ingest import ingest_gold, ingest_logs
from pipeline.report import write_report
from pipeline.routes import known_routes, register, unregister
from pipeline.score import score
from tests.conftest import golden, request, write_jsonl

# The first gold chunk only: covered when it is placed within the served k.
FIRST_GOLD_SQL = """
CREATE OR REPLACE TEMP TABLE route_window AS
SELECT m.*, m.gold_chunk_ids[1:1] AS needed_items,
       CASE WHEN m.status = 'scored'
            THEN [m.chunk_ranks[list_position(m.chunk_ids, m.gold_chunk_ids[1])]] END AS places
FROM score_matched($start, $end, $gold_version, $needs) m
"""

# Needs a reference answer; covers it when anything at all was retrieved (a stand-in judge).
ANYTHING_SQL = """
CREATE OR REPLACE TEMP TABLE route_window AS
SELECT m.*, [m.reference] AS needed_items,
       CASE WHEN m.status = 'scored' THEN [CASE WHEN len(m.chunk_ids) > 0 THEN 1 END] END
           AS places
FROM score_matched($start, $end, $gold_version, $needs) m
"""


@dataclass(frozen=True)
class SqlRoute:
    name: str
    needs: tuple[str, ...]
    query: str

    def score_window(self, con, params: dict) -> None:
        con.execute(self.query, {k: params[k] for k in ("start", "end", "gold_version", "needs")})


@pytest.fixture
def first_gold():
    register(SqlRoute("first_gold", ("gold_chunk_ids",), FIRST_GOLD_SQL))
    register(SqlRoute("anything", ("reference",), ANYTHING_SQL))
    yield
    unregister("first_gold")
    unregister("anything")


def world(con, tmp_path):
    write_jsonl(tmp_path / "gold.jsonl", [
        golden("g-1", ["a", "b"], question="q1", reference="A and B."),
        golden("g-2", ["c", "d"], question="q2"),   # no reference: nothing for `anything`
    ])
    write_jsonl(tmp_path / "logs.jsonl", [
        request("r-1", ["a", "x"], gold_id="g-1", k=2),          # first gold chunk at place 1
        request("r-2", ["x", "y", "b", "a"], gold_id="g-1", k=2),  # first gold chunk beyond k
        request("r-3", ["c"], gold_id="g-2", session_id="s-1"),
        request("r-4", ["q"], gold_id="missing"),
    ])
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    ingest_logs(con, [str(tmp_path / "logs.jsonl")])


def test_a_route_defined_in_a_test_flows_to_scores_metrics_and_report(con, tmp_path,
                                                                        first_gold):
    world(con, tmp_path)
    config = resolve(con, routes=("ids", "first_gold", "anything"), cutoffs=(1, 2))
    summary = score(con, config)
    aggregate(con, config)
    rows = dict(((r, q), (s, rec)) for r, q, s, rec in con.sql(
        "SELECT request_id, route, status, recall FROM request_scores").fetchall())
    assert rows[("r-1", "first_gold")] == ("scored", 1.0)
    assert rows[("r-2", "first_gold")] == ("scored", 0.0)
    assert rows[("r-3", "first_gold")] == ("scored", 1.0)
    assert rows[("r-4", "first_gold")] == ("no_gold_match", None)
    # what the route needs decides the status: g-2 has no reference
    assert rows[("r-3", "anything")] == ("no_evidence", None)
    assert rows[("r-1", "anything")] == ("scored", 1.0)
    # the ids route is untouched by the others
    assert rows[("r-1", "ids")] == ("scored", 0.5) and rows[("r-3", "ids")] == ("scored", 0.5)
    assert summary.by_status["first_gold"] == {"no_gold_match": 1, "scored": 3}

    at_k = con.sql("SELECT request_id, k, recall FROM recall_at_k WHERE route = 'first_gold' "
                   "ORDER BY 1, 2").fetchall()
    assert at_k == [("r-1", 1, 1.0), ("r-1", 2, 1.0), ("r-2", 1, 0.0), ("r-2", 2, 0.0),
                    ("r-3", 1, 1.0), ("r-3", 2, 1.0)]
    metric = con.sql("SELECT n, mean_recall, n_excluded FROM window_metrics "
                     "WHERE route = 'first_gold' AND slice = 'all' AND k = 2").fetchall()
    assert metric == [(3, pytest.approx(2 / 3), 1)]

    html = write_report(con, tmp_path / "report", route="first_gold").read_text()
    assert "first_gold" in html
    # the route's own mean recall@2 (the ids route's is 1/3)
    assert "mean recall@2 0.667" in html


def test_a_route_that_builds_no_route_window_fails_instead_of_copying_another(con, tmp_path,
                                                                           first_gold):
    # it only reads the matched requests and builds nothing
    register(SqlRoute("lazy", ("reference",),
                      "SELECT count(*) FROM score_matched($start, $end, $gold_version, $needs)"))
    world(con, tmp_path)
    try:
        with pytest.raises(RuntimeError, match="route 'lazy' did not create its route_window"):
            score(con, routes=("ids", "lazy"))
    finally:
        unregister("lazy")
    # the failed batch rolled back whole: not even the ids rows of that window were written
    assert con.sql("SELECT count(*) FROM request_scores").fetchall() == [(0,)]


def test_unknown_route_is_one_clear_error(con, tmp_path):
    world(con, tmp_path)
    with pytest.raises(RecallwatchError, match="route 'nope' is not available"):
        score(con, routes=("nope",))


def test_a_route_must_say_what_it_needs_from_a_golden():
    with pytest.raises(ValueError, match="needs golden fields"):
        register(SqlRoute("vague", ("whatever",), FIRST_GOLD_SQL))
    assert "vague" not in known_routes()
