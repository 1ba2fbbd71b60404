"""HTTP endpoints given in settings (the judge's OPENAI_BASE_URL, an S3-compatible store's
AWS_ENDPOINT_URL): one check of what a client can connect to."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit


def http_endpoint(url: str) -> SplitResult | None:
    """The parts of an http:// or https:// URL with a host and, if given, a port number urllib
    reads; None for anything else (no scheme: user:pass@host reads as the scheme 'user'; an
    unclosed IPv6 bracket; a port that is no number, 0 or out of range; a host name no request
    can look up: an empty label, as in a..b, or one longer than 63 characters)."""
    try:
        parts = urlsplit(url)
        if parts.port is not None and parts.port < 1:   # .port raises for most bad ports
            return None
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    if ":" not in parts.hostname:   # an IPv6 address has no labels
        try:
            parts.hostname.encode("idna")   # what the request does with it
        except UnicodeError:
            return None
    return parts
