"""Alerts: one message when a drift episode opens and one when it resolves, on every configured
channel (a generic JSON webhook, a Slack incoming webhook, email over SMTP); and one that
withdraws an opening the drift step no longer finds after the data changed.

The drift step marks an episode's first window `opened` and the first window after it
`resolved` in `drift_events`; this module turns those rows (daily windows, the alert cutoff
and metrics of the configuration) into messages that quote the value with its interval, the
baseline, the difference with its interval, the margin δ, k, route, gold version and n. The
`alerts` table records, per episode, event and channel, whether the message was delivered:
a sent one is never sent again, a failed one is retried (with backoff) by the next call, and a
failure never raises nor touches `drift_events`. An opening that was sent and not resolved,
whose episode the drift step no longer finds when it judges that window again under the same
gold version (late or corrected logs, a rescore), gets a `withdrawn` message on the channels
that had it, quoting how the window is judged now; should the episode come back, its opening
is sent again (sql/pending_alerts.sql). A sent resolution that judging its window again no
longer bears out is put right: the episode's new resolution day is sent, or, while it has not
resolved, an `unresolved` message says so (so too when a new gold set judges the same opening
resolved elsewhere, or still going on). A resolution waits on a channel that has not got
its episode's opening. A failed message that judging again no longer calls for (its
episode taken back, a withdrawn drop back before the withdrawal got out) is forgotten, never
delivered to anyone (sql/forget_stale_alerts.sql). A channel set up on a warehouse with
history (`alert_channels`: when alerting began on it, in the data's time) pages only what is
news: an episode that had resolved by then is recorded as `past` and never sent. Channel
settings come from the environment or a TOML file; URLs, tokens and passwords are never
printed, logged or stored."""

from __future__ import annotations

import email.policy
import hashlib
import hmac
import json
import logging
import math
import os
import re
import smtplib
import socket
import ssl
import time
import tomllib
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path

from pipeline.config import DEFAULT_ALPHA, Config
from pipeline.endpoints import http_endpoint
from pipeline.errors import MASKED_LENGTH, RecallwatchError, mask_secrets
from pipeline.warehouse import run_script, sql, transaction

log = logging.getLogger(__name__)

CHANNEL_NAMES = ("webhook", "slack", "email")
EVENTS = ("opened", "resolved", "withdrawn", "unresolved")
HELD = "held until the opening is delivered on this channel"
SIGNATURE_HEADER = "X-Recallwatch-Signature"

# Every setting of every channel, with the environment variable that gives it; a channels file
# uses the same keys in tables of the same names.
ENVIRONMENT = {
    ("webhook", "url"): "RECALLWATCH_WEBHOOK_URL",
    ("webhook", "secret"): "RECALLWATCH_WEBHOOK_SECRET",
    ("slack", "url"): "RECALLWATCH_SLACK_WEBHOOK_URL",
    ("email", "host"): "RECALLWATCH_SMTP_HOST",
    ("email", "port"): "RECALLWATCH_SMTP_PORT",
    ("email", "user"): "RECALLWATCH_SMTP_USER",
    ("email", "password"): "RECALLWATCH_SMTP_PASSWORD",
    ("email", "from"): "RECALLWATCH_SMTP_FROM",
    ("email", "to"): "RECALLWATCH_SMTP_TO",
    ("email", "starttls"): "RECALLWATCH_SMTP_STARTTLS",
    ("email", "tls"): "RECALLWATCH_SMTP_TLS",
}
_REQUIRED = {"webhook": ("url",), "slack": ("url",), "email": ("host", "from", "to")}
SMTP_PORT, SMTP_STARTTLS_PORT, SMTPS_PORT = 25, 587, 465

NO_CHANNELS = (
    "no alert channel is configured: set RECALLWATCH_WEBHOOK_URL (and optionally "
    "RECALLWATCH_WEBHOOK_SECRET), RECALLWATCH_SLACK_WEBHOOK_URL, or RECALLWATCH_SMTP_HOST with "
    "RECALLWATCH_SMTP_FROM and RECALLWATCH_SMTP_TO, or pass --channels FILE (a TOML file with "
    "[webhook], [slack] or [email] tables).")


# ---------------------------------------------------------------------------------- channels

