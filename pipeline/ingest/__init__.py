"""Ingest: read logs, gold sets and index manifests into the warehouse without losing a record.

Every input record ends either loaded or in `quarantine` with its source, line and one reason,
and per file `read = loaded + quarantined` is checked before the file's transaction commits.
A file is ingested in one transaction; a file whose content hash and options are unchanged is
skipped, and a file whose content changed replaces what it loaded before (a request it shared
with another file stays), so ingesting twice changes nothing. One module per input: files
(bookkeeping shared by all), logs (whose fields are declared once, in fields), gold, index."""

from pipeline.ingest.files import (
    DEFAULT_MAX_RECORD_BYTES,
    LOG_SUFFIXES,
    TABLE_SUFFIXES,
    FileResult,
    IngestSummary,
    expand_paths,
)
from pipeline.ingest.gold import ingest_gold
from pipeline.ingest.index import ingest_index
from pipeline.ingest.logs import ingest_logs

__all__ = [
    "DEFAULT_MAX_RECORD_BYTES", "LOG_SUFFIXES", "TABLE_SUFFIXES", "FileResult", "IngestSummary",
    "expand_paths", "ingest_gold", "ingest_index", "ingest_logs",
]
