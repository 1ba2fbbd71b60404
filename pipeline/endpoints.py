"""HTTP endpoints given in settings (the judge's OPENAI_BASE_URL, an S3-compatible store's
AWS_ENDPOINT_URL): one check of what a client can connect to."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit


def http_endpoint(url: str) -> SplitResult | None:
    """The parts of an http:// or https:// URL with a host and, if given, a port from 1 to
    65535; None for anything else (no scheme: user:pass@host reads as the scheme 'user')."""
    parts = urlsplit(url)
    try:
        port_ok = parts.port is None or parts.port >= 0   # raises for no number, out of range
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        return None
    return parts
