"""Tests for pipeline.announce: `announce-rebuild` logs in to Airflow 3 the way its simple auth
manager issues tokens, finds the index-rebuild asset and posts the event whose extra the
backfill DAG reads; failures are one sentence without secrets. A failed task's notice reaches
the alert channels and never raises. The servers are real HTTP servers on loopback: a stand-in
for Airflow's api-server that checks every call the way Airflow 3.3 answers it (checked once
against `airflow api-server` 3.3.2 with the simple auth manager), and a webhook."""

from __future__ import annotations

import json
import re
import socket
import threading
import urllib.parse
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from pipeline import cli
from pipeline.announce import announce_failure, announce_rebuild, on_task_failure
from pipeline.errors import RecallwatchError

PASSWORD = "pw-Ø-s3cret"
TOKEN = "jwt-token-7d1f"
REBUILD = {"id": 7, "name": "recallwatch://index-rebuild", "uri": "recallwatch://index-rebuild/"}
# found by a substring search too, as Airflow's uri_pattern is one
DECOY = {"id": 8, "name": "recallwatch://index-rebuild-old",
         "uri": "recallwatch://index-rebuild-old/"}


class AirflowStandIn(BaseHTTPRequestHandler):
    """POST /auth/token (JSON username/password -> 201 {access_token}), GET /api/v2/assets
    (uri_pattern: a case-insensitive substring), POST /api/v2/assets/events ({asset_id, extra},
    nothing else). Without a valid bearer token the API answers 401 unless the server lets
    everyone in (simple_auth_manager_all_admins)."""

    def _reply(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length)) if length else None

    def _handle(self, method: str) -> None:
        world = self.server.world
        url = urllib.parse.urlsplit(self.path)
        body = self._body()
        world["calls"].append({"method": method, "path": url.path,
                               "query": urllib.parse.parse_qs(url.query), "body": body,
                               "authorization": self.headers.get("Authorization")})
        if (method, url.path) == ("POST", "/auth/token"):
            if self.headers.get("Content-Type") != "application/json" or set(body) != {
                    "username", "password"}:
                return self._reply(422, {"detail": "username and password, as JSON"})
            if world["users"].get(body["username"]) != body["password"]:
                return self._reply(401, {"detail": "Invalid credentials"})
            return self._reply(201, {"access_token": TOKEN})
        if not world["all_admins"] and self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self._reply(401, {"detail": "Not authenticated"})
        if (method, url.path) == ("GET", "/api/v2/assets"):
            pattern = url.query and urllib.parse.parse_qs(url.query)["uri_pattern"][0].lower()
            found = [a for a in world["assets"] if pattern in a["uri"].lower()]
            return self._reply(200, {"assets": found, "total_entries": len(found)})
        if (method, url.path) == ("POST", "/api/v2/assets/events"):
            if set(body) != {"asset_id", "extra"}:
                return self._reply(422, {"detail": "extra fields not permitted"})
            if body["asset_id"] not in {a["id"] for a in world["assets"]}:
                return self._reply(404, {"detail": "Asset not found"})
            return self._reply(200, {"id": 42, "asset_id": body["asset_id"],
                                     "extra": {**body["extra"], "from_rest_api": True},
                                     "timestamp": "2026-10-21T06:00:00Z"})
        if (method, url.path) == ("GET", "/api/v2/assets/events"):   # lists them
            return self._reply(200, {"asset_events": [], "total_entries": 0})
        return self._reply(404, {"detail": "Not Found"})

    def do_GET(self):  # noqa: N802 (http.server's names)
        self._handle("GET")

    def do_POST(self):  # noqa: N802
        self._handle("POST")

    def log_message(self, *args):
        pass


def _serve(handler, world: dict):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.world = world
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    return server


@pytest.fixture
def airflow():
    """The stand-in api-server and what it saw: calls in order."""
    world = {"calls": [], "users": {"admin": PASSWORD}, "all_admins": False,
             "assets": [DECOY, REBUILD]}
    server = _serve(AirflowStandIn, world)
    world["url"] = f"http://127.0.0.1:{server.server_address[1]}"
    yield world
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def no_credentials(monkeypatch):
    for name in ("AIRFLOW_USER", "AIRFLOW_PASSWORD", "RECALLWATCH_AIRFLOW_USER",
                 "RECALLWATCH_AIRFLOW_PASSWORD"):
        monkeypatch.delenv(name, raising=False)


