"""Announcements from recallwatch that are not drift alerts: an index rebuild announced to
Airflow, and a failed scheduled task announced on the alert channels.

`announce_rebuild` creates an asset event for `recallwatch://index-rebuild` through Airflow 3's
public REST API (a JWT from the simple auth manager's `POST /auth/token`, the asset looked up
by URI, then `POST /api/v2/assets/events`); the event's extra carries index_version, manifest
and live_from, and the recallwatch_backfill DAG, scheduled on that asset, runs with them.
`announce_failure` (and `on_task_failure`, the DAGs' failure callback) tells whoever watches
the watcher: a short message on the alert channels of the environment; it never raises. Neither
imports Airflow; passwords and tokens are read from the environment and never printed."""

from __future__ import annotations

import http.client
import json
import logging
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from pipeline.endpoints import http_endpoint
from pipeline.errors import RecallwatchError

log = logging.getLogger(__name__)

REBUILD_ASSET = "recallwatch://index-rebuild"
CREDENTIALS = (("RECALLWATCH_AIRFLOW_USER", "RECALLWATCH_AIRFLOW_PASSWORD"),
               ("AIRFLOW_USER", "AIRFLOW_PASSWORD"))
_SET_CREDENTIALS = "set AIRFLOW_USER and AIRFLOW_PASSWORD (or RECALLWATCH_AIRFLOW_USER/_PASSWORD)"


def utc_start(text: str) -> datetime:
    """A DAG's start date from ISO text, in UTC when it names no offset: a naive datetime is
    read in Airflow's default time zone, and a UTC day cron from a local midnight west of UTC
    begins on the next day."""
    start = datetime.fromisoformat(text)
    return start.replace(tzinfo=UTC) if start.tzinfo is None else start.astimezone(UTC)


def first_interval_start(schedule: str, text: str) -> datetime:
    """The monitor's start date for a UTC cron `schedule` and the first day of logs `text`
    (utc_start): Airflow begins the first data interval at the first cron time at or after the
    start date, and a run does the UTC days that ended in its interval, so when that time falls
    on a later day (a weekly or monthly schedule, `0 0 * * 1` from a Thursday) the days before
    it were never read. Then the start goes back to the cron time before it, whose interval
    holds the start date; otherwise it stays as it is."""
    from croniter import croniter  # installed with Airflow, the only caller

    start = utc_start(text)
    naive = start.replace(tzinfo=None)
    first = croniter(schedule, naive - timedelta(seconds=1)).get_next(datetime)
    if first.date() == naive.date():   # that day ends inside the first interval
        return start
    return croniter(schedule, naive + timedelta(seconds=1)).get_prev(datetime).replace(tzinfo=UTC)


# --------------------------------------------------------------------------- index rebuilds

def credentials(environ: Mapping[str, str] = os.environ) -> tuple[str | None, str | None]:
    """(user, password) from RECALLWATCH_AIRFLOW_USER/_PASSWORD, else AIRFLOW_USER/_PASSWORD;
    (None, None) when neither pair is set (an Airflow that lets everyone in needs no login)."""
    for user_var, password_var in CREDENTIALS:
        if environ.get(user_var) or environ.get(password_var):
            return environ.get(user_var) or None, environ.get(password_var) or None
    return None, None