@dataclass(frozen=True, repr=False)
class Channel:
    """Where alerts go. `name` is webhook, slack or email; webhook and slack use `url` (and the
    webhook an optional HMAC `secret`), email the SMTP settings. The repr shows no URL,
    secret or password."""

    name: str
    url: str | None = None
    secret: str | None = None
    host: str | None = None
    port: int | None = None
    user: str | None = None
    password: str | None = None
    sender: str | None = None
    recipients: tuple[str, ...] = ()
    starttls: bool = False
    tls: bool = False   # SMTPS: TLS from the first byte (port 465), not upgraded by STARTTLS

    def __repr__(self) -> str:
        if self.name == "email":
            tls = ", starttls" if self.starttls else ", tls" if self.tls else ""
            return f"Channel(email, {len(self.recipients)} recipient(s){tls})"
        return f"Channel({self.name}{', signed' if self.secret else ''})"

    __str__ = __repr__

    @property
    def secrets(self) -> tuple[str, ...]:
        """The strings that must never leave the process: URLs (their path and query hold
        tokens), the webhook secret, the SMTP password."""
        found = [self.secret, self.password]
        if self.url:
            parts = urllib.parse.urlsplit(self.url)
            found += [self.url, parts.query]
            if parts.path not in ("", "/"):
                found.append(parts.path)
        return tuple(s for s in found if s)


def channels_from_env(environ: Mapping[str, str] = os.environ) -> list[Channel]:
    """The channels the RECALLWATCH_* variables configure (see ENVIRONMENT), in the order
    webhook, slack, email; an empty list when none is set. An empty variable counts as unset."""
    values: dict[str, dict[str, object]] = {}
    for (channel, key), variable in ENVIRONMENT.items():
        if environ.get(variable):
            values.setdefault(channel, {})[key] = environ[variable]
    return _channels(values, lambda channel, key: ENVIRONMENT[(channel, key)])


