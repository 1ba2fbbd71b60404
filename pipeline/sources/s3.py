"""Request logs in S3 or an S3-compatible store (MinIO, Ceph, R2): `s3://bucket/prefix/`, a key,
or a glob (`s3://bucket/logs/*/part-*.parquet`), read through pyarrow's S3 filesystem. Each
object with a log suffix is one delivery, named `s3://bucket/key`. With an interval, only the
hive partitions of the UTC days it touches are listed and read (`dt=2026-11-01/`, any other key
holding a date, or nested `year=/month=/day=`): the levels above a day are listed one at a
time without their contents, so a year of partitions costs one short listing, not a listing
of every object. An object's identity is its ETag, learnt with one HEAD request, so an
unchanged object is skipped without being downloaded; fetching streams it to a temporary file
that keeps its name (and so its suffix), removed afterwards.

Where the store is and who we are come from the standard AWS settings: AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN or AWS_PROFILE (read by the AWS SDK inside pyarrow),
AWS_REGION / AWS_DEFAULT_REGION, AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL and AWS_CA_BUNDLE
(read here and passed on: pyarrow does not read the endpoint variables itself). A store that
refuses us, a bucket that does not exist and an endpoint that cannot be reached are each one
sentence naming the URI and the variable to check; no secret is ever part of it."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from pipeline.endpoints import http_endpoint
from pipeline.errors import RecallwatchError
from pipeline.sources import ReadOptions

# Bytes copied at a time when an object is fetched: memory stays bounded by this, not by the
# object's size. pyarrow asks the store for each read as one ranged GET, so larger chunks mean
# fewer requests (a 1 GB object: 64); 8-16 MB is the range size AWS suggests.
FETCH_CHUNK = 16 << 20
# The most of an object's name kept for its temporary copy, from the end (file systems allow
# 255 bytes; the last part of an S3 key may be longer).
MAX_NAME_BYTES = 200
_GLOB_MAGIC = re.compile(r"[*?[]")
_ISO_DAY = re.compile(r"(\d{4})-?(\d{2})-?(\d{2})(?:$|[T _-])")
# Nested date partitions, e.g. year=2026/month=11/day=01/.
_DATE_PARTS = ("year", "month", "day")


@dataclass(frozen=True)
class Store:
    """How to reach the store, from the environment. `shown` names it in messages (an
    endpoint URL without any user:password part, or AWS S3 and its region)."""

    endpoint: str | None
    scheme: str
    region: str | None
    ca_file: str | None
    setting: str   # the variable that says where the store is, for messages

    @property
    def shown(self) -> str:
        if self.endpoint:
            return f"{self.scheme}://{self.endpoint}"
        return f"AWS S3 ({self.region})" if self.region else "AWS S3"


@dataclass(frozen=True, eq=False)
class S3Object:
    """One object: its URI is its name, its ETag its identity."""

    filesystem: object   # pyarrow.fs.S3FileSystem
    store: Store
    bucket: str
    key: str
    size: int
    mtime: datetime | None

    @property
    def source(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def digest(self) -> str:
        """The object's ETag, from a HEAD request: it changes whenever the content does (even
        an overwrite of the same size in the same second, which size and modification time
        would miss) and stays when the same bytes are uploaded again. A store that sends no
        ETag is judged by size and modification time."""
        with _plain_errors(self.source, self.store, self.bucket):
            with self.filesystem.open_input_file(f"{self.bucket}/{self.key}") as head:
                etag = head.metadata().get("ETag", b"").decode("utf-8", "replace").strip('"')
        if etag:
            return f"etag:{etag}"
        stamp = self.mtime.isoformat() if self.mtime else "unknown"
        return f"size={self.size};mtime={stamp}"

    @contextmanager
    def fetch(self) -> Iterator[Path]:
        """The object downloaded, in chunks, to a temporary file of the same name."""
        name = PurePosixPath(self.key).name   # its end, the suffix, tells formats its kind
        name = name.encode("utf-8")[-MAX_NAME_BYTES:].decode("utf-8", "ignore")
        with tempfile.TemporaryDirectory(prefix="recallwatch-s3-") as scratch:
            path = Path(scratch) / name
            with _plain_errors(self.source, self.store, self.bucket):
                with (self.filesystem.open_input_stream(f"{self.bucket}/{self.key}",
                                                        compression=None) as remote,
                      open(path, "wb") as local):
                    while chunk := remote.read(FETCH_CHUNK):
                        local.write(chunk)
            yield path


def s3_deliveries(uri: str, suffixes: tuple[str, ...], options: ReadOptions) -> list[S3Object]:
    """The objects of an s3:// URI with one of the `suffixes`, in key order: the object a key
    names, everything under a prefix (a trailing `/`, or a key that is no object), or what a
    glob matches (`*`, `?`, `[...]` within one level, `**` across levels; a matched folder
    gives everything under it). With options.start/end, only the day partitions that
    [start, end) touches are read (objects outside any day partition are read too: nothing
    says which days they hold); no partition for those days is an empty list (a scheduled
    interval without logs is no error). Without an interval, under a prefix that holds
    nothing at all, or where the URI names no log object on any day (a mistyped glob or
    suffix, which would otherwise pass every scheduled interval without a word), finding no
    object is an error, as for local paths."""
    bucket, key = _split(uri)
    store = _store_from_environment(bucket)
    filesystem = _filesystem(store)
    window = _window(options)
    with _plain_errors(uri, store, bucket):
        infos, anything = _list(filesystem, bucket, key, window, suffixes, uri)
        if not infos and window is not None and anything:
            # nothing on the interval's days: is there anything on any day? (listed in full
            # only when the interval found nothing)
            anything = bool(_list(filesystem, bucket, key, None, suffixes, uri)[0])
    if not infos and (window is None or not anything):
        raise RecallwatchError(
            f"no input files found in {uri} (looked for {', '.join(suffixes)}).")
    return [S3Object(filesystem, store, bucket, info.path.partition("/")[2], info.size,
                     info.mtime) for info in sorted(infos, key=lambda i: i.path)]


# ------------------------------------------------------------------------------- listing

def _list(filesystem, bucket: str, key: str, window, suffixes: tuple[str, ...], uri: str):
    """The file infos to read, and whether the listed prefix held anything at all."""
    from pyarrow.fs import FileType

    pattern: list[str] | None = None
    parts = key.split("/")
    magic = [i for i, part in enumerate(parts) if _GLOB_MAGIC.search(part)]
    if magic:
        pattern = [p for p in parts if p]
        root = "/".join(parts[:magic[0]])
    elif key and not key.endswith("/"):
        info = filesystem.get_file_info(f"{bucket}/{key}")
        if info.type == FileType.File:   # one object, named: read it whatever its day
            if not key.lower().endswith(suffixes):
                raise RecallwatchError(
                    f"{uri}: unsupported file type; expected one of {', '.join(suffixes)}.")
            return [info], True
        root = key
    else:
        root = key
    base = f"{bucket}/{root.strip('/')}".rstrip("/")
    found, anything = _walk(filesystem, base, window, ())
    wanted = []
    for info in found:
        name = info.path.partition("/")[2]
        if not name.lower().endswith(suffixes):
            continue   # not a log: a _SUCCESS marker, a schema file, ...
        if pattern is not None and not _glob_matches(pattern, name.split("/")):
            continue
        if "//" in info.path:   # pyarrow refuses an empty path component: one sentence
            raise _empty_level(info.path)
        wanted.append(info)
    return wanted, anything


def _empty_level(path: str) -> RecallwatchError:
    """The error of a key with an empty level (`logs//dt=.../part.jsonl`, as a writer that joins
    a prefix ending in `/` with one starting with `/` makes it): pyarrow's S3 filesystem can
    neither open nor list it."""
    return RecallwatchError(
        f"s3://{path}: a key with an empty level (//) cannot be read through pyarrow's S3 "
        "filesystem; copy the objects to keys without one (or give a prefix that holds none) "
        "and run again.")


def _walk(filesystem, base: str, window, partial: tuple[int, ...]):
    """The objects under `base` (bucket/prefix) in the window: without one, in one recursive
    listing; with one, level by level until a day is known, then that day's in one listing.
    Returns the objects and whether `base` held anything."""
    from pyarrow.fs import FileSelector, FileType

    try:
        entries = filesystem.get_file_info(
            FileSelector(base, recursive=window is None, allow_not_found=False))
    except FileNotFoundError:
        return [], False
    if window is None:
        return [e for e in entries if e.type == FileType.File], bool(entries)
    found = [e for e in entries if e.type == FileType.File]   # outside any day: read them
    for entry in entries:
        if entry.type != FileType.Directory:
            continue
        if entry.path.rstrip("/") == base.rstrip("/"):
            # the folder itself, listed again: keys `base//...` (walked into, it never ended)
            raise _empty_level(f"{base.rstrip('/')}//")
        verdict, nested = _partition(entry.base_name, partial, window)
        if verdict == "day":
            found += _walk(filesystem, entry.path, None, ())[0]
        elif verdict == "descend":
            found += _walk(filesystem, entry.path, window, nested)[0]
    return found, bool(entries)


def _partition(name: str, partial: tuple[int, ...], window) -> tuple[str, tuple[int, ...]]:
    """What to do with a folder under the walk: 'day' (a day in the window: read all of it),
    'skip' (a day or year/month outside it) or 'descend' (no day known yet), and the
    year/month/day parts known below it."""
    field, sep, value = name.partition("=")
    if not sep:
        return "descend", partial
    day = _day_value(value)
    if day is not None:
        return ("day" if _overlaps(day, day + timedelta(days=1), window) else "skip"), ()
    if field.lower() != _DATE_PARTS[min(len(partial), 2)] or not value.isdigit():
        return "descend", partial
    nested = (*partial, int(value))
    span = _span(nested)
    if span is None or not _overlaps(*span, window):
        return "skip", nested
    return ("day" if len(nested) == 3 else "descend"), nested


def _day_value(value: str) -> date | None:
    """A partition value that is a day: 2026-11-01 or 20261101 (a time after it is ignored)."""
    match = _ISO_DAY.match(value)
    if not match:
        return None
    try:
        return date(*map(int, match.groups()))
    except ValueError:
        return None


def _span(parts: tuple[int, ...]) -> tuple[date, date] | None:
    """The days [first, after) of a year, a year and month, or a day; None for no date."""
    try:
        if len(parts) == 1:
            return date(parts[0], 1, 1), date(parts[0] + 1, 1, 1)
        if len(parts) == 2:
            first = date(parts[0], parts[1], 1)
            return first, (first + timedelta(days=31)).replace(day=1)
        first = date(*parts)
        return first, first + timedelta(days=1)
    except (ValueError, OverflowError):
        return None


def _overlaps(first: date, after: date, window: tuple[datetime, datetime]) -> bool:
    """Whether the days [first, after) meet the interval [start, end) (either may be open)."""
    start, end = window
    return ((start is None or datetime.combine(after, datetime.min.time()) > start)
            and (end is None or datetime.combine(first, datetime.min.time()) < end))


def _window(options: ReadOptions) -> tuple[datetime | None, datetime | None] | None:
    """The interval as naive UTC date-times, None when neither end is given."""
    if options.start is None and options.end is None:
        return None

    def naive(when: datetime | None) -> datetime | None:
        if when is None or when.tzinfo is None:
            return when
        return when.astimezone(UTC).replace(tzinfo=None)

    return naive(options.start), naive(options.end)


def _glob_matches(pattern: list[str], parts: list[str]) -> bool:
    """Whether a key, or a folder it is in, matches a glob given as its levels."""
    return any(_match_levels(pattern, parts[:n]) for n in range(1, len(parts) + 1))


def _match_levels(pattern: list[str], parts: list[str]) -> bool:
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_match_levels(rest, parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], head) and _match_levels(rest, parts[1:])


def _split(uri: str) -> tuple[str, str]:
    """(bucket, key or prefix or pattern) of an s3:// URI."""
    rest = uri.split("://", 1)[1]
    bucket, _, key = rest.partition("/")
    if not bucket or _GLOB_MAGIC.search(bucket):
        raise RecallwatchError(f"{uri}: give an S3 location as s3://BUCKET/PREFIX/.")
    return bucket, key