def announce_rebuild(airflow_url: str, index_version: str, manifest: str, live_from, *,
                     user: str | None = None, password: str | None = None,
                     timeout: float = 10) -> dict:
    """Tell Airflow that index `index_version` (its chunk manifest at `manifest`, a path the
    Airflow workers can read) serves requests from the day `live_from` on. Returns the asset
    event Airflow created: {"asset_id", "event_id", "timestamp", "extra"}. A user or password
    not given comes from the environment (see `credentials`)."""
    from pipeline.api import instant

    base = airflow_url.strip().rstrip("/")
    try:
        parts = urllib.parse.urlsplit(base)
    except ValueError:   # an unclosed IPv6 bracket
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname \
            or "@" in parts.netloc:
        # not echoed: a URL with user:password@ in it holds a secret
        raise RecallwatchError("--airflow-url must be the api-server's http(s) URL without a "
                               "user or password in it, e.g. http://airflow:8080; for a login, "
                               + _SET_CREDENTIALS + ".")
    if (http_endpoint(base) is None or not base.isascii()
            or re.search(r"[\s\x00-\x1f\x7f]", base)):
        # a port that is no number, a space or a control character: http.client refuses it
        raise RecallwatchError("--airflow-url must be the api-server's http(s) URL: a host name "
                               "and, if any, a port number from 1 to 65535, of printable ASCII "
                               "(a host name of other letters in its xn-- form, other "
                               "characters percent-encoded), e.g. http://airflow:8080.")
    if not index_version.strip():
        raise RecallwatchError("--index-version must name the new index, e.g. idx-2026-11-02.")
    if not str(manifest).strip():
        raise RecallwatchError("--manifest must give the path of the new index's manifest.")
    day = instant(live_from, "--live-from")
    if user is None and password is None:
        user, password = credentials()
    if bool(user) != bool(password):
        raise RecallwatchError(f"a user and a password are needed together to log in to Airflow: "
                               f"{_SET_CREDENTIALS}.")
    extra = {"index_version": index_version, "manifest": _absolute(str(manifest)),
             "live_from": day.date().isoformat()}

    headers = {}
    if user:
        login = _call(base, "POST", "/auth/token", {"username": user, "password": password},
                      {}, timeout, needs="access_token")
        headers["Authorization"] = f"Bearer {login['access_token']}"
    query = urllib.parse.urlencode({"uri_pattern": REBUILD_ASSET, "limit": 100})
    found = _call(base, "GET", f"/api/v2/assets?{query}", None, headers, timeout,
                  needs="assets")
    assets = found["assets"]
    if not isinstance(assets, list) or not all(isinstance(a, dict) and "id" in a
                                               for a in assets):
        raise _not_its_answer(base, "GET", "/api/v2/assets")
    ids = [a["id"] for a in assets
           if REBUILD_ASSET.rstrip("/") in (a.get("name"), str(a.get("uri", "")).rstrip("/"))]
    if not ids:
        raise RecallwatchError(f"Airflow at {base} knows no asset {REBUILD_ASSET}: deploy the "
                               "recallwatch_backfill DAG (its schedule declares the asset) and "
                               "let the dag-processor parse it, then announce again.")
    event = _call(base, "POST", "/api/v2/assets/events", {"asset_id": ids[0], "extra": extra},
                  headers, timeout, needs="id")
    return {"asset_id": ids[0], "event_id": event.get("id"),
            "timestamp": event.get("timestamp"), "extra": extra}


def _absolute(manifest: str) -> str:
    """A local relative path means nothing to an Airflow worker: make it absolute. URLs and
    absolute paths stay as given."""
    if "://" in manifest or os.path.isabs(manifest):
        return manifest
    return os.path.abspath(manifest)


_ADVICE = {
    ("/auth/token", 401): "the user or password is wrong; " + _SET_CREDENTIALS,
    ("/auth/token", 404): "it has no token endpoint, so its auth manager is not the simple auth "
                          "manager this command logs in with",
    ("/api/v2/assets", 401): "it needs a login; " + _SET_CREDENTIALS,
    ("/api/v2/assets", 403): "the user may not read assets; give it a role that may",
    ("/api/v2/assets/events", 401): "it needs a login; " + _SET_CREDENTIALS,
    ("/api/v2/assets/events", 403): "the user may not create asset events; give it a role "
                                    "that may",
}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirected POST would arrive as a GET without its body (the event list, taken for the
    event made): a redirect is an answer of its own, named in the error."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _not_its_answer(base: str, method: str, endpoint: str) -> RecallwatchError:
    return RecallwatchError(f"Airflow at {base} answered {method} {endpoint} with JSON that is "
                            "not the api-server's answer: is --airflow-url the api-server's "
                            "address?")