def test_logs_in_finds_the_asset_and_posts_the_rebuild_as_its_extra(airflow, tmp_path,
                                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    event = announce_rebuild(airflow["url"] + "/", "idx-v2", "index/idx-v2.parquet",
                             "2026-10-21", user="admin", password=PASSWORD)

    calls = airflow["calls"]
    assert [(c["method"], c["path"]) for c in calls] == [
        ("POST", "/auth/token"), ("GET", "/api/v2/assets"), ("POST", "/api/v2/assets/events")]
    assert calls[0]["body"] == {"username": "admin", "password": PASSWORD}
    assert calls[0]["authorization"] is None
    assert calls[1]["query"]["uri_pattern"] == ["recallwatch://index-rebuild"]
    assert {c["authorization"] for c in calls[1:]} == {f"Bearer {TOKEN}"}
    # the decoy's URI contains the pattern too: only the exact asset is announced
    extra = {"index_version": "idx-v2", "live_from": "2026-10-21",
             "manifest": str(tmp_path / "index" / "idx-v2.parquet")}  # absolute for workers
    assert calls[2]["body"] == {"asset_id": 7, "extra": extra}
    assert event == {"asset_id": 7, "event_id": 42, "timestamp": "2026-10-21T06:00:00Z",
                     "extra": extra}


def test_live_from_is_sent_as_its_utc_day(airflow):
    announce_rebuild(airflow["url"], "idx-v2", "/data/idx-v2.parquet", "2026-10-21T23:30:00-02:00",
                     user="admin", password=PASSWORD)
    assert airflow["calls"][-1]["body"]["extra"]["live_from"] == "2026-10-22"


def test_without_credentials_no_login_is_attempted(airflow):
    airflow["all_admins"] = True
    announce_rebuild(airflow["url"], "idx-v2", "/data/idx-v2.parquet", "2026-10-21")
    assert [c["path"] for c in airflow["calls"]] == ["/api/v2/assets", "/api/v2/assets/events"]
    assert {c["authorization"] for c in airflow["calls"]} == {None}


def _announce(airflow, *extra: str) -> list[str]:
    return ["announce-rebuild", "--airflow-url", airflow["url"], "--index-version", "idx-v2",
            "--manifest", "/data/idx-v2.parquet", "--live-from", "2026-10-21", *extra]


def test_cli_takes_credentials_from_the_environment_and_never_prints_them(airflow, monkeypatch,
                                                                          capsys):
    monkeypatch.setenv("AIRFLOW_USER", "admin")
    monkeypatch.setenv("AIRFLOW_PASSWORD", PASSWORD)
    code = cli.main(_announce(airflow))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.strip() == (
        "announced index idx-v2 (live from 2026-10-21, manifest /data/idx-v2.parquet): asset "
        "event 42; recallwatch_backfill runs once the scheduler picks it up.")
    assert airflow["calls"][0]["body"] == {"username": "admin", "password": PASSWORD}
    assert PASSWORD not in out + err and TOKEN not in out + err


def test_recallwatch_credentials_win_over_airflow_ones(airflow, monkeypatch):
    monkeypatch.setenv("AIRFLOW_USER", "someone")
    monkeypatch.setenv("AIRFLOW_PASSWORD", "else")
    monkeypatch.setenv("RECALLWATCH_AIRFLOW_USER", "admin")
    monkeypatch.setenv("RECALLWATCH_AIRFLOW_PASSWORD", PASSWORD)
    announce_rebuild(airflow["url"], "idx-v2", "/data/idx-v2.parquet", "2026-10-21")
    assert airflow["calls"][0]["body"] == {"username": "admin", "password": PASSWORD}


def test_wrong_password_is_one_sentence_naming_the_variables(airflow, monkeypatch, capsys):
    monkeypatch.setenv("AIRFLOW_USER", "admin")
    monkeypatch.setenv("AIRFLOW_PASSWORD", "not-" + PASSWORD)
    assert cli.main(_announce(airflow)) == 2
    out, err = capsys.readouterr()
    assert err == (f"recallwatch: error: Airflow at {airflow['url']} answered POST /auth/token "
                   "with HTTP 401: the user or password is wrong; set AIRFLOW_USER and "
                   "AIRFLOW_PASSWORD (or RECALLWATCH_AIRFLOW_USER/_PASSWORD).\n")
    assert PASSWORD not in out + err
    assert [c["path"] for c in airflow["calls"]] == ["/auth/token"]


def test_a_login_required_but_not_given_says_which_variables_to_set(airflow):
    with pytest.raises(RecallwatchError, match=r"GET /api/v2/assets with HTTP 401: it needs a "
                                               r"login; set AIRFLOW_USER and AIRFLOW_PASSWORD"):
        announce_rebuild(airflow["url"], "idx-v2", "/data/idx-v2.parquet", "2026-10-21")


def test_unknown_asset_says_to_deploy_the_backfill_dag_and_posts_nothing(airflow):
    airflow["assets"] = [DECOY]
    with pytest.raises(RecallwatchError, match="knows no asset recallwatch://index-rebuild: "
                                               "deploy the recallwatch_backfill DAG"):
        announce_rebuild(airflow["url"], "idx-v2", "/data/idx-v2.parquet", "2026-10-21",
                         user="admin", password=PASSWORD)
    assert [c["method"] for c in airflow["calls"]] == ["POST", "GET"]


class Redirect(BaseHTTPRequestHandler):
    """A front (an ingress sending http:// to https://, a moved host) answering every request
    301 to the same path on world["target"]."""

    def _moved(self):
        self.send_response(301)
        self.send_header("Location", self.server.world["target"] + self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _moved  # noqa: N815 (http.server's names)

    def log_message(self, *args):
        pass


def test_an_airflow_url_that_redirects_is_one_sentence_never_an_announcement_made(airflow,
                                                                                   capsys):
    # urllib followed the 301 of the POST as a GET: the event list came back, and the command
    # said "announced ... asset event None" with exit 0 while no event was made (no backfill)
    airflow["all_admins"] = True
    front = _serve(Redirect, {"target": airflow["url"]})
    url = f"http://127.0.0.1:{front.server_address[1]}"
    try:
        code = cli.main(_announce({**airflow, "url": url}))
    finally:
        front.shutdown()
        front.server_close()
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == (f"recallwatch: error: Airflow at {url} answered GET /api/v2/assets with HTTP "
                   "301: it redirects elsewhere (e.g. to https://); give --airflow-url as the "
                   "address it redirects to.\n")
    assert airflow["calls"] == []


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_unreachable_airflow_is_one_sentence():
    url = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(RecallwatchError) as caught:
        announce_rebuild(url, "idx-v2", "/data/idx-v2.parquet", "2026-10-21")
    assert str(caught.value) == (f"cannot reach Airflow at {url} (Connection refused): check "
                                 "--airflow-url and that its api-server is running.")


class OtherService(BaseHTTPRequestHandler):
    """A server that is not Airflow's api-server: it answers every request 200 with the JSON
    body it was given."""

    def _answer(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        data = self.server.world["body"].encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("body, user, endpoint", [
    ("{}", "admin", "POST /auth/token"), ("[]", None, "GET /api/v2/assets"),
    ('"hello"', None, "GET /api/v2/assets"), ('{"assets": [1]}', None, "GET /api/v2/assets"),
    ('{"assets": {}}', None, "GET /api/v2/assets")])
def test_an_answer_of_another_shape_is_one_sentence_not_an_internal_error(body, user, endpoint):
    # --airflow-url at a proxy or another service answering JSON of another shape ended in
    # "internal error: KeyError: 'access_token'" (exit 1)
    server = _serve(OtherService, {"body": body})
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(RecallwatchError) as caught:
            announce_rebuild(url, "idx-v2", "/data/idx-v2.parquet", "2026-10-21", user=user,
                             password="hunter2" if user else None)
    finally:
        server.shutdown()
        server.server_close()
    assert str(caught.value) == (f"Airflow at {url} answered {endpoint} with JSON that is not "
                                 "the api-server's answer: is --airflow-url the api-server's "
                                 "address?")


@pytest.mark.parametrize(("url", "user", "password", "live_from", "message"), [
    ("http://admin:hunter2@127.0.0.1:1", None, None, "2026-10-21",
     "--airflow-url must be the api-server's http(s) URL without a user or password"),
    ("http://:hunter2@127.0.0.1:1", None, None, "2026-10-21",   # a password alone
     "--airflow-url must be the api-server's http(s) URL without a user or password"),
    ("http://@127.0.0.1:1", None, None, "2026-10-21",
     "--airflow-url must be the api-server's http(s) URL without a user or password"),
    ("airflow:8080", None, None, "2026-10-21", "--airflow-url must be the api-server's"),
    # these ended in an internal error (http.client's InvalidURL, urllib's ValueError)
    ("http://127.0.0.1:abc", None, None, "2026-10-21", "--airflow-url must be the api-server's"),
    ("http://[::1", None, None, "2026-10-21", "--airflow-url must be the api-server's"),
    ("http://airflow host:8080", None, None, "2026-10-21",
     "--airflow-url must be the api-server's"),
    ("http://127.0.0.1:1", "admin", None, "2026-10-21",
     "a user and a password are needed together"),
    ("http://127.0.0.1:1", None, None, "next tuesday", "--live-from 'next tuesday' is not an ISO"),
])
def test_bad_arguments_are_refused_before_any_call(url, user, password, live_from, message):
    with pytest.raises(RecallwatchError, match=re.escape(message)) as caught:
        announce_rebuild(url, "idx-v2", "/data/idx-v2.parquet", live_from, user=user,
                         password=password)
    assert "hunter2" not in str(caught.value)


# --------------------------------------------------------------------------- failed tasks

class Webhook(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.world["received"].append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def webhook():
    world = {"received": []}
    server = _serve(Webhook, world)
    world["env"] = {"RECALLWATCH_WEBHOOK_URL": f"http://127.0.0.1:{server.server_address[1]}/"}
    yield world
    server.shutdown()
    server.server_close()


def test_failure_notice_names_task_dag_interval_run_and_error(webhook):
    start, end = datetime(2026, 10, 2, tzinfo=UTC), datetime(2026, 10, 3, tzinfo=UTC)
    sent = announce_failure("recallwatch_monitor", "check", start, end, run_id="scheduled__1",
                            error=ValueError("quality gate failed\nfor 2026-10-02..2026-10-03"),
                            environ=webhook["env"])
    assert sent == 1
    (notice,) = webhook["received"]
    assert notice["event"] == "task_failed"
    assert notice["title"] == "recallwatch: task check of DAG recallwatch_monitor failed"
    assert notice["text"] == (
        "task check of DAG recallwatch_monitor failed for interval [2026-10-02T00:00:00+00:00, "
        "2026-10-03T00:00:00+00:00) (run scheduled__1): quality gate failed for "
        "2026-10-02..2026-10-03")
    assert (notice["dag_id"], notice["task_id"], notice["run_id"]) == (
        "recallwatch_monitor", "check", "scheduled__1")
    assert (notice["interval_start"], notice["interval_end"]) == (
        "2026-10-02T00:00:00+00:00", "2026-10-03T00:00:00+00:00")


def test_callback_reads_the_task_context_and_says_when_a_run_has_no_interval(webhook,
                                                                          monkeypatch):
    for name, value in webhook["env"].items():
        monkeypatch.setenv(name, value)
    task_instance = SimpleNamespace(dag_id="recallwatch_backfill", task_id="rebuild",
                                    run_id="asset_triggered__x")
    on_task_failure({"task_instance": task_instance, "exception": RuntimeError("disk full")})
    (notice,) = webhook["received"]
    assert notice["text"] == ("task rebuild of DAG recallwatch_backfill failed for a run "
                              "without a data interval (run asset_triggered__x): disk full")


@pytest.mark.parametrize("environ", [
    {},                                                         # no channel configured
    {"RECALLWATCH_WEBHOOK_URL": "not a url"},                   # a bad setting
    {"RECALLWATCH_SMTP_HOST": "localhost"},                     # an incomplete channel
])
def test_failure_notice_never_raises_on_a_missing_or_bad_channel(environ, caplog):
    assert announce_failure("recallwatch_monitor", "score", environ=environ) == 0
    assert "not a url" not in caplog.text


def test_failure_notice_never_raises_when_the_channel_is_down():
    environ = {"RECALLWATCH_WEBHOOK_URL": f"http://127.0.0.1:{_closed_port()}/hook"}
    assert announce_failure("recallwatch_monitor", "score", environ=environ, timeout=2) == 0


def test_callback_never_raises_on_a_context_without_a_task_instance():
    assert on_task_failure({}) is None


def test_a_host_name_that_cannot_be_looked_up_is_not_called_an_answer_other_than_json():
    # the host name's empty label failed in the request (idna), which was reported as Airflow
    # answering "with something other than JSON"; it is refused before any call now
    with pytest.raises(RecallwatchError) as caught:
        announce_rebuild("http://a..b:8080", "idx-v2", "/data/idx-v2.parquet", "2026-10-21")
    assert str(caught.value).startswith("--airflow-url must be the api-server's http(s) URL")


def test_the_cli_says_a_bad_airflow_url_in_one_sentence_with_exit_2(capsys):
    code = cli.main(["announce-rebuild", "--airflow-url", "http://127.0.0.1:abc",
                     "--index-version", "idx-v2", "--manifest", "/data/m.parquet",
                     "--live-from", "2026-10-21"])
    err = capsys.readouterr().err
    assert code == 2 and "internal error" not in err
    assert err.startswith("recallwatch: error: --airflow-url must be the api-server's")