# ------------------------------------------------------------------------ the connection

def _store_from_environment(bucket: str) -> Store:
    """Endpoint and region from AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL and AWS_REGION /
    AWS_DEFAULT_REGION. Without either, the bucket's own region is asked for (AWS S3 answers
    that without credentials), so a bucket outside the SDK's default region is found."""
    setting = next((name for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
                    if os.environ.get(name, "").strip()), None)
    url = os.environ[setting].strip() if setting else ""
    region = (os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
              or "").strip() or None
    ca_file = os.environ.get("AWS_CA_BUNDLE") or None
    if not url:
        if region is None:
            region = _bucket_region(bucket)
        return Store(None, "https", region, ca_file,
                     "AWS_REGION (or AWS_ENDPOINT_URL for a store other than AWS S3)")
    given = url if "://" in url else f"https://{url}"
    parts = http_endpoint(given)
    if parts is None:
        try:
            shown = urlsplit(given)
            got = (f"{shown.scheme}://{shown.hostname or ''}"
                   f"{':...' if ':' in shown.netloc.rpartition('@')[2] else ''}")
        except ValueError:   # an unclosed IPv6 bracket
            got = "a URL that does not parse"
        raise RecallwatchError(
            f"{setting} must be http(s)://HOST[:PORT] of an S3-compatible store; got {got}.")
    port = parts.port
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    endpoint = f"{host}:{port}" if port else host
    return Store(endpoint, parts.scheme, region, ca_file, setting)