def _call(base: str, method: str, path: str, body: dict | None, headers: dict[str, str],
          timeout: float, needs: str | None = None) -> dict:
    """One JSON request whose answer is an object (holding the key `needs`); any failure
    becomes one RecallwatchError sentence that holds no password or token."""
    request = urllib.request.Request(
        base + path, method=method,
        data=None if body is None else json.dumps(body).encode("utf-8"),
        headers={"Accept": "application/json", "User-Agent": "recallwatch", **headers,
                 **({"Content-Type": "application/json"} if body is not None else {})})
    endpoint = path.split("?")[0]
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            raw = response.read()
    except urllib.error.HTTPError as exc:
        exc.close()
        advice = _ADVICE.get((endpoint, exc.code),
                             "check --airflow-url and the api-server's log")
        if 300 <= exc.code < 400:   # not followed: a POST would go on as a GET
            advice = ("it redirects elsewhere (e.g. to https://); give --airflow-url as the "
                      "address it redirects to")
        raise RecallwatchError(f"Airflow at {base} answered {method} {endpoint} with HTTP "
                               f"{exc.code}: {advice}.") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        reason = getattr(reason, "strerror", None) or reason   # "Connection refused"
        raise RecallwatchError(f"cannot reach Airflow at {base} ({reason}): check --airflow-url "
                               "and that its api-server is running.") from None
    except (UnicodeError, http.client.InvalidURL):   # e.g. a host name with an empty label
        raise RecallwatchError(f"cannot reach Airflow at {base} (its host name is not a valid "
                               "one): check --airflow-url.") from None
    try:   # apart from the request: a bad host name is no answer "other than JSON"
        answer = json.loads(raw or b"{}")
    except ValueError:
        raise RecallwatchError(f"Airflow at {base} answered {method} {endpoint} with something "
                               "other than JSON: is --airflow-url the api-server's address?"
                               ) from None
    if not isinstance(answer, dict) or (needs is not None and needs not in answer):
        raise _not_its_answer(base, method, endpoint)
    return answer


# --------------------------------------------------------------------------- failed tasks

def announce_failure(dag_id: str, task_id: str, start=None, end=None, *,
                     error: BaseException | str | None = None, run_id: str | None = None,
                     environ: Mapping[str, str] = os.environ, now: datetime | None = None,
                     timeout: float = 10) -> int:
    """Send "task X of DAG Y failed for interval [start, end)" on every alert channel the
    environment configures (pipeline.alerts), each tried twice. Never raises: this runs in a
    failure callback, and a broken channel must not hide the failure it reports. Returns how
    many channels took the message."""
    try:
        from pipeline.alerts import channels_from_env, one_line, send_notice

        channels = channels_from_env(environ)
        interval = (f"interval [{_text(start)}, {_text(end)})" if start or end
                    else "a run without a data interval")
        title = f"recallwatch: task {task_id} of DAG {dag_id} failed"
        text = f"task {task_id} of DAG {dag_id} failed for {interval}"
        text += f" (run {run_id})" if run_id else ""
        text += f": {one_line(str(error), 300)}" if error else "."
        failures = send_notice(
            channels, title, text, now=now or datetime.now(UTC), event="task_failed",
            timeout=timeout,
            fields={"dag_id": dag_id, "task_id": task_id, "run_id": run_id,
                    "interval_start": _text(start), "interval_end": _text(end)})
        for name, failure in failures.items():
            if failure:
                log.warning("failure notice via %s not delivered: %s", name, failure)
        delivered = sum(failure is None for failure in failures.values())
        if not channels:
            log.warning("%s; no alert channel is configured to tell anyone", text)
        return delivered
    except Exception as exc:  # the callback must not raise; the task's failure stands
        # a RecallwatchError names a bad setting, never its value; anything else: its type only
        why = exc if isinstance(exc, RecallwatchError) else type(exc).__name__
        log.warning("failure notice not sent: %s", why)
        return 0


def on_task_failure(context: Mapping) -> None:
    """An Airflow task's on_failure_callback: announce_failure with the plain values of the
    task's context (a mapping read with .get(); nothing of Airflow is imported). Never raises."""
    try:
        ti = context.get("task_instance")
        params = context.get("params") or {}
        given = (params.get("start"), params.get("end"))   # the days asked for win, as in the DAG
        announce_failure(getattr(ti, "dag_id", "?"), getattr(ti, "task_id", "?"),
                         *(given if any(given) else (context.get("data_interval_start"),
                                                     context.get("data_interval_end"))),
                         error=context.get("exception"), run_id=getattr(ti, "run_id", None))
    except Exception as exc:
        log.warning("failure notice not sent: %s", type(exc).__name__)


def _text(value) -> str | None:
    return None if value is None else (value.isoformat() if hasattr(value, "isoformat")
                                       else str(value))
