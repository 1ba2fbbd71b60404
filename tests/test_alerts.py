"""Alerts over real loopback servers: an HTTP server (generic webhook and Slack) and an SMTP
server (aiosmtpd), a DuckDB warehouse with drift_events written by hand, replayed day by day."""

from __future__ import annotations

import email
import email.policy
import hashlib
import hmac
import json
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult
from conftest import graded_world, write_jsonl

from pipeline import api, cli
from pipeline.alerts import (
    NO_CHANNELS,
    Channel,
    channels_from_env,
    channels_from_file,
    email_message,
    printable,
    send_alerts,
    send_test,
)
from pipeline.config import Config
from pipeline.errors import RecallwatchError
from pipeline.warehouse import connect, run_script

CONFIG = Config(cutoffs=(1, 5, 10), gold_version="g1")   # alerts on mean_recall@10
DAY_ONE = datetime(2026, 11, 1)
REPORT = "https://reports.example.com/recallwatch/latest/index.html"
OPENED_DAY, RESOLVED_DAY = 8, 15
SENDER, RECIPIENT = "recallwatch@example.com", "oncall@example.com"


# ---------------------------------------------------------------------------------- servers

@dataclass
class Received:
    method: str
    path: str
    headers: dict
    body: bytes


class _Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        server = self.server
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with server.lock:
            server.received.append(Received("POST", self.path, dict(self.headers), body))
            failing = server.fail_next > 0
            server.fail_next -= failing
        self.send_response(503 if failing else 200)
        if server.trickle and not failing:   # a 200 whose body comes a byte at a time
            self.send_header("Content-Length", str(server.trickle))
            self.end_headers()
            try:
                for _ in range(server.trickle):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    server.trickled += 1
                    time.sleep(0.25)
            except OSError:   # the client went away
                pass
            server.trickle_over.set()
            return
        if server.cut_answer and not failing:   # a 200 whose body never arrives whole
            self.send_header("Content-Length", "20")
            self.end_headers()
            self.wfile.write(b"ok")
            self.close_connection = True
            return
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass  # http.server would write each request line, token-bearing path included


class HookServer:
    """A real HTTP server on loopback recording every request; `fail_next` answers 503."""

    def __init__(self):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
        self.server.received, self.server.fail_next = [], 0
        self.server.cut_answer = False
        self.server.trickle, self.server.trickled = 0, 0
        self.server.trickle_over = threading.Event()
        self.server.lock = threading.Lock()
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_port}{path}"

    @property
    def received(self) -> list[Received]:
        return self.server.received

    def fail(self, n: int) -> None:
        self.server.fail_next = n

    def on(self, path: str) -> list[Received]:
        return [r for r in self.received if r.path == path]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    server = HookServer()
    yield server
    server.stop()


@dataclass
class Mailbox:
    messages: list = field(default_factory=list)
    logins: list = field(default_factory=list)
    refuse: set = field(default_factory=set)   # recipients the server answers 550
    quit_reply: str = "221 Bye"   # the answer to QUIT, after the mail was taken
    delivered_to: list = field(default_factory=list)   # each mail's envelope recipients
    over_tls: list = field(default_factory=list)   # per mail: whether its session was TLS

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address in self.refuse:
            return "550 5.1.1 no such mailbox"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.over_tls.append(server.transport.get_extra_info("ssl_object") is not None)
        self.delivered_to.append(sorted(envelope.rcpt_tos))
        self.messages.append(email.message_from_bytes(envelope.content,
                                                      policy=email.policy.default))
        return "250 OK"

    async def handle_QUIT(self, server, session, envelope):
        return self.quit_reply

    def authenticate(self, server, session, envelope, mechanism, auth_data):
        self.logins.append((auth_data.login.decode(), auth_data.password.decode()))
        return AuthResult(success=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def smtp():
    """A real SMTP server on loopback (aiosmtpd) accepting any login without TLS."""
    box = Mailbox()
    controller = Controller(box, hostname="127.0.0.1", port=_free_port(),
                            authenticator=box.authenticate, auth_require_tls=False)
    controller.start()
    box.port = controller.port
    yield box
    controller.stop()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 (its key beside it), trusted by the client
    through SSL_CERT_FILE, as an organization's own CA would be."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now()
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(days=1)).not_valid_after(now + timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    folder = tmp_path_factory.mktemp("tls")
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return folder / "cert.pem", folder / "key.pem"


def _tls_mailbox(certificate, monkeypatch, **server_options):
    import ssl

    cert, key = certificate
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    box = Mailbox()
    # aiosmtpd offers AUTH only after its own STARTTLS unless told not to require it: a
    # session that is TLS from the first byte is TLS all the same (Mailbox.over_tls)
    options = ({"ssl_context": context, "auth_require_tls": False}
               if server_options.pop("implicit")
               else {"tls_context": context, "require_starttls": True})
    controller = Controller(box, hostname="127.0.0.1", port=_free_port(),
                            authenticator=box.authenticate, **options, **server_options)
    controller.start()
    box.port = controller.port
    return box, controller


# ---------------------------------------------------------------------------------- warehouse

def day(number: int) -> datetime:
    return DAY_ONE + timedelta(days=number - 1)


def insert_drift(con, number: int, *, state: str, decision: str, episode: str | None = None,
                 metric: str = "mean_recall", k: int = 10, value: float = 0.80,
                 delta: float = 0.0, slice_: str = "all", n: int = 412,
                 gold: str = "g1") -> None:
    con.execute(
        """INSERT INTO drift_events (window_start, window_end, grain, slice, route, k,
               gold_version, metric, index_version, change_point, n, baseline_start,
               baseline_end, baseline_n, value, baseline_value, delta, delta_low, delta_high,
               margin, method, evidence, decision, state, episode_id, built_with)
           VALUES ($start, $end, 'day', $slice, 'ids', $k, $gold, $metric, 'idx-1', false, $n,
               $b_start, $b_end, 2884, $value, 0.8, $delta, $delta - 0.04, $delta + 0.04, 0.05,
               'anytime', 25.0, $decision, $state, $episode, 'test')""",
        {"start": day(number), "end": day(number + 1), "slice": slice_, "k": k,
         "metric": metric, "n": n, "b_start": day(1), "b_end": day(8), "value": value,
         "delta": delta, "decision": decision, "state": state, "episode": episode,
         "gold": gold})
    con.execute(
        """INSERT INTO window_metrics (window_start, window_end, grain, slice, route, k,
               gold_version, n, n_sessions, mean_recall, ci_low, ci_high, pass_mark, n_excluded)
           VALUES ($start, $end, 'day', $slice, 'ids', $k, $gold, $n, $n, $value, $value - 0.03,
               $value + 0.03, 0.7, 0)""",
        {"start": day(number), "end": day(number + 1), "slice": slice_, "k": k, "n": n,
         "value": value, "gold": gold})


def insert_replay_day(con, number: int, episode: str = "ep-all-1", **kwargs) -> None:
    """One day of a 30-day replay: baseline days, an episode opened on day 8, ongoing to day
    14 and resolved on day 15, stable after."""
    if number < OPENED_DAY:
        insert_drift(con, number, state="none", decision="baseline", **kwargs)
    elif number < RESOLVED_DAY:
        insert_drift(con, number, state="opened" if number == OPENED_DAY else "ongoing",
                     decision="drop", episode=episode, value=0.62, delta=-0.18, **kwargs)
    elif number == RESOLVED_DAY:
        insert_drift(con, number, state="resolved", decision="stable", episode=episode,
                     value=0.79, delta=-0.01, **kwargs)
    else:
        insert_drift(con, number, state="none", decision="stable", value=0.81, delta=0.01,
                     **kwargs)


def void_from(con, number: int) -> None:
    """The drift and metrics rows from day `number` on gone, as re-aggregating voids them
    before the drift step judges those days again."""
    con.execute("DELETE FROM drift_events WHERE window_start >= $d", {"d": day(number)})
    con.execute("DELETE FROM window_metrics WHERE window_start >= $d", {"d": day(number)})


def set_up(con, channels) -> None:
    """The channels set up before the replay's first day: everything after is news to them."""
    send_alerts(con, CONFIG, channels, now=day(1), backoff=0.01)


def paged_replay(con, channels, last: int) -> None:
    """Days 1 to `last` of the replay, their messages sent (the channels set up before)."""
    set_up(con, channels)
    for number in range(1, last + 1):
        insert_replay_day(con, number)
    send_alerts(con, CONFIG, channels, now=morning_after(last), backoff=0.01)


def paged_then_judged_again(con, channels, **day_8_on) -> None:
    """Days 1-10 of the replay, the drop of day 8 sent; then days 8-10 judged again (after
    late logs, say) as `day_8_on` says, no episode in them."""
    for number in range(1, 11):
        insert_replay_day(con, number)
    send_alerts(con, CONFIG, channels, now=morning_after(10), backoff=0.01)
    void_from(con, 8)
    for number in range(8, 11):
        insert_drift(con, number, state="none", **day_8_on)


def rows(con, table: str) -> list[tuple]:
    return sorted(con.execute(f'SELECT * FROM "{table}"').fetchall(), key=repr)


def morning_after(number: int) -> datetime:
    return day(number + 1) + timedelta(hours=6)


@pytest.fixture
def warehouse(tmp_path):
    con = connect(tmp_path / "w.duckdb")
    yield con
    con.close()


def channels_for(hook: HookServer, smtp: Mailbox) -> list[Channel]:
    return [Channel("webhook", url=hook.url("/hook/ab12"), secret="hook-signing-key"),
            Channel("slack", url=hook.url("/services/T0/B0/xyz")),
            Channel("email", host="127.0.0.1", port=smtp.port, sender=SENDER,
                    recipients=(RECIPIENT,))]


# ---------------------------------------------------------------------------------- delivery

def test_a_resolution_by_a_rebaseline_says_so_not_that_recall_is_back(warehouse, hook, smtp):
    # a re-baseline on day 15 ends the episode with recall still down: the message said the
    # difference lay within the margin, where none was measured
    channels = channels_for(hook, smtp)
    for number in range(1, 16):
        if number == RESOLVED_DAY:
            insert_drift(warehouse, number, state="resolved", decision="baseline",
                         episode="ep-all-1", value=0.62, delta=-0.18)
        else:
            insert_replay_day(warehouse, number)
        send_alerts(warehouse, CONFIG, channels, report=REPORT, now=morning_after(number),
                    backoff=0.01)
    opened, resolved = (json.loads(r.body) for r in hook.on("/hook/ab12"))
    assert resolved["event"] == "resolved"
    assert "resolved: the slice was re-baselined from this day" in resolved["text"]
    assert "lies within the margin" not in resolved["text"]


def test_a_30_day_replay_sends_one_opened_and_one_resolved_message_per_channel(
        warehouse, hook, smtp):
    channels = channels_for(hook, smtp)
    for number in range(1, 31):
        insert_replay_day(warehouse, number)
        send_alerts(warehouse, CONFIG, channels, report=REPORT, now=morning_after(number),
                    backoff=0.01)

    webhook = [json.loads(r.body) for r in hook.on("/hook/ab12")]
    slack = [json.loads(r.body) for r in hook.on("/services/T0/B0/xyz")]
    assert [m["event"] for m in webhook] == ["opened", "resolved"]
    assert len(slack) == 2 and len(smtp.messages) == 2
    assert [m["window_start"][:10] for m in webhook] == ["2026-11-08", "2026-11-15"]
    # what ends an episode: the day, or the days back pooled (a small slice's day alone may
    # still reach past the margin)
    assert "resolved: the difference of this day, or of the days back" in webhook[1]["text"]
    assert "resolved: the difference" not in webhook[0]["text"]

    opened = webhook[0]
    assert opened["episode_id"] == "ep-all-1"
    assert opened["title"] == ("recallwatch: mean_recall@10 drop opened on slice all "
                               "(route ids, gold g1)")
    assert (opened["value"], opened["value_low"], opened["value_high"]) == \
        pytest.approx((0.62, 0.59, 0.65))
    assert (opened["delta"], opened["delta_low"], opened["delta_high"]) == \
        pytest.approx((-0.18, -0.22, -0.14))
    assert (opened["baseline_value"], opened["margin"], opened["k"], opened["n"]) == \
        (0.8, 0.05, 10, 412)
    assert (opened["route"], opened["gold_version"], opened["method"], opened["report"]) == \
        ("ids", "g1", "anytime", REPORT)
    text = opened["text"]
    for quoted in ("value: 0.620 (95% interval 0.590 to 0.650)", "baseline: 0.800",
                   "-0.180 (interval -0.220 to -0.140)", "margin δ 0.050", "k 10", "route ids",
                   "gold version g1", "n 412", f"report: {REPORT}", "day 2026-11-08",
                   "method anytime"):
        assert quoted in text
    assert webhook[1]["title"].startswith("recallwatch: mean_recall@10 drop resolved")
    assert "decision on this day: stable" in webhook[1]["text"]
    assert "baseline: 0.800 (days 2026-11-01 to 2026-11-07, n 2884)" in text

    for request in hook.on("/hook/ab12"):
        expected = hmac.new(b"hook-signing-key", request.body, hashlib.sha256).hexdigest()
        assert request.headers["X-Recallwatch-Signature"] == f"sha256={expected}"
        assert request.headers["Content-Type"] == "application/json"
    for request in hook.on("/services/T0/B0/xyz"):
        assert "X-Recallwatch-Signature" not in request.headers

    assert slack[0]["text"] == opened["title"]
    block = slack[0]["blocks"][0]
    assert block["type"] == "section" and block["text"]["type"] == "mrkdwn"
    assert opened["title"] in block["text"]["text"]
    assert "-0.180 (interval -0.220 to -0.140)" in block["text"]["text"]

    mail = smtp.messages[0]
    assert mail["Subject"] == opened["title"]   # unfolded: no space in front
    assert (mail["From"], mail["To"]) == (SENDER, RECIPIENT)
    body = mail.get_content()
    assert "value: 0.620 (95% interval 0.590 to 0.650)" in body and REPORT in body
    assert smtp.messages[1]["Subject"] == webhook[1]["title"]

    recorded = warehouse.execute(
        "SELECT channel, event, status, attempts, last_error, first_tried, last_tried, slice, "
        "metric, window_start FROM alerts ORDER BY window_start, channel").fetchall()
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in recorded] == [
        (c, e, "sent", 1, None) for e in ("opened", "resolved")
        for c in ("email", "slack", "webhook")]
    assert {(r[5], r[6]) for r in recorded[:3]} == {(morning_after(8), morning_after(8))}
    assert {r[9] for r in recorded[3:]} == {day(15)}