def _bucket_region(bucket: str) -> str | None:
    from pyarrow.fs import resolve_s3_region

    try:
        return resolve_s3_region(bucket)
    except (OSError, ValueError):
        return None   # the SDK's own choice; a wrong one is reported when listing


def _filesystem(store: Store):
    from pyarrow.fs import S3FileSystem

    # credentials: the SDK's chain (environment, AWS_PROFILE and ~/.aws, instance roles)
    return S3FileSystem(region=store.region, endpoint_override=store.endpoint,
                        scheme=store.scheme, tls_ca_file_path=store.ca_file)


@contextmanager
def _plain_errors(uri: str, store: Store, bucket: str) -> Iterator[None]:
    """Turn the store's refusals and network failures into one sentence for the user."""
    try:
        yield
    except RecallwatchError:
        raise
    except FileNotFoundError:
        raise RecallwatchError(
            f"{uri}: no such object at {store.shown} (was it deleted while being read?); "
            "run again.") from None
    except OSError as exc:
        raise RecallwatchError(_explain(str(exc), uri, store, bucket)) from None


_REFUSED = ("ACCESS_DENIED", "INVALID_ACCESS_KEY_ID", "SIGNATURE_DOES_NOT_MATCH",
            "EXPIRED_TOKEN", "INVALID_CLIENT_TOKEN_ID", "UNRECOGNIZED_CLIENT", "Forbidden",
            "Access Denied", "HTTP response code: 403")