def channels_from_file(path: str | os.PathLike,
                       environ: Mapping[str, str] = os.environ) -> list[Channel]:
    """The channels of a TOML file with tables [webhook] (url, secret), [slack] (url) and
    [email] (host, port, user, password, from, to, starttls, tls). A string value `env:NAME` is read
    from the environment variable NAME, so the file itself need hold no secret."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecallwatchError(f"channels file {path} does not exist: give the path of a TOML "
                               "file with [webhook], [slack] or [email] tables.") from None
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or "not UTF-8 text"
        raise RecallwatchError(f"cannot read the channels file {path} ({why}).") from None
    except tomllib.TOMLDecodeError as exc:
        raise RecallwatchError(f"channels file {path} is not valid TOML ({exc}).") from None

    def label(channel: str, key: str) -> str:
        return f"[{channel}] {key} in {path}"

    values: dict[str, dict[str, object]] = {}
    for channel, table in data.items():
        if channel not in CHANNEL_NAMES or not isinstance(table, dict):
            raise RecallwatchError(f"channels file {path} has an unknown entry {channel!r}: use "
                                   "the tables [webhook], [slack] and [email].")
        for key, value in table.items():
            if (channel, key) not in ENVIRONMENT:
                known = ", ".join(k for c, k in ENVIRONMENT if c == channel)
                raise RecallwatchError(f"{label(channel, key)} is not a setting of the {channel} "
                                       f"channel; use {known}.")
            if isinstance(value, str) and value.startswith("env:"):
                variable = value[4:]
                if not environ.get(variable):
                    raise RecallwatchError(f"{label(channel, key)} reads the environment "
                                           f"variable {variable}, which is not set.")
                value = environ[variable]
            if value != "":
                values.setdefault(channel, {})[key] = value
    if not values:
        raise RecallwatchError(f"channels file {path} configures no channel: add a [webhook], "
                               "[slack] or [email] table.")
    return _channels(values, label)


def _channels(values: dict[str, dict[str, object]],
              label: Callable[[str, str], str]) -> list[Channel]:
    """Check the raw settings of each channel and build it. Error messages name the setting
    (an environment variable or a file's table and key), never its value."""
    channels = []
    for name in CHANNEL_NAMES:
        given = values.get(name)
        if not given:
            continue
        for key in _REQUIRED[name]:
            if key not in given:
                others = ", ".join(label(name, k) for k in given)
                raise RecallwatchError(f"{label(name, key)} is not set, but the {name} alert "
                                       f"channel needs it (it is configured by {others}).")
        if name == "webhook":
            channels.append(Channel(name, url=_url(given["url"], label(name, "url")),
                                    secret=_text(given.get("secret"), label(name, "secret"))))
        elif name == "slack":
            channels.append(Channel(name, url=_url(given["url"], label(name, "url"))))
        else:
            channels.append(_email(given, lambda key: label("email", key)))
    return channels


def _text(value: object, setting: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise RecallwatchError(f"{setting} must be a string.")
    return value


def _url(value: object, setting: str) -> str:
    text = _text(value, setting)
    parts = http_endpoint(text)
    if parts is None or re.search(r"\s", text):
        raise RecallwatchError(f"{setting} must be an http:// or https:// URL (its value is not "
                               "shown, as it may hold a token).")
    if not text.isascii() or re.search(r"[\x00-\x1f\x7f]", text):   # http.client sends neither
        raise RecallwatchError(f"{setting} must be a URL of printable ASCII characters, others "
                               "percent-encoded (its value is not shown, as it may hold a "
                               "token).")
    if "@" in parts.netloc:   # the request would look up "user:secret@host" as a host name
        raise RecallwatchError(f"{setting} must be a URL without a user or password before its "
                               "host (its value is not shown): a webhook takes its token in the "
                               "path.")
    return text


_ADDRESS = re.compile(r"^[^@\s,<>]+@[^@\s,<>]+$")


def _email(given: dict[str, object], label: Callable[[str], str]) -> Channel:
    host = _text(given["host"], label("host")).strip()
    if re.fullmatch(r"\[[0-9A-Fa-f:.]+\]", host):   # an IPv6 address as a URL writes it
        host = host[1:-1]
    if not host or re.search(r"\s", host):
        raise RecallwatchError(f"{label('host')} must be a host name, e.g. smtp.example.com.")
    if re.fullmatch(r"[^:\[\]]+:[0-9]*", host):   # smtplib would look up "host:port" as a name
        raise RecallwatchError(f"{label('host')} must be a host name without a port, e.g. "
                               f"smtp.example.com; give the port as {label('port')}.")
    starttls = _flag(given.get("starttls", False), label("starttls"))
    tls = _flag(given["tls"], label("tls")) if "tls" in given else None
    if starttls and tls:
        raise RecallwatchError(f"{label('tls')} and {label('starttls')} cannot both be set: "
                               f"tls is TLS from the first byte (port {SMTPS_PORT}), starttls "
                               f"an upgrade of a plain connection (port {SMTP_STARTTLS_PORT}).")
    port = given.get("port", SMTPS_PORT if tls else SMTP_STARTTLS_PORT if starttls
                     else SMTP_PORT)
    if isinstance(port, str) and re.fullmatch(r"[0-9]+", port.strip()):
        port = int(port)
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise RecallwatchError(f"{label('port')} must be a port number from 1 to 65535.")
    if tls is None:   # port 465 speaks TLS from the first byte: a plain hello gets no answer
        tls = port == SMTPS_PORT and not starttls
    user = _text(given.get("user"), label("user"))
    password = _text(given.get("password"), label("password"))
    if bool(user) != bool(password):
        missing, present = ("password", "user") if user else ("user", "password")
        raise RecallwatchError(f"{label(missing)} must be set when {label(present)} is (the "
                               "SMTP login needs both).")
    sender = _text(given["from"], label("from")).strip()
    if not _ADDRESS.match(sender):
        raise RecallwatchError(f"{label('from')} must be one email address, e.g. "
                               "recallwatch@example.com.")
    to = given["to"]
    if isinstance(to, str):
        to = to.split(",")
    if not isinstance(to, list) or not all(isinstance(a, str) for a in to):
        raise RecallwatchError(f"{label('to')} must be a comma-separated list of email "
                               "addresses.")
    recipients = tuple(a.strip() for a in to if a.strip())
    if not recipients or not all(_ADDRESS.match(a) for a in recipients):
        raise RecallwatchError(f"{label('to')} must be a comma-separated list of email "
                               "addresses, e.g. oncall@example.com,ml@example.com.")
    return Channel("email", host=host, port=port, user=user, password=password, sender=sender,
                   recipients=recipients, starttls=starttls, tls=tls)


def _flag(value: object, label: str) -> bool:
    """A yes/no setting: a bool, a TOML number 0 or 1, or text (1/true/yes/on, 0/false/no/off,
    empty for no)."""
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
        return bool(value)   # a TOML number, as the message below allows
    if isinstance(value, str):
        flag = value.strip().lower()
        if flag not in ("1", "true", "yes", "on", "0", "false", "no", "off", ""):
            raise RecallwatchError(f"{label} must be 1/true or 0/false.")
        return flag in ("1", "true", "yes", "on")
    if not isinstance(value, bool):
        raise RecallwatchError(f"{label} must be 1/true or 0/false.")
    return value


# ---------------------------------------------------------------------------------- messages

@dataclass(frozen=True)
class AlertMessage:
    """One message, the same on every channel: a title, plain-text lines, and the fields the
    webhook's JSON carries."""

    episode_id: str | None
    event: str                     # opened | resolved | withdrawn | unresolved | test
    slice: str
    metric: str
    window_start: datetime | None
    title: str
    text: str
    fields: dict = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Delivery:
    """What happened to one message on one channel in this call: sent, failed, or (dry run)
    would send. attempts counts every try over all calls so far."""

    channel: str
    message: AlertMessage
    status: str
    attempts: int = 0
    error: str | None = None


@dataclass
class AlertSummary:
    """Counts of this call: sent, failed, skipped (already sent earlier), past (events of
    episodes that had resolved before alerting began on the channel: recorded as `past`,
    never sent), and one Delivery per message it sent, failed or — with dry_run — would
    send."""

    sent: int = 0
    failed: int = 0
    skipped: int = 0
    past: int = 0   # recorded, never sent: its episode resolved before the channel was set up
    deliveries: list[Delivery] = field(default_factory=list)

    @property
    def would_send(self) -> list[Delivery]:
        return [d for d in self.deliveries if d.status == "would send"]


def _number(value: float | None, signed: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _interval(low: float | None, high: float | None, signed: bool = False) -> str:
    return f"{_number(low, signed)} to {_number(high, signed)}"


def one_line(text: str, limit: int = 200) -> str:
    """Logged text (a slice, a version) fit for a title, a mail header or a terminal line: no
    line breaks, and a control character (NUL, an escape sequence) written as its code."""
    return verbatim_line(" ".join(str(text).split()), limit)


def verbatim_line(text: str, limit: int = 200) -> str:
    """Logged text fit for a title, a mail header or a terminal line, as `one_line` but with
    its whitespace as logged: a line break or a tab written as its code and runs of spaces
    kept, so two slices that differ only there ("tenant=acme" and "tenant=acme\n") read
    apart."""
    flat = printable(text)
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def printable(text: str) -> str:
    """`text` with every character a terminal would act on (a line break, NUL, an escape
    sequence) written as its code, the rest as it is: a file name as the CLI shows it."""
    return "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" if ord(ch) < 0x100
                   else f"\\u{ord(ch):04x}" for ch in str(text))


def _finite(value):
    return None if isinstance(value, float) and not math.isfinite(value) else value


# why a withdrawn opening's window has no drift row now, by its now_state
NOTHING_JUDGED = {
    "no_data": "found: the day holds no requests now (its logs were taken back or moved to "
               "other days), so there is nothing left to judge on it",
    "slice_gone": "found: the slice holds no request that day now (its logs were corrected), "
                  "so there is nothing left to judge on it",
    "not_measured": "judged: k={k} is no longer measured (the cutoffs in force changed), so "
                    "nothing on it is compared any more; alerts follow the alert cutoff in force",
    "route_retired": "judged: its route is no longer scored (the routes in force changed), so "
                     "nothing on it is compared any more",
}


def build_message(row: Mapping, report: str | None = None) -> AlertMessage:
    """The message of one drift event (a row of sql/pending_alerts.sql)."""
    metric, k, event = row["metric"], row["k"], row["event"]
    scope = f"(route {one_line(row['route'])}, gold {one_line(row['gold_version'])})"
    where = f"slice {verbatim_line(row['slice'])} {scope}"
    title = f"recallwatch: {metric}@{k} {row['direction']} {event} on {where}"
    # the text names the slice whole: cut as in the title, two slices alike up to there read
    # the same, and a person could not tell which one to re-baseline
    where = f"slice {printable(row['slice'])} {scope}"
    day = f"{row['window_start']:%Y-%m-%d}"
    level = round(100 * (1 - DEFAULT_ALPHA))
    baseline = f"baseline: {_number(row['baseline_value'])}"
    if row["baseline_start"] is not None and row["baseline_end"] is not None:
        last_day = row["baseline_end"] - timedelta(days=1)   # windows here are days
        baseline += f" (days {row['baseline_start']:%Y-%m-%d} to {last_day:%Y-%m-%d}"
        baseline += f", n {row['baseline_n']})" if row["baseline_n"] is not None else ")"
    lines = [f"{metric}@{k} {row['direction']} {event} on {where}, day {day}"]
    if event == "withdrawn" and row["decision"] == "baseline":
        lines.append(
            f"the {row['direction']} sent as opened on day {day} is no longer judged: the day "
            "now forms a baseline (a re-baseline from it or before, or an index change), so "
            "nothing is compared with the level before it; the figures below are today's")
    elif event == "withdrawn" and row["now_state"] in NOTHING_JUDGED:
        lines.append(f"the {row['direction']} sent as opened on day {day} is no longer "
                     + NOTHING_JUDGED[row["now_state"]].format(k=k))
    elif event == "withdrawn":
        lines.append(
            f"the {row['direction']} sent as opened on day {day} is no longer found: judged "
            f"again on the data and settings now in the warehouse, the day is "
            f"{row['decision']} (episode state {row['now_state']}); the figures below are "
            "today's judgement of that day")
    elif event == "unresolved":
        lines.append(
            f"the resolution sent for day {day} no longer holds: judged again on the data and "
            f"settings now in the warehouse, the day is {row['decision']} (episode state "
            f"{row['now_state']}), so the {row['direction']} goes on; its resolution will "
            "follow")
    elif event == "resolved" and row.get("resolution_sent_before") is not None:
        sent = row["resolution_sent_before"]
        lines.append(
            f"the resolution sent for day {sent:%Y-%m-%d} came too early: judged again, the "
            f"{row['direction']} went on until this day" if sent < row["window_start"] else
            f"the resolution sent for day {sent:%Y-%m-%d} came late: judged again, the "
            f"{row['direction']} had resolved by this day")
    if event == "resolved" and row["decision"] == "baseline":
        lines.append("resolved: the slice was re-baselined from this day; its level now is "
                     "the baseline, and nothing is compared with the level before")
    elif event == "resolved":
        lines.append(
            "resolved: the difference of this day, or of the days back since the last one "
            "beyond the margin pooled, lies within the margin (with few requests a day the "
            "day's own interval below can still reach past it)")
    lines += [
        f"value: {_number(row['value'])} ({level}% interval "
        f"{_interval(row['value_low'], row['value_high'])}), n {row['n']}",
        baseline,
        f"difference (window - baseline): {_number(row['delta'], True)} (interval "
        f"{_interval(row['delta_low'], row['delta_high'], True)}), margin δ "
        f"{_number(row['margin'])}",
        f"decision on this day: {row['decision']} (method {row['method']})",
        f"k {k}, route {one_line(row['route'])}, gold version "
        f"{one_line(row['gold_version'])}, n {row['n']}",
        f"report: {report}" if report else "report: none given",
        f"episode: {row['episode_id']}",
    ]
    fields = {
        "slice": row["slice"], "metric": metric, "window_start": row["window_start"].isoformat(),
        "window_end": row["window_end"].isoformat(), "k": k, "route": row["route"],
        "gold_version": row["gold_version"], "n": row["n"], "value": row["value"],
        "value_low": row["value_low"], "value_high": row["value_high"],
        "baseline_value": row["baseline_value"], "baseline_n": row["baseline_n"],
        "delta": row["delta"], "delta_low": row["delta_low"], "delta_high": row["delta_high"],
        "margin": row["margin"], "decision": row["decision"], "direction": row["direction"],
        "method": row["method"], "index_version": row["index_version"], "report": report,
    }
    if event in ("withdrawn", "unresolved"):
        fields["now_state"] = row["now_state"]
    if row.get("resolution_sent_before") is not None:
        fields["resolution_sent_before"] = row["resolution_sent_before"].isoformat()
    return AlertMessage(row["episode_id"], event, row["slice"], metric, row["window_start"],
                        title, "\n".join(lines), {k_: _finite(v) for k_, v in fields.items()})


def _test_message(now: datetime) -> AlertMessage:
    title = "recallwatch: test alert"
    text = (f"A test message from recallwatch, sent {now:%Y-%m-%d %H:%M} UTC. Alerts for drift "
            "episodes (one when an episode opens, one when it resolves) arrive on this channel.")
    return AlertMessage(None, "test", "", "", None, title, text,
                        {"test": True, "sent_at": now.isoformat()})


# ---------------------------------------------------------------------------------- delivery

class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirected POST would arrive as a GET without its body: count it as a failure."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _post_json(url: str, body: bytes, headers: dict[str, str], timeout: float) -> None:
    request = urllib.request.Request(
        url, data=body, method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "recallwatch", **headers})
    try:
        # the 2xx is the server's word that it has the message: its body is not read (one cut
        # short failed a delivered alert; one trickled a byte at a time held the run, the
        # timeout bounding each read, not all of them)
        with _OPENER.open(request, timeout=timeout):
            pass
    except urllib.error.HTTPError as exc:
        exc.close()  # its body is not needed, and an open one leaks the connection
        raise


def webhook_body(message: AlertMessage) -> bytes:
    payload = {**message.fields, "event": message.event, "episode_id": message.episode_id,
               "title": message.title, "text": message.text}
    return json.dumps(payload, sort_keys=True).encode("utf-8")


def sign(body: bytes, secret: str) -> str:
    """The X-Recallwatch-Signature value: sha256=<hex HMAC-SHA256 of the exact body bytes>."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def _slack_escape(text: str) -> str:
    # Slack's mrkdwn reads &, < and > as markup; a slice from the logs must stay text
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_body(message: AlertMessage) -> bytes:
    text = f"*{_slack_escape(message.title)}*\n{_slack_escape(message.text)}"
    if len(text) > 3000:  # Slack's limit for a section's text
        cut = text[:2999]
        entity = cut.rfind("&")   # never half an escape: "&am" would show as text
        if entity > len(cut) - 5 and ";" not in cut[entity:]:
            cut = cut[:entity]
        text = cut + "…"
    # the fallback text shows in notifications, where <!channel> would page everyone too
    payload = {"text": _slack_escape(message.title),
               "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]}
    return json.dumps(payload).encode("utf-8")


# headers up to RFC 5322's 998 characters a line: the default 78 folded a subject without a
# space to fold at before its first word, and readers then showed it with a space in front
MAIL_POLICY = email.policy.default.clone(max_line_length=998)


def email_message(channel: Channel, message: AlertMessage, now: datetime) -> EmailMessage:
    mail = EmailMessage(policy=MAIL_POLICY)
    mail["Subject"] = verbatim_line(message.title, 250)   # its slice already one line
    mail["From"] = channel.sender
    mail["To"] = ", ".join(channel.recipients)
    mail["Date"] = format_datetime(now.replace(tzinfo=UTC))
    mail.set_content(message.text)
    return mail


class _Refused(smtplib.SMTPRecipientsRefused):
    """The mail went to some recipients and the server refused the others (`recipients`)."""


def _deliver(channel: Channel, message: AlertMessage, *, now: datetime, timeout: float,
             to: tuple[str, ...] | None = None) -> None:
    """One attempt (a mail to `to` alone when given, a subset of the channel's recipients
    still without it; the mail's To: names them all); raises on failure."""
    if channel.name == "webhook":
        body = webhook_body(message)
        headers = {SIGNATURE_HEADER: sign(body, channel.secret)} if channel.secret else {}
        _post_json(channel.url, body, headers, timeout)
    elif channel.name == "slack":
        _post_json(channel.url, slack_body(message), {}, timeout)
    elif channel.name == "email":
        smtp = (smtplib.SMTP_SSL(channel.host, channel.port, timeout=timeout,
                                 context=ssl.create_default_context()) if channel.tls
                else smtplib.SMTP(channel.host, channel.port, timeout=timeout))
        try:
            if channel.starttls:
                smtp.starttls(context=ssl.create_default_context())
            if channel.user:
                smtp.login(channel.user, channel.password)
            refused = smtp.send_message(email_message(channel, message, now),
                                        to_addrs=list(to or channel.recipients))
        finally:
            # not `with`: it raises when QUIT is answered with anything but 221, after the
            # server took the mail, which was then mailed again on every retry
            try:
                smtp.quit()
            except (smtplib.SMTPException, OSError):
                smtp.close()
        if refused:   # taken for some recipients only: the others never got it
            raise _Refused(refused)
    else:
        raise ValueError(f"unknown channel {channel.name!r}")


def describe_failure(exc: BaseException, channel: Channel) -> str:
    """Why an attempt failed, in a few words that hold no URL, token or password."""
    if isinstance(exc, urllib.error.HTTPError):
        text = f"HTTP {exc.code}"
    elif isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        return describe_failure(exc.reason, channel)
    elif isinstance(exc, smtplib.SMTPResponseException):
        text = f"SMTP {exc.smtp_code}"
    elif isinstance(exc, smtplib.SMTPRecipientsRefused):
        text = f"SMTP recipients refused ({len(exc.recipients)} of {len(channel.recipients)})"
    elif isinstance(exc, smtplib.SMTPServerDisconnected):
        text = "SMTP server disconnected"
    elif isinstance(exc, smtplib.SMTPNotSupportedError):
        # smtplib names the extension: STARTTLS, AUTH, or SMTPUTF8 for a non-ASCII address
        text = f"SMTP server lacks what the mail needs: {one_line(str(exc), 200)}"
    elif isinstance(exc, ConnectionRefusedError):
        text = "connection refused"
    elif isinstance(exc, TimeoutError):
        text = "timed out"
    elif isinstance(exc, socket.gaierror):
        text = "host name not found"
    elif isinstance(exc, ssl.SSLError):
        text = f"TLS error ({exc.reason or 'handshake'})"
    elif isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror.lower()
    else:
        text = type(exc).__name__
    # belt and braces: the words above are smtplib's, the system's or ours, and hold no URL
    # or password; should one ever echo a secret, it goes. A short one is left, since masking
    # each "p" or "server" would garble the reason and show where the secret occurs in it.
    return mask_secrets(text, [s for s in channel.secrets if len(s) >= MASKED_LENGTH])


def send_notice(channels: list[Channel], title: str, text: str, *, now: datetime,
                event: str = "notice", fields: dict | None = None, retries: int = 2,
                backoff: float = 1.0, timeout: float = 10.0) -> dict[str, str | None]:
    """A one-off message that belongs to no episode (e.g. a failed scheduled task) on every
    channel, each tried `retries` times; nothing is recorded. Returns each channel's last
    error (None when delivered), secret-free; never raises for a channel that is down."""
    message = AlertMessage(None, event, "", "", None, one_line(title), text,
                           dict(fields or {}))
    stamp = _naive_utc(now)
    return {channel.name: _attempt(channel, message, now=stamp, retries=retries,
                                   backoff=backoff, timeout=timeout)[1]
            for channel in channels}


def _attempt(channel: Channel, message: AlertMessage, *, now: datetime, retries: int,
             backoff: float, timeout: float, to: tuple[str, ...] | None = None,
             ) -> tuple[int, str | None, tuple[str, ...] | None]:
    """Up to `retries` tries, waiting backoff, 2*backoff, ... between them; a mail goes to
    `to` (default: every recipient), and a try after a partial refusal to the refused ones
    alone. Returns (tries made, the last error or None when delivered, the recipients still
    without the mail: None for all, or for none when delivered)."""
    error = None
    for attempt in range(retries):
        if attempt:
            time.sleep(backoff * 2 ** (attempt - 1))
        try:
            _deliver(channel, message, now=now, timeout=timeout, to=to)
        except Exception as exc:  # any failure is recorded and retried later, never raised
            error = describe_failure(exc, channel)
            if isinstance(exc, _Refused):   # the others have it: never mail them twice
                to = tuple(a for a in (to or channel.recipients) if a in exc.recipients)
            log.debug("alert %s of %s via %s: attempt %d failed: %s", message.event,
                      message.episode_id, channel.name, attempt + 1, error)
            continue
        return attempt + 1, None, None
    return retries, error, to


def _naive_utc(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(tzinfo=None) if now.tzinfo else now


def pending_alerts(con, config: Config, channel_names: list[str]) -> list[dict]:
    """The rows of sql/pending_alerts.sql as dicts: every alert event of the configured cutoff
    and metrics, per channel, with what the alerts table holds for it."""
    cursor = con.execute(sql("pending_alerts"),
                         {"k": config.alert_cutoff, "metrics": list(config.alert_metrics),
                          "channels": channel_names, "routes": list(config.routes)})
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def send_alerts(con, config: Config, channels: list[Channel], *, report: str | None = None,
                dry_run: bool = False, now: datetime, retries: int = 3, backoff: float = 1.0,
                timeout: float = 10.0) -> AlertSummary:
    """Deliver the pending alert messages, in window order: for each drift_events row that
    opens or resolves an episode (daily windows, k = config.alert_cutoff, metric in
    config.alert_metrics) and each channel, unless the alerts table says it was sent; and a
    withdrawal of each sent opening whose episode drift no longer finds.

    Each message is tried up to `retries` times (waiting backoff, 2*backoff, ... seconds),
    then its alerts row is replaced in its own transaction: status sent or failed, attempts
    accumulated over calls, the last error without secrets, first_tried kept, last_tried =
    `now` (naive UTC). A failure never raises; the next call tries again. `report` (a path or
    URL) is quoted in the messages. With dry_run nothing is sent or written: the summary lists
    what would go. Calling it again over the same rows sends nothing and changes no row."""
    if retries < 1:
        raise ValueError("retries must be at least 1")
    names = [c.name for c in channels]
    if len(set(names)) != len(names):
        raise RecallwatchError(f"alert channels {', '.join(names)} name one channel twice; "
                               "configure each of webhook, slack and email at most once.")
    summary = AlertSummary()
    if not channels:
        return summary
    now = _naive_utc(now)
    by_name = {c.name: c for c in channels}
    opened: set[tuple[str, str]] = set()   # (episode, channel) whose opening went out
    past: set[tuple[str, str]] = set()     # (episode, channel) whose opening is history
    pending = pending_alerts(con, config, names)
    if not dry_run:   # a failed message no longer due would otherwise stay failed for good
        with transaction(con):
            run_script(con, "forget_stale_alerts", {
                "channels": names,
                "due": [f"{r['episode_id']}/{r['event']}/{r['channel']}" for r in pending]})
    since = channels_since(con, names, record=not dry_run)
    # when each episode resolved: the end of its resolving window
    resolved = {row["episode_id"]: row["window_end"] for row in pending
                if row["event"] == "resolved"}
    for row in pending:
        key = (row["episode_id"], row["channel"])
        held = row["event"] == "resolved" and key not in opened
        if row["status"] in ("sent", "past"):
            summary.skipped += row["status"] == "sent"
            if row["event"] == "opened":
                (opened if row["status"] == "sent" else past).add(key)
            continue
        # an episode that had resolved before alerting began on the channel is not news
        # there: its opening, never tried, is recorded past, and so is its resolution
        if row["status"] is None and (
                (row["event"] == "opened" and row["episode_id"] in resolved
                 and resolved[row["episode_id"]] <= since[row["channel"]])
                or (row["event"] == "resolved" and key in past)):
            summary.past += 1
            if row["event"] == "opened":
                past.add(key)
            if not dry_run:
                _record(con, row, status="past", attempts=0, last_error=None, first_tried=now,
                        now=now, undelivered=None)
            continue
        channel, message = by_name[row["channel"]], build_message(row, report)
        if dry_run:
            if row["event"] == "opened":
                opened.add((row["episode_id"], channel.name))
            summary.deliveries.append(Delivery(channel.name, message, "would send"
                                               if not held else HELD, row["attempts"] or 0))
            continue
        # a mail the server refused for some recipients goes to those alone, if still set
        to = row["undelivered_to"] and tuple(
            a for a in channel.recipients if a in row["undelivered_to"])
        undelivered = None
        if held:   # a resolution never reaches a channel before its opening
            tries, error, undelivered = 0, HELD, row["undelivered_to"]
        elif to == ():   # each recipient that lacked it is no longer set
            tries, error = 0, None
        else:
            tries, error, undelivered = _attempt(channel, message, now=now, retries=retries,
                                                 backoff=backoff, timeout=timeout,
                                                 to=to or None)
        if error is None and row["event"] == "opened":
            opened.add((row["episode_id"], channel.name))
        status = "sent" if error is None else "failed"
        attempts = (row["attempts"] or 0) + tries
        _record(con, row, status=status, attempts=attempts, last_error=error,
                first_tried=row["first_tried"] or now, now=now, undelivered=undelivered)
        log.info("alert %s on slice %s %s via %s: %s%s", message.event, message.slice,
                 message.metric, channel.name, status, f" ({error})" if error else "")
        if error is None:
            summary.sent += 1
        else:
            summary.failed += 1
        summary.deliveries.append(Delivery(channel.name, message, status, attempts, error))
    return summary


def channels_since(con, names: list[str], *, record: bool) -> dict[str, datetime]:
    """When alerting began on each channel (table alert_channels), in the data's time: the end
    of the last window drift had judged at the first call that had it (recorded when `record`;
    the earliest time when nothing was judged yet), so a day-by-day replay of history (an
    Airflow catchup) pages what each day brings, as the days did. A channel of an earlier
    release, with alerts rows but no alert_channels row, began with its first try; rows of an
    earlier release hold the clock's time of that first call."""
    ((judged,),) = con.execute("SELECT max(window_end) FROM drift_events").fetchall()
    since = {}
    for name in names:
        ((known, first),) = con.execute(
            "SELECT (SELECT min(since) FROM alert_channels WHERE channel = $c), "
            "(SELECT min(first_tried) FROM alerts WHERE channel = $c)", {"c": name}).fetchall()
        since[name] = known or first or judged or datetime.min
        if known is None and record:
            with transaction(con):
                con.execute("INSERT INTO alert_channels VALUES ($c, $since)",
                            {"c": name, "since": since[name]})
    return since


def _record(con, row: dict, *, status: str, attempts: int, last_error: str | None,
            first_tried: datetime, now: datetime, undelivered) -> None:
    """Replace the alerts row of one event (a row of sql/pending_alerts.sql) on its channel, in
    a transaction of its own: sent or failed after a delivery, or past (an episode that had
    resolved before alerting began on the channel: never sent, withdrawn nor put right)."""
    with transaction(con):
        run_script(con, "record_alert", {
            "episode_id": row["episode_id"], "event": row["event"], "channel": row["channel"],
            "status": status, "attempts": attempts, "last_error": last_error,
            "first_tried": first_tried, "last_tried": now, "slice": row["slice"],
            "metric": row["metric"], "window_start": row["window_start"],
            "route": row["route"], "k": row["k"], "gold_version": row["gold_version"],
            "direction": row["direction"],
            "undelivered_to": list(undelivered) if undelivered else None})


def send_test(channels: list[Channel], *, now: datetime,
              timeout: float = 10.0) -> list[tuple[str, bool, str | None]]:
    """One test message per channel, tried once: (channel name, delivered, error or None).
    Nothing is written to the warehouse."""
    message = _test_message(_naive_utc(now))
    results = []
    for channel in channels:
        _, error, _ = _attempt(channel, message, now=_naive_utc(now), retries=1,
                               backoff=0.0, timeout=timeout)
        log.info("test alert via %s: %s", channel.name, error or "sent")
        results.append((channel.name, error is None, error))
    return results