def test_a_channel_set_up_on_a_history_pages_only_the_episode_still_open(warehouse, hook):
    # a year of logs backfilled, then a channel configured: the drops that opened and resolved
    # before are recorded, not paged; the one going on now is paged, and resolves as news
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    for number in range(1, 31):
        insert_replay_day(warehouse, number)                      # ep-all-1: days 8-14
    for number in range(31, 36):
        insert_drift(warehouse, number, state="opened" if number == 33 else
                     "ongoing" if number > 33 else "none",
                     decision="drop" if number >= 33 else "stable",
                     episode="ep-all-2" if number >= 33 else None, value=0.6, delta=-0.2)

    dry = send_alerts(warehouse, CONFIG, channels, dry_run=True, now=morning_after(35))
    assert ([(d.message.episode_id, d.message.event) for d in dry.would_send], dry.past) == \
        ([("ep-all-2", "opened")], 2)
    assert rows(warehouse, "alerts") == rows(warehouse, "alert_channels") == []
    first = send_alerts(warehouse, CONFIG, channels, now=morning_after(35), backoff=0.01)

    assert events_sent(hook) == [("opened", "drop", "ep-all-2", "2026-12-03")]
    assert (first.sent, first.failed, first.past) == (1, 0, 2)
    assert warehouse.execute(
        "SELECT episode_id, event, status, attempts FROM alerts ORDER BY window_start"
    ).fetchall() == [("ep-all-1", "opened", "past", 0), ("ep-all-1", "resolved", "past", 0),
                     ("ep-all-2", "opened", "sent", 1)]
    # the past episode stays unsent, also when a re-judged day moves its resolution
    for table in ("drift_events", "window_metrics"):
        warehouse.execute(f"DELETE FROM {table} WHERE window_start BETWEEN $a AND $b",
                          {"a": day(15), "b": day(17)})
    for number in range(15, 17):
        insert_drift(warehouse, number, state="ongoing", decision="drop", episode="ep-all-1",
                     value=0.62, delta=-0.18)
    insert_drift(warehouse, 17, state="resolved", decision="stable", episode="ep-all-1",
                 value=0.79, delta=-0.01)
    insert_drift(warehouse, 36, state="resolved", decision="stable", episode="ep-all-2",
                 value=0.8, delta=0.0)
    again = send_alerts(warehouse, CONFIG, channels, now=morning_after(36), backoff=0.01)
    assert events_sent(hook)[1:] == [("resolved", "drop", "ep-all-2", "2026-12-06")]
    assert (again.sent, again.failed, again.past) == (1, 0, 1)
    # a channel added later is a new channel: its history is past too
    mail_hook = [Channel("slack", url=hook.url("/services/T0/B0/xyz"))]
    third = send_alerts(warehouse, CONFIG, mail_hook, now=morning_after(36), backoff=0.01)
    assert (third.sent, third.past) == (0, 4) and not hook.on("/services/T0/B0/xyz")


def test_a_replay_of_history_pages_a_drop_a_late_day_moved_as_the_days_did(warehouse, hook):
    # an Airflow catchup replays October long after it: the drop was paged opened and resolved
    # as the days came; corrected logs of day 8 then move its start to day 10. The moved drop
    # is news (README) but was recorded past: alerting began at the clock's time of the first
    # call, after every day of the replay had resolved
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    clock = day(90)
    for number in range(1, RESOLVED_DAY + 2):
        insert_replay_day(warehouse, number)
        send_alerts(warehouse, CONFIG, channels, now=clock + timedelta(minutes=number),
                    backoff=0.01)
    assert [(e[0], e[2]) for e in events_sent(hook)] == [("opened", "ep-all-1"),
                                                        ("resolved", "ep-all-1")]
    void_from(warehouse, OPENED_DAY)
    for number in range(OPENED_DAY, RESOLVED_DAY + 2):
        state, decision = ("none", "stable") if number < 10 or number > RESOLVED_DAY else (
            ("opened" if number == 10 else "resolved" if number == RESOLVED_DAY
             else "ongoing"), "stable" if number == RESOLVED_DAY else "drop")
        insert_drift(warehouse, number, state=state, decision=decision,
                     episode=None if state == "none" else "ep-all-2")

    summary = send_alerts(warehouse, CONFIG, channels, now=clock + timedelta(hours=1),
                          backoff=0.01)

    assert (summary.sent, summary.past) == (2, 0)
    assert [(e[0], e[2], e[3]) for e in events_sent(hook)][2:] == [
        ("opened", "ep-all-2", "2026-11-10"), ("resolved", "ep-all-2", "2026-11-15")]


def test_a_past_episode_stays_past_when_a_new_gold_set_moves_its_resolution(warehouse, hook):
    # recorded as past under g1; g2 re-judges the same drop, which now resolves a day later:
    # its resolution is not news on a channel that never got the opening
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    for number in range(1, 21):
        insert_replay_day(warehouse, number)
    assert send_alerts(warehouse, CONFIG, channels, now=morning_after(20), backoff=0.01).past == 2
    for number in range(1, 21):
        if number == 15:
            insert_drift(warehouse, 15, state="ongoing", decision="drop", episode="ep-g2-1",
                         value=0.62, delta=-0.18, gold="g2")
        elif number == 16:
            insert_drift(warehouse, 16, state="resolved", decision="stable",
                         episode="ep-g2-1", value=0.79, delta=-0.01, gold="g2")
        else:
            insert_replay_day(warehouse, number, episode="ep-g2-1", gold="g2")

    again = send_alerts(warehouse, Config(cutoffs=(1, 5, 10), gold_version="g2"), channels,
                        now=morning_after(21), backoff=0.01)

    assert hook.received == [] and (again.sent, again.failed, again.past) == (0, 0, 1)