_UNREACHABLE = ("NETWORK_CONNECTION", "curlCode", "Could not connect", "Could not resolve",
                "Connection refused", "timed out")


def _explain(text: str, uri: str, store: Store, bucket: str) -> str:
    detail = _scrub(_detail(text))
    if "NO_SUCH_BUCKET" in text or "bucket does not exist" in text:
        return (f"{uri}: bucket {bucket} does not exist at {store.shown}; check the bucket "
                f"name, and {store.setting} if it is kept elsewhere.")
    if any(sign in text for sign in _REFUSED):
        return (f"{uri}: {store.shown} refused access ({detail}); check AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN for temporary credentials) or "
                f"AWS_PROFILE, and that they may list and read bucket {bucket}.")
    if any(sign in text for sign in _UNREACHABLE):
        return (f"{uri}: cannot reach the S3 store at {store.shown} ({detail}); check "
                f"{store.setting} and the network.")
    return (f"{uri}: the S3 store at {store.shown} failed the request ({detail}); check the "
            "URI and the AWS_* settings.")


def _detail(text: str) -> str:
    """The store's own words: 'SIGNATURE_DOES_NOT_MATCH during ListObjectsV2 operation: ...'
    without the request ID and the SDK's prefix."""
    text = text.split("AWS Error ", 1)[-1]
    text = re.sub(r"\s*\(Request ID: [^)]*\)", "", text)
    text = " ".join(text.split())
    return text[:300].rstrip(" .")


def _scrub(text: str) -> str:
    """Any secret of the environment that found its way into a message, masked."""
    for name in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        secret = os.environ.get(name)
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return re.sub(r"//[^/@\s]+@", "//***@", text)
