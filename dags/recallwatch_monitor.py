"""recallwatch_monitor: one UTC day of request logs per run, gated, scored, judged (wiring only)."""
import os
from datetime import timedelta

from airflow.sdk import CronDataIntervalTimetable, Param, chain, dag, task

from pipeline.announce import first_interval_start, on_task_failure  # light: no Airflow

WAREHOUSE = (os.environ.get("RECALLWATCH_WAREHOUSE")  # empty: not set, as unset
             or "/opt/recallwatch/warehouse/recallwatch.duckdb")
LOGS = os.environ.get("RECALLWATCH_LOG_SOURCE") or "/opt/recallwatch/logs"
REPORTS = os.environ.get("RECALLWATCH_REPORT_DIR") or "/opt/recallwatch/reports/latest"
SCHEDULE = os.environ.get("RECALLWATCH_SCHEDULE") or "0 0 * * *"
WRITER = "recallwatch_writer"  # a pool of 1 slot: one process at a time may open the DuckDB file
PARAMS = {key: Param(None, type=["null", "string"], description=f"{key}: ISO date (UTC)")
          for key in ("start", "end")}  # one Param a key: one shared took the last value given


@dag(schedule=CronDataIntervalTimetable(SCHEDULE, timezone="UTC"), catchup=True, start_date=
     first_interval_start(SCHEDULE, os.environ.get("RECALLWATCH_START_DATE") or "2026-10-01"),
     max_active_runs=1, tags=["recallwatch"], params=PARAMS,
     default_args={"owner": "recallwatch", "retries": 2, "retry_delay": timedelta(minutes=5),
                   "on_failure_callback": on_task_failure})
def recallwatch_monitor():
    """Per run, the whole UTC days that ended in its data interval [start, end) (a run in which
    no day ended is skipped): find the logs, gate their quality (a failure fails the run before
    anything is loaded), ingest, score, record quality warnings, aggregate, bring the days
    outside the interval up to date as `run` would (late logs before a rebuild), judge drift,
    report, alert. Each step replaces its days' rows, so any task can be cleared and re-run.
    Params `start` and `end` (ISO dates) win over the interval. See dags/README.md."""

    @task.short_circuit  # no UTC day ended in the interval: nothing to do, the rest is skipped
    def logs(params=None, data_interval_start=None, data_interval_end=None) -> dict | None:
        from airflow.sdk.exceptions import AirflowFailException

        from pipeline import api
        try:  # whole UTC days; no interval, or a param that is no date: no retry can mend it
            days = api.days_ended(params["start"] or data_interval_start,
                                  params["end"] or data_interval_end)
        except api.RecallwatchError as wrong:
            raise AirflowFailException(str(wrong)) from wrong
        if not days and (params["start"] or params["end"]):  # asked for days: none is no success
            raise AirflowFailException(f"no whole UTC day in {params['start']}..{params['end']}")
        return days and {**days, "paths": api.logs_for_interval(LOGS, days["start"], days["end"])}

    @task(pool=WRITER)  # bad data stays bad: a failed gate fails at once; a lock is retried
    def check(run: dict) -> dict:
        from airflow.sdk.exceptions import AirflowFailException

        from pipeline import api, quality
        try:
            return api.check_logs(WAREHOUSE, run["paths"], run["start"], run["end"])
        except quality.QualityGateFailed as failed:
            raise AirflowFailException(str(failed)) from failed

    @task(pool=WRITER)
    def ingest(run: dict) -> dict:
        from pipeline import api
        done = (api.ingest_logs(WAREHOUSE, run["paths"], start=run["start"], end=run["end"])
                if run["paths"] else None)  # an empty day
        return {key: getattr(done, key, 0) for key in ("read", "loaded", "quarantined")}

    @task(pool=WRITER)
    def score(run: dict) -> int:
        from pipeline import api
        return len(api.score(WAREHOUSE, run["start"], run["end"]).windows)

    @task(pool=WRITER)  # matched and quarantined shares: warnings for the report, never a stop
    def quality_warnings(run: dict) -> dict:
        from pipeline import api
        return api.quality_warnings(WAREHOUSE, run["start"], run["end"], paths=run["paths"] or None)

    @task(pool=WRITER)
    def aggregate(run: dict) -> dict:
        from pipeline import api
        return {grain: api.aggregate(WAREHOUSE, run["start"], run["end"], grain=grain).rows
                for grain in api.configure(WAREHOUSE).grains}

    @task(pool=WRITER)  # as `run`: other stale days too (late logs before a rebuild), then
    def drift() -> int | None:  # drift wherever it lags (a retry finds what one left)
        from pipeline import api
        return api.catch_up(WAREHOUSE)["opened"]

    @task(pool=WRITER)  # reads only, but cannot open the file while another process writes it
    def report() -> str:
        from pipeline import api
        return str(api.report(WAREHOUSE, REPORTS))

    @task(pool=WRITER)
    def alert(report_path: str) -> dict:
        from pipeline import api
        return api.alert(WAREHOUSE, report=report_path)

    run, written = logs(), report()
    chain(run, check(run), ingest(run), score(run), quality_warnings(run), aggregate(run),
          drift(), written, alert(written))


recallwatch_monitor()
