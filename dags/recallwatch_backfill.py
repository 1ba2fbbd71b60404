"""recallwatch_backfill: an index rebuild went live; carry gold IDs, re-score, re-judge (wiring)."""
import os
from datetime import datetime, timedelta

from airflow.sdk import Asset, Param, chain, dag, task

from pipeline.announce import REBUILD_ASSET, on_task_failure  # light: the standard library only

WAREHOUSE = (os.environ.get("RECALLWATCH_WAREHOUSE")  # empty: not set, as unset
             or "/opt/recallwatch/warehouse/recallwatch.duckdb")
REPORTS = os.environ.get("RECALLWATCH_REPORT_DIR") or "/opt/recallwatch/reports/latest"
WRITER = "recallwatch_writer"  # a pool of 1 slot: one process at a time may open the DuckDB file
REBUILD = Asset(REBUILD_ASSET)
KEYS = ("index_version", "manifest", "live_from")
TEXT = {"type": ["null", "string"]}


@dag(schedule=[REBUILD], start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=1,
     tags=["recallwatch"], params={key: Param(None, **TEXT) for key in (*KEYS, "start", "end")},
     default_args={"owner": "recallwatch", "retries": 2, "retry_delay": timedelta(minutes=5),
                   "on_failure_callback": on_task_failure})
def recallwatch_backfill():
    """Runs when an asset event for recallwatch://index-rebuild arrives (`recallwatch
    announce-rebuild`), whose extra gives index_version, manifest and live_from; or trigger it
    by hand with those params. Carries the gold chunk IDs to the new index by content hash,
    re-scores the days from live_from on, then re-judges drift (params `start`/`end` bound it;
    default: every window), writes the report and sends alerts. Several queued events are
    applied in order. See dags/README.md."""

    @task(pool=WRITER)
    def rebuild(params=None, triggering_asset_events=None) -> list:
        from airflow.sdk.exceptions import AirflowFailException

        from pipeline import api
        events = (triggering_asset_events or {}).get(REBUILD, [])
        rebuilds = [e.extra for e in sorted(events, key=lambda e: e.timestamp)] or [params]
        if not all(one.get(key) for one in rebuilds for key in KEYS):
            raise AirflowFailException(  # no retry brings a missing param
                f"a rebuild needs {', '.join(KEYS)} (asset event extra or params)")
        return [api.rebuild(WAREHOUSE, *(one[key] for key in KEYS)) for one in rebuilds]

    @task(pool=WRITER)
    def drift(params=None) -> int:
        from pipeline import api
        return api.drift(WAREHOUSE, params["start"], params["end"]).opened

    @task(pool=WRITER)  # reads only, but cannot open the file while another process writes it
    def report() -> str:
        from pipeline import api
        return str(api.report(WAREHOUSE, REPORTS))

    @task(pool=WRITER)
    def alert(report_path: str) -> dict:
        from pipeline import api
        return api.alert(WAREHOUSE, report=report_path)

    written = report()
    chain(rebuild(), drift(), written, alert(written))


recallwatch_backfill()