def test_alert_on_a_history_says_what_it_did_not_page(tmp_path, hook, monkeypatch, capsys):
    for name in [k for k in os.environ if k.startswith("RECALLWATCH_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("RECALLWATCH_WEBHOOK_URL", hook.url("/hook/ab12"))
    path = tmp_path / "w.duckdb"
    with connect(path) as con:
        for number in range(1, 21):
            insert_replay_day(con, number)
    assert cli.main(["--warehouse", str(path), "alert"]) == 0
    assert ("alerts: 0 sent, 0 failed, 0 already sent, 2 of episodes that had resolved before "
            "alerting began on their channel (recorded as past, not sent).") \
        in capsys.readouterr().out
    assert hook.received == []


def test_sending_again_over_the_same_rows_sends_nothing_and_changes_no_row(
        warehouse, hook, smtp):
    channels = channels_for(hook, smtp)
    set_up(warehouse, channels)
    for number in range(1, 31):
        insert_replay_day(warehouse, number)
    first = send_alerts(warehouse, CONFIG, channels, now=morning_after(30), backoff=0.01)
    assert (first.sent, first.failed, first.skipped) == (6, 0, 0)
    before, drift = rows(warehouse, "alerts"), rows(warehouse, "drift_events")
    requests, mails = len(hook.received), len(smtp.messages)

    again = send_alerts(warehouse, CONFIG, channels, now=morning_after(31), backoff=0.01)

    assert (again.sent, again.failed, again.skipped, again.deliveries) == (0, 0, 6, [])
    assert (len(hook.received), len(smtp.messages)) == (requests, mails)
    assert rows(warehouse, "alerts") == before and rows(warehouse, "drift_events") == drift


def test_an_alerted_opening_that_drift_no_longer_finds_is_withdrawn_once_per_channel(
        warehouse, hook, smtp):
    # the drop of day 8 was sent; then late logs arrive, drift judges days 8.. again and finds
    # no episode: the person paged hears that it is withdrawn, once per channel
    channels = channels_for(hook, smtp)
    for number in range(1, 11):
        insert_replay_day(warehouse, number)
    send_alerts(warehouse, CONFIG, channels, now=morning_after(10), backoff=0.01)
    assert [json.loads(r.body)["event"] for r in hook.on("/hook/ab12")] == ["opened"]
    # re-aggregated (the days' metrics are there) and not judged again yet: nothing is
    # withdrawn on a guess
    warehouse.execute("DELETE FROM drift_events WHERE window_start >= $d", {"d": day(8)})
    assert send_alerts(warehouse, CONFIG, channels, now=morning_after(10)).deliveries == []
    void_from(warehouse, 8)
    for number in range(8, 11):
        insert_drift(warehouse, number, state="none", decision="stable", value=0.79,
                     delta=-0.01)

    summary = send_alerts(warehouse, CONFIG, channels, report=REPORT, now=morning_after(11),
                          backoff=0.01)

    assert (summary.sent, summary.failed) == (3, 0)
    webhook = [json.loads(r.body) for r in hook.on("/hook/ab12")]
    assert [m["event"] for m in webhook] == ["opened", "withdrawn"]
    withdrawn = webhook[1]
    assert withdrawn["episode_id"] == "ep-all-1"
    assert withdrawn["title"] == ("recallwatch: mean_recall@10 drop withdrawn on slice all "
                                  "(route ids, gold g1)")
    assert (withdrawn["window_start"][:10], withdrawn["decision"], withdrawn["now_state"],
            withdrawn["value"]) == ("2026-11-08", "stable", "none", 0.79)
    assert ("the drop sent as opened on day 2026-11-08 is no longer found" in withdrawn["text"]
            and "the day is stable (episode state none)" in withdrawn["text"])
    assert smtp.messages[-1]["Subject"] == withdrawn["title"]
    assert [json.loads(r.body)["text"] for r in hook.on("/services/T0/B0/xyz")][-1] == \
        withdrawn["title"]
    assert warehouse.execute(
        "SELECT channel, status, gold_version, direction FROM alerts WHERE event = 'withdrawn' "
        "ORDER BY channel").fetchall() == [(c, "sent", "g1", "drop")
                                           for c in ("email", "slack", "webhook")]
    # sent once: the next call sends nothing
    again = send_alerts(warehouse, CONFIG, channels, now=morning_after(12), backoff=0.01)
    assert (again.sent, again.skipped, again.deliveries) == (0, 3, [])


def test_a_withdrawn_episode_that_comes_back_is_announced_again_and_can_resolve(
        warehouse, hook):
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    paged_then_judged_again(warehouse, channels, decision="stable")
    send_alerts(warehouse, CONFIG, channels, now=morning_after(11), backoff=0.01)
    # the correction is itself corrected: the episode is found again, then resolves
    void_from(warehouse, 8)
    for number in range(8, 17):
        insert_replay_day(warehouse, number)
    send_alerts(warehouse, CONFIG, channels, now=morning_after(16), backoff=0.01)

    assert [(m["event"], m["window_start"][:10]) for m in
            (json.loads(r.body) for r in hook.on("/hook/ab12"))] == [
        ("opened", "2026-11-08"), ("withdrawn", "2026-11-08"), ("opened", "2026-11-08"),
        ("resolved", "2026-11-15")]
    assert warehouse.execute("SELECT event, status FROM alerts ORDER BY event").fetchall() == \
        [("opened", "sent"), ("resolved", "sent")]


def test_a_resolved_or_unsent_opening_is_never_withdrawn(warehouse, hook):
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    paged_replay(warehouse, channels, 15)
    # a second episode opened on day 20 is only ever seen by a dry run
    for number in range(16, 21):
        insert_drift(warehouse, number, state="opened" if number == 20 else "none",
                     decision="drop" if number == 20 else "stable",
                     episode="ep-all-2" if number == 20 else None)
    send_alerts(warehouse, CONFIG, channels, now=morning_after(20), dry_run=True)
    void_from(warehouse, 8)
    for number in range(8, 21):
        insert_drift(warehouse, number, state="none", decision="stable")

    summary = send_alerts(warehouse, CONFIG, channels, now=morning_after(21), backoff=0.01)

    assert summary.deliveries == []
    assert [json.loads(r.body)["event"] for r in hook.on("/hook/ab12")] == \
        ["opened", "resolved"]


def paged_low_days(tmp_path, channels) -> tuple[list[date], Path]:
    """Days 1-14 of October at mean recall 0.8, days 15-16 at 0.5, run into tmp_path/w.duckdb
    and their drops paged; returns the days and the log file."""
    days = [date(2026, 10, 1) + timedelta(days=d) for d in range(16)]
    gold, logs = graded_world(tmp_path, {d: 6 if d.day <= 14 else 3 for d in days})
    api.run(tmp_path / "w.duckdb", logs=[str(logs)], gold=str(gold), gold_version="v1",
            alert_channels=channels, now=datetime(2026, 10, 17, 6))
    return days, logs


def test_a_drop_on_partial_logs_is_withdrawn_when_the_rest_of_the_day_arrives(tmp_path, hook):
    # days 1-14 at mean recall 0.8; days 15-16 first arrive as a bad sample at 0.5, and the
    # drop is paged; the corrected logs bring them back to 0.8, and the next run withdraws it
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    warehouse, days, logs = tmp_path / "w.duckdb", *paged_low_days(tmp_path, channels)
    opened = [json.loads(r.body) for r in hook.on("/hook/ab12")]
    assert {(m["event"], m["slice"]) for m in opened} == {
        ("opened", "all"), ("opened", "index_version=idx-1")}

    graded_world(tmp_path, {d: 6 for d in days})
    summary = api.run(warehouse, logs=[str(logs)], alert_channels=channels,
                      now=datetime(2026, 10, 17, 7))

    messages = [json.loads(r.body) for r in hook.on("/hook/ab12")][len(opened):]
    assert sorted((m["event"], m["episode_id"], m["window_start"]) for m in messages) == \
        sorted(("withdrawn", m["episode_id"], m["window_start"]) for m in opened)
    assert {m["decision"] for m in messages} <= {"stable", "insufficient"}
    assert (summary.alerts.sent, summary.alerts.failed) == (len(opened), 0)
    # the warehouse now holds no episode, and a further run sends nothing
    with connect(warehouse, read_only=True) as con:
        assert con.sql("SELECT count(*) FROM drift_events WHERE state = 'opened'"
                       ).fetchall() == [(0,)]
    api.run(warehouse, alert_channels=channels, now=datetime(2026, 10, 17, 8))
    assert len(hook.on("/hook/ab12")) == 2 * len(opened)


def _alerts_without_times(warehouse: Path) -> list[tuple]:
    with connect(warehouse, read_only=True) as con:
        return sorted(con.sql("SELECT * EXCLUDE (attempts, last_error, first_tried, last_tried) "
                              "FROM alerts").fetchall(), key=repr)


def test_a_failed_withdrawal_of_a_drop_that_came_back_is_not_left_failed(tmp_path, hook):
    # the drop of days 15-16 is paged; the corrected logs withdraw it while the channel is
    # down (failed); the low logs come back, and with them the drop: the withdrawal is no
    # longer due (nobody heard it, the drop goes on), so nothing is sent when the channel is
    # up again, and `alerts` ends as a fresh run over the same logs leaves it, not with a
    # failed withdrawal nothing will ever retry
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    warehouse, days, logs = tmp_path / "w.duckdb", *paged_low_days(tmp_path, channels)
    opened = len(hook.on("/hook/ab12"))
    hook.fail(10 ** 6)
    graded_world(tmp_path, {d: 6 for d in days})
    down = api.run(warehouse, logs=[str(logs)], alert_channels=channels,
                   now=datetime(2026, 10, 17, 7))
    assert (down.alerts.sent, down.alerts.failed) == (0, opened)
    hook.fail(0)
    tried = len(hook.on("/hook/ab12"))
    graded_world(tmp_path, {d: 6 if d.day <= 14 else 3 for d in days})
    for hour in (8, 9):
        api.run(warehouse, logs=[str(logs)], alert_channels=channels,
                now=datetime(2026, 10, 17, hour))
    assert len(hook.on("/hook/ab12")) == tried
    api.run(tmp_path / "fresh.duckdb", logs=[str(logs)], gold=str(tmp_path / "gold.jsonl"),
            gold_version="v1", alert_channels=channels, now=datetime(2026, 10, 17, 6))
    assert _alerts_without_times(warehouse) == _alerts_without_times(tmp_path / "fresh.duckdb")
    with connect(warehouse, read_only=True) as con:
        assert con.sql("SELECT count(*) FROM alerts WHERE status = 'failed'").fetchall() == [(0,)]


def test_a_failed_opening_of_a_drop_the_corrected_logs_take_back_is_not_left_failed(
        tmp_path, hook):
    # the drop of days 15-16 could not be paged (channel down); the corrected logs take it
    # back: its opening is no longer due, and `alerts` ends as a fresh run leaves it (empty)
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    days = [date(2026, 10, 1) + timedelta(days=d) for d in range(16)]
    gold, logs = graded_world(tmp_path, {d: 6 if d.day <= 14 else 3 for d in days})
    warehouse = tmp_path / "w.duckdb"
    hook.fail(10 ** 6)
    first = api.run(warehouse, logs=[str(logs)], gold=str(gold), gold_version="v1",
                    alert_channels=channels, now=datetime(2026, 10, 17, 6))
    assert first.alerts.failed == 2
    hook.fail(0)
    graded_world(tmp_path, {d: 6 for d in days})
    api.run(warehouse, logs=[str(logs)], alert_channels=channels, now=datetime(2026, 10, 17, 7))
    assert not [r for r in hook.received if r.path == "/hook/ab12"][6:]
    assert _alerts_without_times(warehouse) == []


def test_a_paged_drop_whose_days_lose_all_their_requests_is_withdrawn(tmp_path, hook):
    # days 15-16 were low and paged; the re-delivered logs hold no request on them any more:
    # no metrics, no drift row is left for those days, and the drop must not stay open
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    warehouse, days, logs = tmp_path / "w.duckdb", *paged_low_days(tmp_path, channels)
    opened = [json.loads(r.body) for r in hook.on("/hook/ab12")]
    assert {m["event"] for m in opened} == {"opened"} and len(opened) == 2

    graded_world(tmp_path, {d: 6 for d in days if d.day <= 14})
    api.run(warehouse, logs=[str(logs)], alert_channels=channels,
            now=datetime(2026, 10, 17, 7))

    withdrawn = [json.loads(r.body) for r in hook.on("/hook/ab12")][len(opened):]
    assert sorted((m["event"], m["episode_id"], m["window_start"][:10]) for m in withdrawn) == \
        sorted(("withdrawn", m["episode_id"], "2026-10-15") for m in opened)
    assert {(m["now_state"], m["n"], m["decision"]) for m in withdrawn} == {("no_data", 0, None)}
    assert "the day holds no requests now" in withdrawn[0]["text"]
    api.run(warehouse, alert_channels=channels, now=datetime(2026, 10, 17, 8))
    assert len(hook.on("/hook/ab12")) == 4



def test_a_drop_paged_at_a_cutoff_no_longer_measured_is_withdrawn(tmp_path, hook):
    # the drop was paged at k 10; the cutoffs become 1, 5, 12: no window is measured at 10 any
    # more, and the paged opening was never resolved nor withdrawn (its rows were taken as
    # "voided, not yet judged again" for ever) while the drop was paged again at 12
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    paged_low_days(tmp_path, channels)
    warehouse = tmp_path / "w.duckdb"
    opened = [json.loads(r.body) for r in hook.on("/hook/ab12")]
    assert {(m["event"], m["k"]) for m in opened} == {("opened", 10)}

    api.configure(warehouse, cutoffs=(1, 5, 12))
    api.run(warehouse, alert_channels=channels, now=datetime(2026, 10, 17, 7))

    later = [json.loads(r.body) for r in hook.on("/hook/ab12")][len(opened):]
    withdrawn = [m for m in later if m["event"] == "withdrawn"]
    assert sorted((m["episode_id"], m["k"]) for m in withdrawn) == sorted(
        (m["episode_id"], 10) for m in opened)
    assert {m["now_state"] for m in withdrawn} == {"not_measured"}
    assert "k=10 is no longer measured" in withdrawn[0]["text"], withdrawn[0]["text"]
    # the drop at the alert cutoff now in force is news, sent after the withdrawals
    assert [(m["event"], m["k"]) for m in later] == [("withdrawn", 10)] * 2 + [("opened", 12)] * 2
    api.run(warehouse, alert_channels=channels, now=datetime(2026, 10, 17, 8))
    assert len(hook.on("/hook/ab12")) == len(opened) + len(later)



def test_a_drop_paged_on_a_route_taken_out_of_force_is_withdrawn(warehouse, hook):
    # `config --routes` without the route of a paged, unresolved drop removes its rows for good
    # (sql/retire_settings.sql); the day still holds requests, and the opening was taken as
    # "voided, not yet judged again" for ever: never resolved nor withdrawn
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    set_up(warehouse, channels)
    for number in range(1, 11):
        insert_replay_day(warehouse, number)
        warehouse.execute(
            "INSERT INTO requests (request_id, timestamp, query, index_version, k, n_steps, "
            "retrieved, source, line) VALUES ($id, $ts, 'q', 'idx-1', 10, 1, [], 'logs', 1)",
            {"id": f"r{number}", "ts": day(number) + timedelta(hours=10)})
    send_alerts(warehouse, CONFIG, channels, now=morning_after(10), backoff=0.01)
    opened = [json.loads(r.body) for r in hook.on("/hook/ab12")]
    assert [(m["event"], m["route"]) for m in opened] == [("opened", "ids")]

    run_script(warehouse, "retire_settings", {"routes": ["passages"], "grains": ["day"]})
    retired = replace(CONFIG, routes=("passages",))
    send_alerts(warehouse, retired, channels, now=morning_after(11), backoff=0.01)

    later = [json.loads(r.body) for r in hook.on("/hook/ab12")][len(opened):]
    assert [(m["event"], m["route"], m["episode_id"], m["now_state"]) for m in later] == [
        ("withdrawn", "ids", opened[0]["episode_id"], "route_retired")]
    assert "its route is no longer scored" in later[0]["text"], later[0]["text"]
    send_alerts(warehouse, retired, channels, now=morning_after(12), backoff=0.01)
    assert len(hook.on("/hook/ab12")) == len(opened) + len(later)


def test_a_drop_paged_on_a_slice_left_without_requests_that_day_is_withdrawn(tmp_path, hook):
    # days 15-16 were paged on slice index_version=idx-1 too; corrected logs say idx-2 served
    # them: the day is judged again, but that slice holds none of its requests now
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    warehouse, logs = tmp_path / "w.duckdb", paged_low_days(tmp_path, channels)[1]
    opened = {m["slice"]: m for m in map(json.loads, (r.body for r in hook.on("/hook/ab12")))}
    records = [json.loads(line) for line in logs.read_text().splitlines()]
    for record in records:
        if record["timestamp"] >= "2026-10-15":
            record["index_version"] = "idx-2"
    write_jsonl(logs, records)
    api.run(warehouse, logs=[str(logs)], alert_channels=channels, now=datetime(2026, 10, 17, 7))

    later = [json.loads(r.body) for r in hook.on("/hook/ab12")][len(opened):]
    assert [(m["event"], m["slice"], m["now_state"]) for m in later] == [
        ("withdrawn", "index_version=idx-1", "slice_gone")], later
    assert later[0]["episode_id"] == opened["index_version=idx-1"]["episode_id"]
    assert "the slice holds no request that day now" in later[0]["text"]


def test_a_late_day_that_moves_a_drop_earlier_announces_it_and_withdraws_nothing(
        tmp_path, hook):
    # day 14 arrives late and is low too: the drop now opens on day 14, in an episode that
    # holds day 15, which was paged. The new opening goes out; the drop goes on, so nothing
    # is withdrawn
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    warehouse = tmp_path / "w.duckdb"
    days = [date(2026, 10, 1) + timedelta(days=d) for d in range(18)]
    lows = {d: 6 if d.day < 14 else 3 for d in days}
    gold, logs = graded_world(tmp_path, {d: low for d, low in lows.items() if d.day != 14})
    api.run(warehouse, logs=[str(logs)], gold=str(gold), gold_version="v1",
            alert_channels=channels, now=datetime(2026, 10, 19, 6))
    first = [json.loads(r.body) for r in hook.on("/hook/ab12")]
    assert {(m["event"], m["window_start"][:10]) for m in first} == {("opened", "2026-10-15")}

    graded_world(tmp_path, lows)
    api.run(warehouse, logs=[str(logs)], alert_channels=channels,
            now=datetime(2026, 10, 19, 7))

    later = [json.loads(r.body) for r in hook.on("/hook/ab12")][len(first):]
    assert {(m["event"], m["window_start"][:10]) for m in later} == {("opened", "2026-10-14")}


def events_sent(hook: HookServer) -> list[tuple[str, str, str, str]]:
    return [(m["event"], m["direction"], m["episode_id"], m["window_start"][:10])
            for m in (json.loads(r.body) for r in hook.on("/hook/ab12"))]


def test_a_rise_that_replaces_a_paged_drop_on_its_day_is_sent_after_the_withdrawal(
        warehouse, hook):
    # the same slice, metric and day sent as a drop is no reason to hold back a rise
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    paged_replay(warehouse, channels, 10)
    void_from(warehouse, 8)
    for number in range(8, 11):
        insert_drift(warehouse, number, state="opened" if number == 8 else "ongoing",
                     decision="rise", episode="ep-rise", value=0.95, delta=0.15)

    summary = send_alerts(warehouse, CONFIG, channels, now=morning_after(11), backoff=0.01)

    assert (summary.sent, summary.skipped) == (2, 0)
    assert events_sent(hook) == [("opened", "drop", "ep-all-1", "2026-11-08"),
                                 ("withdrawn", "drop", "ep-all-1", "2026-11-08"),
                                 ("opened", "rise", "ep-rise", "2026-11-08")]


def test_a_rise_on_the_day_of_a_resolved_drop_is_sent_and_resolves(warehouse, hook):
    # a drop was opened and resolved, both sent; judged again, its first day opens a rise
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    paged_replay(warehouse, channels, 15)
    void_from(warehouse, 8)
    for number in range(8, 16):
        state = "opened" if number == 8 else "ongoing" if number < 13 else "resolved" \
            if number == 13 else "none"
        insert_drift(warehouse, number, state=state,
                     decision="rise" if number < 13 else "stable",
                     episode="ep-rise" if number <= 13 else None, value=0.95, delta=0.15)

    send_alerts(warehouse, CONFIG, channels, now=morning_after(16), backoff=0.01)

    assert events_sent(hook)[2:] == [("opened", "rise", "ep-rise", "2026-11-08"),
                                     ("resolved", "rise", "ep-rise", "2026-11-13")]


def test_an_episode_resolving_on_the_day_another_resolved_is_resolved_too(warehouse, hook):
    # a late day moves the drop's start from day 8 to day 6: a new episode, paged, which ends
    # on day 15 as the first did; its own resolution must reach whoever got its opening
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    paged_replay(warehouse, channels, 15)
    void_from(warehouse, 6)
    for number in range(6, 16):
        insert_drift(warehouse, number,
                     state="opened" if number == 6 else "ongoing" if number < 15 else "resolved",
                     decision="drop" if number < 15 else "stable", episode="ep-all-2",
                     value=0.62 if number < 15 else 0.79, delta=-0.18 if number < 15 else 0)

    send_alerts(warehouse, CONFIG, channels, now=morning_after(16), backoff=0.01)

    assert events_sent(hook)[2:] == [("opened", "drop", "ep-all-2", "2026-11-06"),
                                     ("resolved", "drop", "ep-all-2", "2026-11-15")]


def resolved_then_judged_again(con, channels, last_ongoing: int,
                               resolved_on: int | None) -> None:
    """The replay's drop opened on day 8 and resolved on day 15, both sent; then days 15.. are
    judged again (late logs): the drop goes on to `last_ongoing` and resolves on
    `resolved_on` (or not yet)."""
    paged_replay(con, channels, 15)
    void_from(con, 15)
    for number in range(15, last_ongoing + 1):
        insert_drift(con, number, state="ongoing", decision="drop", episode="ep-all-1",
                     value=0.62, delta=-0.18)
    if resolved_on is not None:
        insert_drift(con, resolved_on, state="resolved", decision="stable",
                     episode="ep-all-1", value=0.80, delta=0.0)


def test_a_resolution_that_came_too_early_is_sent_again_on_its_new_day(warehouse, hook):
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    resolved_then_judged_again(warehouse, channels, last_ongoing=17, resolved_on=18)

    summary = send_alerts(warehouse, CONFIG, channels, now=morning_after(18), backoff=0.01)

    assert (summary.sent, summary.skipped) == (1, 1)
    assert events_sent(hook) == [("opened", "drop", "ep-all-1", "2026-11-08"),
                                 ("resolved", "drop", "ep-all-1", "2026-11-15"),
                                 ("resolved", "drop", "ep-all-1", "2026-11-18")]
    last = json.loads(hook.on("/hook/ab12")[-1].body)
    assert "the resolution sent for day 2026-11-15 came too early" in last["text"]
    assert last["resolution_sent_before"][:10] == "2026-11-15"
    again = send_alerts(warehouse, CONFIG, channels, now=morning_after(19), backoff=0.01)
    assert (again.sent, again.skipped) == (0, 2)


def test_a_resolution_that_no_longer_holds_is_taken_back_until_the_episode_resolves(
        warehouse, hook):
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    resolved_then_judged_again(warehouse, channels, last_ongoing=17, resolved_on=None)

    summary = send_alerts(warehouse, CONFIG, channels, now=morning_after(17), backoff=0.01)

    assert summary.sent == 1
    unresolved = json.loads(hook.on("/hook/ab12")[-1].body)
    assert (unresolved["event"], unresolved["window_start"][:10], unresolved["now_state"],
            unresolved["decision"]) == ("unresolved", "2026-11-15", "ongoing", "drop")
    assert unresolved["title"] == ("recallwatch: mean_recall@10 drop unresolved on slice all "
                                   "(route ids, gold g1)")
    assert "the resolution sent for day 2026-11-15 no longer holds" in unresolved["text"]
    assert send_alerts(warehouse, CONFIG, channels, now=morning_after(17)).sent == 0
    # the drop resolves on day 18: that resolution goes out, and could be taken back again
    insert_drift(warehouse, 18, state="resolved", decision="stable", episode="ep-all-1",
                 value=0.80, delta=0.0)
    send_alerts(warehouse, CONFIG, channels, now=morning_after(18), backoff=0.01)
    assert events_sent(hook)[2:] == [("unresolved", "drop", "ep-all-1", "2026-11-15"),
                                     ("resolved", "drop", "ep-all-1", "2026-11-18")]
    assert warehouse.execute("SELECT event, window_start FROM alerts ORDER BY event"
                             ).fetchall() == [("opened", day(8)), ("resolved", day(18))]


def test_a_resolution_waits_on_a_channel_that_has_not_got_the_opening(warehouse, hook):
    # the first call on a history: the opening fails on the webhook; its resolution must not
    # reach the channel first, and both go out, in order, once it is back
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    set_up(warehouse, channels)
    for number in range(1, 16):
        insert_replay_day(warehouse, number)
    hook.fail(3)

    first = send_alerts(warehouse, CONFIG, channels, now=morning_after(15), backoff=0.01)

    assert (first.sent, first.failed) == (0, 2)
    assert [d.error for d in first.deliveries][1] == ("held until the opening is delivered on "
                                                      "this channel")
    assert [e[0] for e in events_sent(hook)] == ["opened"] * 3   # three 503s
    second = send_alerts(warehouse, CONFIG, channels, now=morning_after(16), backoff=0.01)
    assert (second.sent, second.failed) == (2, 0)
    assert [e[0] for e in events_sent(hook)] == ["opened"] * 4 + ["resolved"]


def test_an_episode_paged_before_the_alert_cutoff_changed_still_resolves(warehouse, hook):
    # the drop at k 10 was paged; then alerts move to k 5 (or to other metrics): whoever was
    # paged still hears that it resolved
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    paged_replay(warehouse, channels, 10)
    for number in range(11, 16):
        insert_replay_day(warehouse, number)

    for config in (replace(CONFIG, alert_k=5), replace(CONFIG, alert_metrics=("pass_rate",))):
        send_alerts(warehouse, config, channels, now=morning_after(15), backoff=0.01)

    assert events_sent(hook) == [("opened", "drop", "ep-all-1", "2026-11-08"),
                                 ("resolved", "drop", "ep-all-1", "2026-11-15")]


def test_a_new_gold_set_judging_the_same_history_pages_only_what_is_news(warehouse, hook):
    # g2 re-judges days 1-20: the drop of days 8-15 again (already paged under g1, not again)
    # and, on day 18, a rise that g1 did not see
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    paged_replay(warehouse, channels, 15)
    for number in range(1, 16):
        insert_replay_day(warehouse, number, episode="ep-g2-1", gold="g2")
    for number in range(16, 21):
        insert_drift(warehouse, number, state="opened" if number == 18 else
                     "ongoing" if number > 18 else "none", decision="rise" if number >= 18
                     else "stable", episode="ep-g2-2" if number >= 18 else None, gold="g2")

    summary = send_alerts(warehouse, Config(cutoffs=(1, 5, 10), gold_version="g2"), channels,
                          now=morning_after(20), backoff=0.01)

    assert events_sent(hook)[2:] == [("opened", "rise", "ep-g2-2", "2026-11-18")]
    assert (summary.sent, summary.skipped) == (1, 4)



def test_a_new_gold_set_moving_a_sent_resolution_says_it_puts_the_earlier_one_right(
        warehouse, hook):
    # g1's drop opened on day 8 and resolved on day 15, both sent; g2 judges the same drop
    # (opened day 8: not news) resolved on day 14: a second "drop resolved" went out as if
    # news, with nothing to tell it from the first
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    paged_replay(warehouse, channels, 16)
    for number in range(1, 17):
        if number == 14:
            insert_drift(warehouse, 14, state="resolved", decision="stable", episode="ep-g2-1",
                         value=0.79, delta=-0.01, gold="g2")
        elif number == 15:
            insert_drift(warehouse, 15, state="none", decision="stable", value=0.8, gold="g2")
        else:
            insert_replay_day(warehouse, number, episode="ep-g2-1", gold="g2")

    send_alerts(warehouse, Config(cutoffs=(1, 5, 10), gold_version="g2"), channels,
                now=morning_after(16), backoff=0.01)

    later = [json.loads(r.body) for r in hook.received][2:]
    assert [(m["event"], m["window_start"][:10], m.get("resolution_sent_before", "")[:10])
            for m in later] == [("resolved", "2026-11-14", "2026-11-15")]
    assert "the resolution sent for day 2026-11-15 came late" in later[0]["text"]


def test_a_new_gold_set_still_in_a_sent_drop_takes_its_resolution_back_until_it_resolves(
        warehouse, hook):
    # g1's drop opened on day 8 and resolved on day 15, both sent; g2 judges the same drop
    # (opened day 8) still going on days 15-17: the resolution sent no longer holds, and
    # nothing said so
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    paged_replay(warehouse, channels, 15)
    for number in range(1, 18):
        if number < RESOLVED_DAY:
            insert_replay_day(warehouse, number, episode="ep-g2-1", gold="g2")
        else:
            insert_drift(warehouse, number, state="ongoing", decision="drop",
                         episode="ep-g2-1", value=0.62, delta=-0.18, gold="g2")
    g2 = Config(cutoffs=(1, 5, 10), gold_version="g2")

    summary = send_alerts(warehouse, g2, channels, now=morning_after(17), backoff=0.01)

    assert summary.sent == 1
    unresolved = json.loads(hook.on("/hook/ab12")[-1].body)
    assert (unresolved["event"], unresolved["window_start"][:10], unresolved["now_state"],
            unresolved["gold_version"]) == ("unresolved", "2026-11-15", "ongoing", "g2")
    assert "the resolution sent for day 2026-11-15 no longer holds" in unresolved["text"]
    assert send_alerts(warehouse, g2, channels, now=morning_after(17)).sent == 0
    # g2's drop resolves on day 18: sent, naming the day that came too early, once
    insert_drift(warehouse, 18, state="resolved", decision="stable", episode="ep-g2-1",
                 value=0.80, delta=0.0, gold="g2")
    send_alerts(warehouse, g2, channels, now=morning_after(18), backoff=0.01)
    assert events_sent(hook)[2:] == [("unresolved", "drop", "ep-g2-1", "2026-11-15"),
                                     ("resolved", "drop", "ep-g2-1", "2026-11-18")]
    resolved = json.loads(hook.on("/hook/ab12")[-1].body)
    assert "the resolution sent for day 2026-11-15 came too early" in resolved["text"]
    assert send_alerts(warehouse, g2, channels, now=morning_after(19)).sent == 0


def test_a_withdrawal_of_a_day_that_now_forms_a_baseline_says_so(warehouse, hook):
    # a re-baseline from the opening day on: nothing is compared with the old level any more
    channels = [Channel("webhook", url=hook.url("/hook/ab12"))]
    paged_then_judged_again(warehouse, channels, decision="baseline", value=0.62)
    send_alerts(warehouse, CONFIG, channels, now=morning_after(11), backoff=0.01)
    withdrawn = json.loads(hook.on("/hook/ab12")[-1].body)
    assert withdrawn["event"] == "withdrawn" and withdrawn["decision"] == "baseline"
    assert ("the drop sent as opened on day 2026-11-08 is no longer judged: the day now forms "
            "a baseline") in withdrawn["text"]


def test_a_channel_answering_503_is_retried_recorded_as_failed_then_delivered_next_call(
        warehouse, hook):
    insert_replay_day(warehouse, OPENED_DAY)
    drift = rows(warehouse, "drift_events")
    channels = [Channel("webhook", url=hook.url("/hook"))]
    hook.fail(100)

    down = send_alerts(warehouse, CONFIG, channels, now=morning_after(8), retries=3,
                       backoff=0.01)

    assert len(hook.received) == 3
    assert (down.sent, down.failed) == (0, 1)
    assert warehouse.execute(
        "SELECT status, attempts, last_error, first_tried, last_tried FROM alerts"
    ).fetchall() == [("failed", 3, "HTTP 503", morning_after(8), morning_after(8))]
    assert rows(warehouse, "drift_events") == drift

    hook.fail(0)
    later = morning_after(8) + timedelta(hours=1)
    up = send_alerts(warehouse, CONFIG, channels, now=later, retries=3, backoff=0.01)

    assert (up.sent, up.failed, len(hook.received)) == (1, 0, 4)
    assert warehouse.execute(
        "SELECT status, attempts, last_error, first_tried, last_tried FROM alerts"
    ).fetchall() == [("sent", 4, None, morning_after(8), later)]

    before = rows(warehouse, "alerts")
    third = send_alerts(warehouse, CONFIG, channels, now=later + timedelta(hours=1),
                        backoff=0.01)
    assert (third.sent, third.failed, third.skipped, len(hook.received)) == (0, 0, 1, 4)
    assert rows(warehouse, "alerts") == before and rows(warehouse, "drift_events") == drift


def test_the_api_step_a_scheduled_task_calls_fails_when_a_delivery_fails_and_retries_it(
        tmp_path, hook, monkeypatch):
    # the DAGs' alert task is api.alert: a channel that is down must fail the task (Airflow
    # then retries it and shows it), not pass with {'failed': 1} in its return value
    path = tmp_path / "w.duckdb"
    with connect(path) as con:
        for number in range(1, 11):
            insert_replay_day(con, number)   # mean recall@10: the default alert cutoff
    monkeypatch.setenv("RECALLWATCH_WEBHOOK_URL", hook.url("/hook/ab12"))
    hook.fail(3)
    with pytest.raises(RecallwatchError) as caught:
        api.alert(path, now=morning_after(10))
    assert str(caught.value) == (
        "1 alert(s) could not be delivered on webhook (HTTP 503); 0 sent. They are kept, and "
        "the next alert retries them.")
    with connect(path, read_only=True) as con:
        assert con.sql("SELECT event, status, attempts FROM alerts").fetchall() == [
            ("opened", "failed", 3)]
    assert api.alert(path, now=morning_after(11)) == {
        "sent": 1, "failed": 0, "skipped": 0, "past": 0, "channels": ["webhook"]}


def test_run_does_everything_and_exits_2_when_an_alert_could_not_be_delivered(
        tmp_path, hook, monkeypatch, capsys):
    days = [date(2026, 10, 1) + timedelta(days=d) for d in range(16)]
    gold, logs = graded_world(tmp_path, {d: 6 if d.day <= 14 else 3 for d in days})
    monkeypatch.setenv("RECALLWATCH_WEBHOOK_URL", hook.url("/hook/ab12"))
    hook.fail(10 ** 6)
    args = ["--warehouse", str(tmp_path / "w.duckdb"), "run", "--logs", str(logs), "--gold",
            str(gold), "--gold-version", "v1", "--out", str(tmp_path / "report")]

    assert cli.main(args) == 2
    out, err = capsys.readouterr()
    assert "alerts: 0 sent, 2 failed" in out and "report: " in out
    assert err.startswith("recallwatch: error: 2 alert(s) could not be delivered")
    hook.fail(0)
    assert cli.main(args[:3]) == 0
    assert "alerts: 2 sent, 0 failed" in capsys.readouterr().out


def test_a_stopped_server_is_a_failed_alert_not_an_exception(warehouse):
    insert_replay_day(warehouse, OPENED_DAY)
    closed = f"http://127.0.0.1:{_free_port()}/hook"   # nothing listens there

    summary = send_alerts(warehouse, CONFIG, [Channel("webhook", url=closed)],
                          now=morning_after(8), retries=2, backoff=0.01)

    assert (summary.sent, summary.failed) == (0, 1)
    assert summary.deliveries[0].error == "connection refused"
    assert warehouse.execute("SELECT status, attempts, last_error FROM alerts").fetchall() == \
        [("failed", 2, "connection refused")]


@pytest.mark.parametrize("channel", ["webhook", "email"])
def test_a_message_the_server_took_is_sent_whatever_follows_its_acceptance(warehouse, hook,
                                                                          smtp, channel):
    # a webhook's 200 is the server's word that it has the message, whatever happens to the
    # body after it (a proxy, a receiver that drops the connection); smtplib raises when QUIT
    # is answered with anything but 221, after the server accepted the mail. Either was
    # recorded failed and sent again on every try of every call.
    insert_replay_day(warehouse, OPENED_DAY)
    if channel == "webhook":
        hook.server.cut_answer = True
        channels, received = [Channel("webhook", url=hook.url("/hook"))], hook.received
    else:
        smtp.quit_reply = "421 4.3.2 closing"
        channels = [Channel("email", host="127.0.0.1", port=smtp.port, sender=SENDER,
                            recipients=(RECIPIENT,))]
        received = smtp.messages
    first = send_alerts(warehouse, CONFIG, channels, now=morning_after(8), retries=3,
                        backoff=0.01)
    again = send_alerts(warehouse, CONFIG, channels, now=morning_after(9), backoff=0.01)
    assert (first.sent, first.failed, again.sent, again.skipped) == (1, 0, 0, 1)
    assert len(received) == 1
    assert warehouse.execute("SELECT status, attempts, last_error FROM alerts").fetchall() == [
        ("sent", 1, None)]


def test_a_webhook_answer_that_trickles_is_not_waited_for(warehouse, hook):
    # a 2xx is the receiver's word that it has the message; its body was read to the end, and
    # the timeout bounds each read, not all of them: a body of a byte every quarter second
    # held the alert run (and the Airflow task) for as long as the receiver kept it coming
    insert_replay_day(warehouse, OPENED_DAY)
    hook.server.trickle = 40
    summary = send_alerts(warehouse, CONFIG, [Channel("webhook", url=hook.url("/hook"))],
                          now=morning_after(8), backoff=0.01, timeout=1.0)
    assert (summary.sent, summary.failed) == (1, 0)
    assert hook.server.trickle_over.wait(30)
    assert hook.server.trickled < 40, "the whole trickled body was read"


@pytest.mark.parametrize("setting", ["tls", "starttls"])
def test_mail_goes_over_tls_from_the_first_byte_or_by_starttls(warehouse, certificate,
                                                               monkeypatch, setting):
    # SMTPS (port 465, TLS from the first byte) got a plain hello and never answered: every
    # alert failed with "server disconnected". Both kinds carry the login and the mail in TLS.
    box, controller = _tls_mailbox(certificate, monkeypatch, implicit=setting == "tls")
    try:
        insert_replay_day(warehouse, OPENED_DAY)
        (mail,) = channels_from_env({
            "RECALLWATCH_SMTP_HOST": "127.0.0.1", "RECALLWATCH_SMTP_PORT": str(box.port),
            "RECALLWATCH_SMTP_USER": "alerts", "RECALLWATCH_SMTP_PASSWORD": SMTP_PASSWORD,
            "RECALLWATCH_SMTP_FROM": SENDER, "RECALLWATCH_SMTP_TO": RECIPIENT,
            f"RECALLWATCH_SMTP_{setting.upper()}": "1"})
        summary = send_alerts(warehouse, CONFIG, [mail], now=morning_after(8), backoff=0.01)
    finally:
        controller.stop()
    assert (summary.sent, summary.failed) == (1, 0), warehouse.execute(
        "SELECT last_error FROM alerts").fetchall()
    assert box.over_tls == [True] and box.logins == [("alerts", SMTP_PASSWORD)]


def test_port_465_is_tls_unless_a_setting_says_otherwise(tmp_path):
    given = {"RECALLWATCH_SMTP_HOST": "mx", "RECALLWATCH_SMTP_FROM": SENDER,
             "RECALLWATCH_SMTP_TO": RECIPIENT}
    (mail,) = channels_from_env({**given, "RECALLWATCH_SMTP_PORT": "465"})
    assert (mail.port, mail.tls, mail.starttls, repr(mail)) == (
        465, True, False, "Channel(email, 1 recipient(s), tls)")
    (mail,) = channels_from_env({**given, "RECALLWATCH_SMTP_TLS": "yes"})
    assert (mail.port, mail.tls) == (465, True)
    (mail,) = channels_from_env({**given, "RECALLWATCH_SMTP_PORT": "465",
                                 "RECALLWATCH_SMTP_TLS": "0"})
    assert (mail.port, mail.tls) == (465, False)
    (mail,) = channels_from_env({**given, "RECALLWATCH_SMTP_PORT": "587"})
    assert (mail.port, mail.tls, mail.starttls) == (587, False, False)
    with pytest.raises(RecallwatchError, match="cannot both be set"):
        channels_from_env({**given, "RECALLWATCH_SMTP_TLS": "1",
                           "RECALLWATCH_SMTP_STARTTLS": "1"})
    path = tmp_path / "channels.toml"
    path.write_text(f'[email]\nhost = "mx"\nfrom = "{SENDER}"\nto = "{RECIPIENT}"\n'
                    'tls = true\n')
    (mail,) = channels_from_file(path, {})
    assert (mail.port, mail.tls) == (465, True)


def test_a_recipient_the_server_refuses_makes_the_mail_failed_and_retried_to_it_alone(
        warehouse, smtp):
    # the server takes the mail for one recipient and refuses the other: that one never got
    # the page, so it is no delivery; the retries, in this call and the next, go to it alone
    # (a permanent 550 used to mail the other recipient again on every try of every call)
    insert_replay_day(warehouse, OPENED_DAY)
    channel = Channel("email", host="127.0.0.1", port=smtp.port, sender=SENDER,
                      recipients=(RECIPIENT, "ml@example.com"))
    smtp.refuse = {"ml@example.com"}
    for hour in range(2):
        down = send_alerts(warehouse, CONFIG, [channel], retries=3, backoff=0.01,
                           now=morning_after(8) + timedelta(hours=hour))
        assert (down.sent, down.failed) == (0, 1)
    assert smtp.delivered_to == [[RECIPIENT]]
    assert warehouse.execute("SELECT status, attempts, last_error, undelivered_to FROM alerts"
                             ).fetchall() == [
        ("failed", 6, "SMTP recipients refused (1 of 2)", ["ml@example.com"])]
    smtp.refuse = set()
    up = send_alerts(warehouse, CONFIG, [channel], now=morning_after(8) + timedelta(hours=2),
                     backoff=0.01)
    assert (up.sent, up.failed) == (1, 0)
    assert smtp.delivered_to == [[RECIPIENT], ["ml@example.com"]]
    # the mail names every recipient, as the first one did
    assert sorted(smtp.messages[-1]["To"].addresses[i].addr_spec for i in range(2)) == [
        "ml@example.com", RECIPIENT]
    assert warehouse.execute("SELECT status, undelivered_to FROM alerts").fetchall() == [
        ("sent", None)]


def test_a_refused_recipient_dropped_from_the_settings_leaves_nothing_to_retry(
        warehouse, smtp):
    insert_replay_day(warehouse, OPENED_DAY)
    both = Channel("email", host="127.0.0.1", port=smtp.port, sender=SENDER,
                   recipients=(RECIPIENT, "typo@example.com"))
    smtp.refuse = {"typo@example.com"}
    send_alerts(warehouse, CONFIG, [both], retries=1, now=morning_after(8))
    fixed = Channel("email", host="127.0.0.1", port=smtp.port, sender=SENDER,
                    recipients=(RECIPIENT,))
    summary = send_alerts(warehouse, CONFIG, [fixed], now=morning_after(9))
    assert (summary.sent, summary.failed) == (1, 0)
    assert smtp.delivered_to == [[RECIPIENT]]   # nobody mailed twice


def test_a_non_ascii_address_a_server_cannot_take_says_what_it_lacks(warehouse):
    insert_replay_day(warehouse, OPENED_DAY)
    ascii_only = Controller(Mailbox(), hostname="127.0.0.1", port=_free_port(),
                            enable_SMTPUTF8=False)
    ascii_only.start()
    try:
        channel = Channel("email", host="127.0.0.1", port=ascii_only.port, sender=SENDER,
                          recipients=("jörg@example.com",))
        down = send_alerts(warehouse, CONFIG, [channel], now=morning_after(8), retries=1,
                           backoff=0.01)
    finally:
        ascii_only.stop()
    assert down.failed == 1 and "SMTPUTF8" in down.deliveries[0].error
    assert "STARTTLS" not in down.deliveries[0].error


@pytest.mark.parametrize("password", ["p", "server"])
def test_a_short_password_does_not_garble_the_reason_a_delivery_failed(warehouse, password):
    # a server without AUTH: the reason read "SMTP AUTH extension not su******orted by server"
    # with the password "p", and "SMTP *** lacks what the mail needs: ... by ***" with "server"
    insert_replay_day(warehouse, OPENED_DAY)
    no_auth = Controller(Mailbox(), hostname="127.0.0.1", port=_free_port())
    no_auth.start()
    try:
        channel = Channel("email", host="127.0.0.1", port=no_auth.port, sender=SENDER,
                          recipients=(RECIPIENT,), user="u", password=password)
        down = send_alerts(warehouse, CONFIG, [channel], now=morning_after(8), retries=1,
                           backoff=0.01)
    finally:
        no_auth.stop()
    assert down.failed == 1
    assert down.deliveries[0].error == ("SMTP server lacks what the mail needs: SMTP AUTH "
                                        "extension not supported by server.")


def test_control_characters_of_a_slice_reach_no_mail_header_nor_terminal(
        warehouse, smtp, tmp_path, monkeypatch, capsys):
    slice_ = "tag=a\x00b\x1b[31mred\x7f\nwebhook resolved slice all"
    for number in range(1, OPENED_DAY + 1):
        insert_replay_day(warehouse, number, slice_=slice_)
    warehouse.close()   # the CLI opens it
    path = tmp_path / "w.duckdb"
    for name, value in {"RECALLWATCH_SMTP_HOST": "127.0.0.1",
                        "RECALLWATCH_SMTP_PORT": str(smtp.port),
                        "RECALLWATCH_SMTP_FROM": SENDER, "RECALLWATCH_SMTP_TO": RECIPIENT,
                        "RECALLWATCH_ALERT_K": "10"}.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["--warehouse", str(path), "alert"]) == 0
    out = capsys.readouterr().out
    [mail] = smtp.messages
    assert not any(ch in mail["Subject"] for ch in "\x00\x1b\x7f")
    assert "\\x1b[31mred" in mail["Subject"]
    lines = [line for line in out.splitlines() if "resolved" in line or "opened" in line]
    assert len(lines) == 1 and "\x1b" not in out and "\\x1b" in lines[0]


def _dry_run_messages(con, mine: str, other: str) -> dict:
    """The openings a dry run would send for a drop in each of two slices."""
    for number in range(1, OPENED_DAY + 1):
        insert_replay_day(con, number, slice_=mine)
        insert_replay_day(con, number, episode="ep-other", slice_=other)
    summary = send_alerts(con, CONFIG, [Channel("webhook", url="http://127.0.0.1:9/")],
                          dry_run=True, now=morning_after(OPENED_DAY))
    return {d.message.slice: d.message for d in summary.would_send}


@pytest.mark.parametrize("mine,other", [("tenant=acme", "tenant=acme\n"),
                                        ("tenant=acme", "tenant=acme\t"),
                                        ("tenant=ac me", "tenant=ac  me")])
def test_two_slices_that_differ_only_in_whitespace_are_paged_apart(warehouse, mine, other):
    # a line break or a tab was read as a space and runs of spaces as one: a drop in
    # "tenant=acme\n" was paged as one in "tenant=acme", a slice with no drop, the one a
    # person would then re-baseline
    messages = _dry_run_messages(warehouse, mine, other)
    assert set(messages) == {mine, other}
    assert messages[mine].title != messages[other].title
    assert messages[mine].text.splitlines()[0] != messages[other].text.splitlines()[0]
    assert printable(other) in messages[other].title
    mail = Channel("email", host="127.0.0.1", port=25, sender=SENDER, recipients=(RECIPIENT,))
    subjects = {email_message(mail, m, day(9))["Subject"] for m in messages.values()}
    assert len(subjects) == 2


def test_a_long_slice_is_named_whole_in_the_message_text(warehouse):
    # the text cut it at 200 characters as the title does: two slices alike up to there were
    # paged with the same words, and the slice to re-baseline could not be told
    mine, other = "tenant=" + "a" * 300, "tenant=" + "a" * 300 + "z"
    messages = _dry_run_messages(warehouse, mine, other)
    assert other in messages[other].text and other not in messages[mine].text
    assert mine in messages[mine].text


def test_dry_run_sends_and_writes_nothing_but_lists_what_would_go(warehouse, hook, smtp):
    set_up(warehouse, channels_for(hook, smtp))
    for number in range(1, 16):
        insert_replay_day(warehouse, number)
    since = rows(warehouse, "alert_channels")

    summary = send_alerts(warehouse, CONFIG, channels_for(hook, smtp), dry_run=True,
                          now=morning_after(15))

    assert [(d.channel, d.message.event) for d in summary.would_send] == [
        ("webhook", "opened"), ("slack", "opened"), ("email", "opened"),
        ("webhook", "resolved"), ("slack", "resolved"), ("email", "resolved")]
    assert (hook.received, smtp.messages, rows(warehouse, "alerts")) == ([], [], [])
    assert rows(warehouse, "alert_channels") == since


def test_rows_of_other_cutoffs_metrics_grains_or_states_send_nothing(warehouse, hook):
    insert_drift(warehouse, 8, state="opened", decision="drop", episode="ep-k5", k=5)
    insert_drift(warehouse, 8, state="opened", decision="drop", episode="ep-pass",
                 metric="pass_rate")
    insert_drift(warehouse, 9, state="ongoing", decision="drop", episode="ep-k5", k=5)
    insert_drift(warehouse, 9, state="none", decision="drop", slice_="tag=x")
    warehouse.execute("UPDATE drift_events SET grain = 'hour', state = 'opened', "
                      "episode_id = 'ep-hour' WHERE slice = 'tag=x'")

    summary = send_alerts(warehouse, CONFIG, [Channel("webhook", url=hook.url("/hook"))],
                          now=morning_after(9), backoff=0.01)

    assert (summary.sent, summary.failed, summary.skipped) == (0, 0, 0)
    assert hook.received == [] and rows(warehouse, "alerts") == []
    pass_rate = Config(cutoffs=(1, 5, 10), alert_metrics=("pass_rate",))
    assert send_alerts(warehouse, pass_rate, [Channel("webhook", url=hook.url("/hook"))],
                       now=morning_after(9)).sent == 1


def test_send_test_sends_one_message_per_channel_and_reports_failures(hook, smtp):
    channels = channels_for(hook, smtp)
    results = send_test(channels, now=datetime(2026, 11, 20, 9, 0))
    assert results == [("webhook", True, None), ("slack", True, None), ("email", True, None)]
    assert json.loads(hook.on("/hook/ab12")[0].body)["event"] == "test"
    assert smtp.messages[0]["Subject"] == "recallwatch: test alert"

    hook.fail(1)
    assert send_test(channels[:1], now=datetime(2026, 11, 20, 9, 5)) == \
        [("webhook", False, "HTTP 503")]


# ---------------------------------------------------------------------------------- settings

SMTP_PASSWORD = "pw-Zq81-do-not-print"


def test_channels_from_env_reads_every_channel():
    environ = {
        "RECALLWATCH_WEBHOOK_URL": "https://hooks.example.com/rw/tok123",
        "RECALLWATCH_WEBHOOK_SECRET": "whsec",
        "RECALLWATCH_SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T/B/x",
        "RECALLWATCH_SMTP_HOST": "smtp.example.com",
        "RECALLWATCH_SMTP_USER": "alerts",
        "RECALLWATCH_SMTP_PASSWORD": SMTP_PASSWORD,
        "RECALLWATCH_SMTP_FROM": SENDER,
        "RECALLWATCH_SMTP_TO": "a@example.com, b@example.com",
        "RECALLWATCH_SMTP_STARTTLS": "true",
    }
    webhook, slack, mail = channels_from_env(environ)
    assert (webhook.name, webhook.url, webhook.secret) == \
        ("webhook", "https://hooks.example.com/rw/tok123", "whsec")
    assert (slack.name, slack.url) == ("slack", "https://hooks.slack.com/services/T/B/x")
    assert (mail.host, mail.port, mail.starttls, mail.user, mail.password, mail.recipients) == \
        ("smtp.example.com", 587, True, "alerts", SMTP_PASSWORD,
         ("a@example.com", "b@example.com"))
    shown = repr([webhook, slack, mail])
    assert "tok123" not in shown and "whsec" not in shown and SMTP_PASSWORD not in shown
    plain = channels_from_env({"RECALLWATCH_SMTP_HOST": "mx", "RECALLWATCH_SMTP_FROM": SENDER,
                               "RECALLWATCH_SMTP_TO": RECIPIENT})
    assert (plain[0].port, plain[0].starttls, plain[0].user) == (25, False, None)
    assert channels_from_env({}) == []


def test_channels_from_file_reads_env_indirections(tmp_path):
    path = tmp_path / "channels.toml"
    path.write_text('[webhook]\nurl = "env:HOOK_URL"\nsecret = "env:HOOK_SECRET"\n\n'
                    '[slack]\nurl = "https://hooks.slack.com/services/T/B/x"\n\n'
                    '[email]\nhost = "smtp.example.com"\nport = 2525\nstarttls = true\n'
                    'user = "alerts"\npassword = "env:SMTP_PW"\nfrom = "rw@example.com"\n'
                    'to = ["a@example.com", "b@example.com"]\n')
    environ = {"HOOK_URL": "https://hooks.example.com/tok9", "HOOK_SECRET": "k3y",
               "SMTP_PW": SMTP_PASSWORD}

    webhook, slack, mail = channels_from_file(path, environ)

    assert (webhook.url, webhook.secret, slack.url) == \
        ("https://hooks.example.com/tok9", "k3y", "https://hooks.slack.com/services/T/B/x")
    assert (mail.port, mail.starttls, mail.password, mail.sender, mail.recipients) == \
        (2525, True, SMTP_PASSWORD, "rw@example.com", ("a@example.com", "b@example.com"))


@pytest.mark.parametrize(("environ", "named"), [
    ({"RECALLWATCH_WEBHOOK_URL": f"ftp://example.com/{SMTP_PASSWORD}"},
     "RECALLWATCH_WEBHOOK_URL"),
    ({"RECALLWATCH_WEBHOOK_SECRET": SMTP_PASSWORD}, "RECALLWATCH_WEBHOOK_URL"),
    ({"RECALLWATCH_SLACK_WEBHOOK_URL": f"hooks.slack.com/{SMTP_PASSWORD}"},
     "RECALLWATCH_SLACK_WEBHOOK_URL"),
    # urllib raises on these: an unclosed IPv6 bracket, a port that is no number
    ({"RECALLWATCH_WEBHOOK_URL": f"http://[::1/{SMTP_PASSWORD}"}, "RECALLWATCH_WEBHOOK_URL"),
    ({"RECALLWATCH_SLACK_WEBHOOK_URL": f"https://hooks.slack.com]/{SMTP_PASSWORD}"},
     "RECALLWATCH_SLACK_WEBHOOK_URL"),
    ({"RECALLWATCH_WEBHOOK_URL": f"http://example.com:99999/{SMTP_PASSWORD}"},
     "RECALLWATCH_WEBHOOK_URL"),
    # http.client cannot send these: every delivery failed (UnicodeEncodeError, InvalidURL)
    ({"RECALLWATCH_WEBHOOK_URL": f"http://example.com/h\u00e9/{SMTP_PASSWORD}"},
     "RECALLWATCH_WEBHOOK_URL"),
    ({"RECALLWATCH_SLACK_WEBHOOK_URL": f"https://hooks.slack.com/x\x7f/{SMTP_PASSWORD}"},
     "RECALLWATCH_SLACK_WEBHOOK_URL"),
    # urllib would look up "user:secret@example.com" as a host name, and port 0 is no port
    ({"RECALLWATCH_WEBHOOK_URL": f"https://user:{SMTP_PASSWORD}@example.com/hook"},
     "RECALLWATCH_WEBHOOK_URL"),
    ({"RECALLWATCH_SLACK_WEBHOOK_URL": f"https://{SMTP_PASSWORD}@hooks.slack.com/x"},
     "RECALLWATCH_SLACK_WEBHOOK_URL"),
    ({"RECALLWATCH_WEBHOOK_URL": f"http://example.com:0/{SMTP_PASSWORD}"},
     "RECALLWATCH_WEBHOOK_URL"),
    # smtplib looks up "mx:25" as a host name when the port is given apart
    ({"RECALLWATCH_SMTP_HOST": "mx.example.com:2525", "RECALLWATCH_SMTP_FROM": SENDER,
      "RECALLWATCH_SMTP_TO": RECIPIENT}, "RECALLWATCH_SMTP_HOST"),
    ({"RECALLWATCH_SMTP_HOST": "mx", "RECALLWATCH_SMTP_FROM": SENDER,
      "RECALLWATCH_SMTP_PASSWORD": SMTP_PASSWORD}, "RECALLWATCH_SMTP_TO"),
    ({"RECALLWATCH_SMTP_HOST": "mx", "RECALLWATCH_SMTP_FROM": SENDER,
      "RECALLWATCH_SMTP_TO": RECIPIENT, "RECALLWATCH_SMTP_PASSWORD": SMTP_PASSWORD},
     "RECALLWATCH_SMTP_USER"),
    ({"RECALLWATCH_SMTP_HOST": "mx", "RECALLWATCH_SMTP_FROM": SENDER,
      "RECALLWATCH_SMTP_TO": RECIPIENT, "RECALLWATCH_SMTP_PORT": "smtp"},
     "RECALLWATCH_SMTP_PORT"),
    ({"RECALLWATCH_SMTP_HOST": "mx", "RECALLWATCH_SMTP_FROM": SENDER,
      "RECALLWATCH_SMTP_TO": RECIPIENT, "RECALLWATCH_SMTP_PORT": "²5"},
     "RECALLWATCH_SMTP_PORT"),
    ({"RECALLWATCH_SMTP_HOST": "mx", "RECALLWATCH_SMTP_FROM": SENDER,
      "RECALLWATCH_SMTP_TO": RECIPIENT, "RECALLWATCH_SMTP_STARTTLS": "maybe"},
     "RECALLWATCH_SMTP_STARTTLS"),
    ({"RECALLWATCH_SMTP_HOST": "mx", "RECALLWATCH_SMTP_FROM": SENDER,
      "RECALLWATCH_SMTP_TO": "oncall"}, "RECALLWATCH_SMTP_TO"),
])
def test_a_bad_setting_is_one_sentence_naming_it_without_its_value(environ, named):
    with pytest.raises(RecallwatchError) as caught:
        channels_from_env(environ)
    message = str(caught.value)
    assert named in message and SMTP_PASSWORD not in message
    assert message.endswith(".") and "\n" not in message


def test_an_smtp_host_may_be_an_ipv6_address_in_brackets(tmp_path):
    # smtplib looked up "[::1]" as a host name: "host name not found" on every delivery
    path = tmp_path / "channels.toml"
    path.write_text(f'[email]\nhost = "[::1]"\nfrom = "{SENDER}"\nto = "{RECIPIENT}"\n')
    [channel] = channels_from_file(path, {})
    assert channel.host == "::1"


def test_starttls_may_be_written_as_the_numbers_its_message_names(tmp_path):
    path = tmp_path / "channels.toml"
    for value, expected in (("1", True), ("0", False), ("true", True)):
        path.write_text(f'[email]\nhost = "mx"\nfrom = "{SENDER}"\nto = "{RECIPIENT}"\n'
                        f"starttls = {value}\n")
        [channel] = channels_from_file(path, {})
        assert channel.starttls is expected
    path.write_text(f'[email]\nhost = "mx"\nfrom = "{SENDER}"\nto = "{RECIPIENT}"\n'
                    "starttls = 2\n")
    with pytest.raises(RecallwatchError, match="starttls"):
        channels_from_file(path, {})


@pytest.mark.parametrize(("text", "named"), [
    ('[webhook]\nurl = "env:NOT_SET_ANYWHERE"\n', "[webhook] url"),
    ('[webhook]\nurl = "https://x.example.com/h"\ntoken = "t"\n', "[webhook] token"),
    ('[pager]\nurl = "https://x.example.com/h"\n', "'pager'"),
    ('[email]\nhost = "mx"\nfrom = "a@example.com"\nto = "b@example.com"\n'
     f'password = "{SMTP_PASSWORD}"\n', "[email] user"),
    ('[slack]\nurl = "not a url"\n', "[slack] url"),
    # a host no request can look up: every delivery failed with "UnicodeError"
    ('[webhook]\nurl = "http://a..b/h"\n', "[webhook] url"),
    ("[webhook\n", "not valid TOML"),
    ("", "configures no channel"),
])
def test_a_bad_channels_file_names_the_setting(tmp_path, text, named):
    path = tmp_path / "channels.toml"
    path.write_text(text)
    with pytest.raises(RecallwatchError) as caught:
        channels_from_file(path, {})
    assert named in str(caught.value) and str(path) in str(caught.value)
    assert SMTP_PASSWORD not in str(caught.value)
    with pytest.raises(RecallwatchError, match="does not exist"):
        channels_from_file(tmp_path / "missing.toml")


# ---------------------------------------------------------------------------------- CLI

def test_the_cli_never_shows_or_stores_urls_tokens_or_passwords(
        tmp_path, hook, smtp, monkeypatch, capsys, caplog):
    token, slack_token, signing = "tok-7Hq2-path-secret", "slk-93Xb-path-secret", "sig-k-2Zr"
    hook_path, slack_path = f"/hooks/{token}", f"/services/T1/B1/{slack_token}"
    secrets = [token, slack_token, signing, SMTP_PASSWORD, hook.url(hook_path)]
    for name in [k for k in os.environ if k.startswith("RECALLWATCH_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("RECALLWATCH_WEBHOOK_URL", hook.url(hook_path))
    monkeypatch.setenv("RECALLWATCH_WEBHOOK_SECRET", signing)
    monkeypatch.setenv("RECALLWATCH_SLACK_WEBHOOK_URL", hook.url(slack_path))
    monkeypatch.setenv("RECALLWATCH_SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("RECALLWATCH_SMTP_PORT", str(smtp.port))
    monkeypatch.setenv("RECALLWATCH_SMTP_USER", "alerts")
    monkeypatch.setenv("RECALLWATCH_SMTP_PASSWORD", SMTP_PASSWORD)
    monkeypatch.setenv("RECALLWATCH_SMTP_FROM", SENDER)
    monkeypatch.setenv("RECALLWATCH_SMTP_TO", RECIPIENT)
    caplog.set_level(logging.DEBUG)
    path = tmp_path / "w.duckdb"
    with connect(path) as con:
        for number in range(1, OPENED_DAY + 1):
            insert_replay_day(con, number)
    outputs = []

    def run(*args: str) -> int:
        code = cli.main(["--warehouse", str(path), *args])
        outputs.append(capsys.readouterr())
        return code

    assert run("alert", "--dry-run", "--report", REPORT) == 0
    assert ("webhook opened slice all route ids mean_recall@10 day 2026-11-08: would send"
            in outputs[-1].out)
    assert hook.received == []
    assert run("alert", "--report", REPORT) == 0
    assert "email opened slice all route ids mean_recall@10 day 2026-11-08: sent" \
        in outputs[-1].out
    assert smtp.logins == [("alerts", SMTP_PASSWORD)]
    hook.fail(1000)   # the webhook and Slack are down when the episode resolves
    with connect(path) as con:
        for number in range(OPENED_DAY + 1, RESOLVED_DAY + 1):
            insert_replay_day(con, number)
    monkeypatch.setattr("pipeline.alerts.time.sleep", lambda seconds: None)
    assert run("alert") == 2   # e-mail went; a scheduler sees the rest did not
    assert "webhook resolved slice all route ids mean_recall@10 day 2026-11-15: failed (HTTP 503" \
        in outputs[-1].out
    assert "alert(s) could not be delivered" in outputs[-1].err
    assert "email resolved slice all route ids mean_recall@10 day 2026-11-15: sent" \
        in outputs[-1].out
    assert run("alert", "test") == 2
    assert "webhook: test message failed (HTTP 503)" in outputs[-1].out
    hook.fail(0)
    assert run("alert", "test") == 0
    assert len(smtp.messages) == 4 and len(hook.on(hook_path)) == 1 + 3 + 1 + 1

    shown = "".join(o.out + o.err for o in outputs)
    logged = caplog.text + "".join(r.getMessage() for r in caplog.records)
    with connect(path, read_only=True) as con:
        columns = con.execute("SELECT table_name, column_name FROM information_schema.columns "
                              "WHERE table_schema = 'main'").fetchall()
        stored = [value for table, column in columns for (value,) in con.execute(
            f'SELECT DISTINCT "{column}"::VARCHAR FROM "{table}"').fetchall() if value]
    assert ("alerts", "last_error") in columns and "HTTP 503" in stored
    assert "via webhook: failed (HTTP 503)" in logged   # the logs were captured, not empty
    for secret in secrets:
        assert secret not in shown
        assert secret not in logged
        assert not [value for value in stored if secret in value]
        assert secret.encode() not in path.read_bytes()


def test_the_cli_without_channels_says_what_to_set(tmp_path, monkeypatch, capsys):
    for name in [k for k in os.environ if k.startswith("RECALLWATCH_")]:
        monkeypatch.delenv(name)
    path = tmp_path / "w.duckdb"
    connect(path).close()

    assert cli.main(["--warehouse", str(path), "alert"]) == 0
    assert NO_CHANNELS in capsys.readouterr().out
    assert cli.main(["--warehouse", str(path), "alert", "test"]) == 2
    err = capsys.readouterr().err
    assert "RECALLWATCH_WEBHOOK_URL" in err and "--channels FILE" in err


def test_a_long_slack_message_is_cut_between_escapes_never_inside_one():
    from pipeline.alerts import AlertMessage, slack_body

    for pad in range(5):
        text = "x" * (2990 - pad) + "&" * 40
        message = AlertMessage("ep", "opened", "all", "mean_recall", None, "t", text, {})
        section = json.loads(slack_body(message))["blocks"][0]["text"]["text"]
        assert len(section) <= 3000 and section.endswith("…")
        assert section[:-1].rsplit("&", 1)[-1] in ("", "amp;"), pad


def test_a_slice_written_as_slack_markup_stays_text_in_slack_and_its_notification(
        warehouse, hook, smtp):
    # a tag value comes from the logs: <!channel> must not page a whole Slack channel
    for number in range(1, OPENED_DAY + 1):
        insert_replay_day(warehouse, number, slice_="tag=<!channel>")
    send_alerts(warehouse, CONFIG, [Channel("slack", url=hook.url("/services/T0/B0/xyz"))],
                now=morning_after(OPENED_DAY), backoff=0.01)
    [slack] = [json.loads(r.body) for r in hook.on("/services/T0/B0/xyz")]
    for shown in (slack["text"], slack["blocks"][0]["text"]["text"]):
        assert "slice tag=&lt;!channel&gt;" in shown and "<!channel>" not in shown
