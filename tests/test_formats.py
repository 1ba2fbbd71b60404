"""Log formats (pipeline/formats): OpenInference spans, written by the OpenTelemetry SDK through
its OTLP encoder or laid out as Phoenix's spans table, and RAGAS datasets load as the same
requests as their native records and score the same; a RAGAS dataset is a gold set too, and
its requests' recall is RAGAS's ID-based context recall; detection names what it expects."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from google.protobuf.json_format import MessageToDict
from openinference.semconv.trace import (
    DocumentAttributes,
    OpenInferenceSpanKindValues,
    SpanAttributes,
)
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pipeline.ingest import ingest_gold, ingest_logs
from pipeline.score import score
from tests.conftest import golden, request, write_jsonl

CUTOFFS = (1, 3, 5, 10, 100)
T0 = datetime(2026, 11, 1, 10, 0, 0, 123456, tzinfo=UTC)


# ------------------------------------------------------------------ an instrumented RAG app

class OtlpJsonLines(SpanExporter):
    """Writes each export as one ExportTraceServiceRequest a line, encoded by the OTLP
    exporters' own encoder: ids as hex (the OTLP/JSON spec, as the collector's file exporter
    writes them) or as protobuf's JSON printer leaves them (base64)."""

    def __init__(self, path, ids: str = "hex"):
        self.path, self.ids = path, ids

    def export(self, spans) -> SpanExportResult:
        message = MessageToDict(encode_spans(spans))
        if self.ids == "hex":
            for resource in message["resourceSpans"]:
                for scope in resource["scopeSpans"]:
                    for span in scope["spans"]:
                        for key in ("traceId", "spanId", "parentSpanId"):
                            if key in span:
                                span[key] = base64.b64decode(span[key]).hex()
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(message) + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def nanos(seconds: float) -> int:
    return int(T0.timestamp() * 1e6) * 1000 + int(seconds * 1e9)


def run_app(tracer, case: dict, at: float) -> str:
    """One request of a RAG app instrumented with OpenInference: a CHAIN root, one RETRIEVER
    span per retrieval step (none when `steps` is empty), an LLM span. Returns the trace id."""
    S, D = SpanAttributes, DocumentAttributes
    kinds = OpenInferenceSpanKindValues
    metadata = {"index_version": "idx-1", "gold_id": case["gold_id"], "tenant": "acme",
                **case.get("metadata", {})}
    with tracer.start_as_current_span("rag", start_time=nanos(at), attributes={
            S.OPENINFERENCE_SPAN_KIND: kinds.CHAIN.value, S.INPUT_VALUE: case["query"],
            S.OUTPUT_VALUE: "an answer", S.SESSION_ID: case["session"],
            S.METADATA: json.dumps(metadata), S.TAG_TAGS: ["beta"]}) as root:
        for n, step in enumerate(case["steps"]):
            attributes = {S.OPENINFERENCE_SPAN_KIND: kinds.RETRIEVER.value,
                          S.INPUT_VALUE: case["query"]}
            for i, (chunk_id, chunk_score) in enumerate(step):
                prefix = f"{S.RETRIEVAL_DOCUMENTS}.{i}."
                attributes[prefix + D.DOCUMENT_ID] = chunk_id
                attributes[prefix + D.DOCUMENT_SCORE] = chunk_score
                attributes[prefix + D.DOCUMENT_CONTENT] = f"text of {chunk_id}"
            with tracer.start_as_current_span("retrieve", start_time=nanos(at + 0.1 + n / 10),
                                              attributes=attributes):
                pass
        with tracer.start_as_current_span("llm", start_time=nanos(at + 0.5), attributes={
                S.OPENINFERENCE_SPAN_KIND: kinds.LLM.value, S.INPUT_VALUE: "a long prompt",
                S.OUTPUT_VALUE: "an answer"}):
            pass
        return format(root.get_span_context().trace_id, "032x")


CASES = [
    # found 2 of 3 in one step
    {"query": "minimum balance?", "gold_id": "g-1", "session": "s-1",
     "steps": [[("a", 0.9), ("x", 0.5), ("b", 0.4)]]},
    # agentic: c and a only in the second step
    {"query": "fee?", "gold_id": "g-2", "session": "s-1",
     "steps": [[("x", 0.8), ("y", 0.7)], [("c", 0.9), ("a", 0.6)]]},
    # retrieval ran and found nothing: a real 0
    {"query": "rural balance?", "gold_id": "g-1", "session": "s-2", "steps": [[]]},
]
NO_RETRIEVAL = {"query": "hello", "gold_id": "g-1", "session": "s-2", "steps": []}
GOLDENS = [golden("g-1", ["a", "b", "c"]), golden("g-2", ["a", "c"], question="fee?")]


def traced(exporter, cases) -> list[str]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("rag-app")
    trace_ids = [run_app(tracer, case, at=60.0 * n) for n, case in enumerate(cases)]
    provider.shutdown()
    return trace_ids


def native_records(trace_ids, cases) -> list[dict]:
    """The native log records the traced requests are."""
    records = []
    for n, (trace_id, case) in enumerate(zip(trace_ids, cases, strict=True)):
        steps = [[{"chunk_id": c, "rank": r, "score": s, "text": f"text of {c}"}
                  for r, (c, s) in enumerate(step, start=1)] for step in case["steps"]]
        record = {"request_id": trace_id,
                  "timestamp": datetime.fromtimestamp(nanos(60.0 * n) / 1e9, UTC)
                  .strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                  "query": case["query"], "gold_id": case["gold_id"],
                  "index_version": "idx-1", "session_id": case["session"],
                  "tags": {"tenant": "acme", **case.get("metadata", {}), "beta": "true"}}
        if len(steps) == 1:
            record["retrieved"] = steps[0]
        else:
            record["retrieval_steps"] = steps
        records.append(record)
    return records


def outcome(con) -> dict:
    """What scoring made of the warehouse's requests, source and line aside."""
    return {
        "requests": sorted(con.sql(
            "SELECT request_id, timestamp, query, gold_id, index_version, session_id, k, "
            "n_steps, tags, retrieved FROM requests").fetchall()),
        "scores": sorted(con.sql(
            "SELECT request_id, route, status, k, needed, covered, recall, precision "
            "FROM request_scores").fetchall()),
        "at_k": sorted(con.sql("SELECT request_id, route, k, recall FROM recall_at_k")
                       .fetchall()),
    }


def load_and_score(con, tmp_path, logs, **options) -> dict:
    write_jsonl(tmp_path / "gold.jsonl", GOLDENS)
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    summary = ingest_logs(con, [str(logs)], **options)
    score(con, cutoffs=CUTOFFS)
    return {"summary": (summary.read, summary.loaded, summary.quarantined), **outcome(con)}


@pytest.fixture
def native_outcome(tmp_path_factory):
    """The cases as native JSONL, loaded and scored: what every format must give."""
    from pipeline.warehouse import connect

    tmp = tmp_path_factory.mktemp("native")
    trace_ids = traced(InMemorySpanExporter(), CASES)
    with connect(":memory:") as con:
        result = load_and_score(con, tmp, write_jsonl(tmp / "logs.jsonl",
                                                      native_records(trace_ids, CASES)))
    return trace_ids, result


def replace_ids(result: dict, mapping: dict[str, str]) -> dict:
    """The outcome with request ids renamed (trace ids differ between two SDK runs)."""
    def rename(rows):
        return sorted((mapping.get(r[0], r[0]), *r[1:]) for r in rows)
    return {key: rename(rows) if key != "summary" else rows for key, rows in result.items()}


# ---------------------------------------------------------------------------- OpenInference

@pytest.mark.parametrize("ids", ["hex", "base64"])
def test_otlp_json_lines_from_the_sdk_score_as_the_native_records(con, tmp_path, ids,
                                                                   native_outcome):
    path = tmp_path / "traces.jsonl"
    trace_ids = traced(OtlpJsonLines(path, ids), CASES)
    result = load_and_score(con, tmp_path, path)
    native_ids, expected = native_outcome
    assert result == replace_ids(expected, dict(zip(native_ids, trace_ids, strict=True)))
    assert result["summary"] == (3, 3, 0)


def test_a_trace_exported_twice_into_one_file_is_one_request(con, tmp_path, native_outcome):
    # an exporter retried after a timeout, or two exports appended into one file: each span
    # came twice, and a trace of one retrieval became an agentic request of two equal steps
    path = tmp_path / "traces.jsonl"
    trace_ids = traced(OtlpJsonLines(path), CASES)
    text = path.read_text()
    path.write_text(text + text)
    result = load_and_score(con, tmp_path, path)
    native_ids, expected = native_outcome
    assert result == replace_ids(expected, dict(zip(native_ids, trace_ids, strict=True)))
    assert con.sql("SELECT max(n_steps) FROM requests").fetchall() == [(2,)]


def test_a_span_given_twice_with_other_content_quarantines_its_trace(con, tmp_path):
    path = tmp_path / "traces.jsonl"
    trace_ids = traced(OtlpJsonLines(path), CASES)
    lines = path.read_text().splitlines()
    changed = [line.replace('"fee?"', '"another fee?"') for line in lines]
    assert changed != lines
    path.write_text("\n".join(lines + changed) + "\n")
    load_and_score(con, tmp_path, path)
    ((reason,),) = con.sql("SELECT reason FROM quarantine WHERE kind = 'logs'").fetchall()
    assert "is given twice with other content" in reason
    assert sorted(r for (r,) in con.sql("SELECT request_id FROM requests").fetchall()) == \
        sorted(t for t in trace_ids if t != trace_ids[1])


def test_agentic_trace_is_scored_over_the_union_of_its_retriever_spans(con, tmp_path):
    path = tmp_path / "traces.jsonl"
    trace_ids = traced(OtlpJsonLines(path), CASES)
    load_and_score(con, tmp_path, path)
    assert con.sql("SELECT n_steps FROM requests WHERE request_id = $r",
                   params={"r": trace_ids[1]}).fetchall() == [(2,)]
    # both gold chunks came back only in the second step
    assert con.sql("SELECT status, needed, covered, recall FROM request_scores "
                   "WHERE request_id = $r", params={"r": trace_ids[1]}).fetchall() == [
        ("scored", 2, 2, 1.0)]
    (first_step_only,) = con.sql("SELECT recall FROM recall_at_k WHERE request_id = $r "
                                 "AND k = 1", params={"r": trace_ids[1]}).fetchall()[0]
    assert first_step_only == 0.5   # top 1 of each step: x and c


def test_phoenix_spans_table_scores_as_the_native_records(con, tmp_path, native_outcome):
    exporter = InMemorySpanExporter()
    trace_ids = traced(exporter, CASES)
    phoenix_frame(exporter.get_finished_spans()).to_parquet(tmp_path / "spans.parquet")
    result = load_and_score(con, tmp_path, tmp_path / "spans.parquet")
    native_ids, expected = native_outcome
    assert result == replace_ids(expected, dict(zip(native_ids, trace_ids, strict=True)))


def test_phoenix_spans_as_json_lines_score_as_the_native_records(con, tmp_path,
                                                                  native_outcome):
    exporter = InMemorySpanExporter()
    trace_ids = traced(exporter, CASES)
    phoenix_frame(exporter.get_finished_spans()).reset_index().to_json(
        tmp_path / "spans.jsonl", orient="records", lines=True, date_format="iso",
        date_unit="us")
    result = load_and_score(con, tmp_path, tmp_path / "spans.jsonl")
    native_ids, expected = native_outcome
    assert result == replace_ids(expected, dict(zip(native_ids, trace_ids, strict=True)))


def phoenix_frame(spans) -> pd.DataFrame:
    """Spans as Phoenix's get_spans_dataframe() lays them out: one row per span indexed by
    context.span_id, attributes unflattened under `attributes.`, metadata parsed, documents a
    list of {document.id, document.score, document.content}."""
    S = SpanAttributes
    rows = []
    for span in spans:
        attributes = dict(span.attributes)
        documents: dict[int, dict] = {}
        for key in [k for k in attributes if k.startswith(S.RETRIEVAL_DOCUMENTS + ".")]:
            index, name = key[len(S.RETRIEVAL_DOCUMENTS) + 1:].split(".", 1)
            documents.setdefault(int(index), {})[name] = attributes.pop(key)
        row = {
            "name": span.name, "span_kind": attributes[S.OPENINFERENCE_SPAN_KIND],
            "parent_id": format(span.parent.span_id, "016x") if span.parent else None,
            "start_time": pd.Timestamp(span.start_time, unit="ns", tz="UTC"),
            "end_time": pd.Timestamp(span.end_time, unit="ns", tz="UTC"),
            "status_code": "OK", "status_message": "",
            "context.span_id": format(span.context.span_id, "016x"),
            "context.trace_id": format(span.context.trace_id, "032x"),
            "attributes.retrieval.documents":
                [documents[i] for i in sorted(documents)] if documents else None,
        }
        for key, value in attributes.items():
            row[f"attributes.{key}"] = (json.loads(value) if key == S.METADATA
                                        else list(value) if isinstance(value, tuple) else value)
        rows.append(row)
    return pd.DataFrame(rows).set_index("context.span_id")


def test_otlp_document_file_loads_like_its_lines(con, tmp_path, native_outcome):
    lines = tmp_path / "traces.jsonl"
    trace_ids = traced(OtlpJsonLines(lines), CASES)
    spans = [span for line in lines.read_text().splitlines()
             for span in json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    document = json.loads(lines.read_text().splitlines()[0])
    document["resourceSpans"][0]["scopeSpans"][0]["spans"] = spans
    (tmp_path / "traces.json").write_text(json.dumps(document, indent=2))
    result = load_and_score(con, tmp_path, tmp_path / "traces.json")
    native_ids, expected = native_outcome
    assert result == replace_ids(expected, dict(zip(native_ids, trace_ids, strict=True)))


@pytest.mark.parametrize("indent", [None, 2])
def test_otlp_list_of_exports_is_told_from_its_content(con, tmp_path, native_outcome, indent):
    lines = tmp_path / "traces.jsonl"
    trace_ids = traced(OtlpJsonLines(lines), CASES)
    exports = [json.loads(line) for line in lines.read_text().splitlines()]
    (tmp_path / "traces.json").write_text(json.dumps(exports, indent=indent))
    lines.unlink()
    result = load_and_score(con, tmp_path, tmp_path / "traces.json")   # no --format
    native_ids, expected = native_outcome
    assert result == replace_ids(expected, dict(zip(native_ids, trace_ids, strict=True)))


def test_an_otlp_document_longer_than_the_sniffed_head_is_read_as_traces(con, tmp_path,
                                                                         native_outcome):
    # a pretty-printed export over 8 MiB was too long to sniff whole and was read as native
    # JSON Lines: every line of it quarantined as invalid JSON, not one trace loaded
    lines = tmp_path / "traces.jsonl"
    trace_ids = traced(OtlpJsonLines(lines), CASES)
    document = json.loads(lines.read_text().splitlines()[0])
    spans = [span for line in lines.read_text().splitlines()
             for span in json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    document["resourceSpans"][0]["scopeSpans"][0]["spans"] = spans
    document["resourceSpans"][0]["resource"] = {"attributes": [
        {"key": "padding", "value": {"stringValue": "x" * (9 * 1024 * 1024)}}]}
    (tmp_path / "traces.json").write_text(json.dumps(document, indent=2))
    lines.unlink()
    result = load_and_score(con, tmp_path, tmp_path / "traces.json")   # no --format
    native_ids, expected = native_outcome
    assert result == replace_ids(expected, dict(zip(native_ids, trace_ids, strict=True)))


def test_retrieval_documents_as_one_array_attribute_are_the_retrieved_chunks(con, tmp_path):
    # OTLP may hold the documents as one attribute, an array of kvlists (as Phoenix's table
    # holds them): the retriever loaded as having retrieved nothing, scored a real 0
    def value(v):
        return {"doubleValue": v} if isinstance(v, float) else {"stringValue": v}

    def attribute(key, v):
        return {"key": key, "value": value(v)}

    start = 1793527200_000_000_000   # 2026-11-01T10:00:00Z
    documents = [{"kvlistValue": {"values": [attribute("document.id", chunk_id),
                                             attribute("document.score", chunk_score)]}}
                 for chunk_id, chunk_score in (("a", 0.9), ("x", 0.5))]
    write_jsonl(tmp_path / "traces.jsonl", [{"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "1" * 32, "spanId": "1" * 16, "startTimeUnixNano": str(start),
         "attributes": [attribute("openinference.span.kind", "CHAIN"),
                        attribute("input.value", "what is the minimum balance?"),
                        attribute("metadata", json.dumps({"index_version": "idx-1",
                                                          "gold_id": "g-1"}))]},
        {"traceId": "1" * 32, "spanId": "2" * 16, "parentSpanId": "1" * 16,
         "startTimeUnixNano": str(start + 1000),
         "attributes": [attribute("openinference.span.kind", "RETRIEVER"),
                        {"key": "retrieval.documents",
                         "value": {"arrayValue": {"values": documents}}}]}]}]}]}])
    load_and_score(con, tmp_path, tmp_path / "traces.jsonl")
    assert con.sql("SELECT k, [(c.chunk_id, c.rank, c.score) FOR c IN retrieved] "
                   "FROM requests").fetchall() == [(2, [("a", 1, 0.9), ("x", 2, 0.5)])]
    assert con.sql("SELECT status, needed, covered FROM request_scores").fetchall() == [
        ("scored", 3, 1)]


@pytest.mark.parametrize("indent", [None, 2])
def test_a_phoenix_table_saved_as_one_json_list_scores_as_the_native_records(
        con, tmp_path, native_outcome, indent):
    # DataFrame.to_json(orient="records"): detected as spans, then the whole list was one
    # record quarantined as "neither an OTLP trace export nor a Phoenix span row" (or, pretty-
    # printed, every line as invalid JSON)
    exporter = InMemorySpanExporter()
    trace_ids = traced(exporter, CASES)
    rows = json.loads(phoenix_frame(exporter.get_finished_spans()).reset_index().to_json(
        orient="records", date_format="iso", date_unit="us"))
    (tmp_path / "spans.json").write_text(json.dumps(rows, indent=indent))
    result = load_and_score(con, tmp_path, tmp_path / "spans.json")   # no --format
    native_ids, expected = native_outcome
    assert result == replace_ids(expected, dict(zip(native_ids, trace_ids, strict=True)))


def test_trace_without_retriever_and_bad_line_are_quarantined_not_dropped(con, tmp_path):
    path = tmp_path / "traces.jsonl"
    trace_ids = traced(OtlpJsonLines(path), [CASES[0], NO_RETRIEVAL])
    with open(path, "a") as fh:
        fh.write("{not json\n")
    result = load_and_score(con, tmp_path, path)
    assert result["summary"] == (3, 1, 2)
    rows = con.sql("SELECT line, reason, raw FROM quarantine ORDER BY line").fetchall()
    # the converter's own reasons, not the generic ones of the native checks
    assert [r[1] for r in rows] == [
        "trace has no RETRIEVER span: nothing was retrieved to score",
        "line 6: invalid JSON"]
    no_retriever = json.loads(rows[0][2])   # a trace of many lines: its conversion
    assert no_retriever["request_id"] == trace_ids[1]
    assert no_retriever["problem"].startswith("trace has no RETRIEVER span")
    # one span a line: 3 of the first trace, 2 of the second (its root ends, and is exported,
    # last), then the bad line; each quarantined at its line, the bad one as the file has it
    assert [r[0] for r in rows] == [5, 6]
    assert rows[1][2] == "{not json"


@pytest.mark.parametrize("bad", [
    {"resourceSpans": [{"scopeSpans": [{"spans": [None]}]}]},
    {"resourceSpans": "x"},
    {"resourceSpans": [{"scopeSpans": ["x"]}]},
    {"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": ["x"]}]}]}]},
    {"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": [
        {"key": "a", "value": {"arrayValue": None}}]}]}]}]},
    {"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": [
        {"key": "a", "value": {"kvlistValue": "x"}}]}]}]}]},
])
def test_a_malformed_otlp_export_is_quarantined_and_the_good_lines_load(con, tmp_path, bad):
    path = tmp_path / "traces.jsonl"
    traced(OtlpJsonLines(path), CASES[:1])
    good_lines = len(path.read_text().splitlines())
    with open(path, "a") as fh:
        fh.write(json.dumps(bad) + "\n")
    summary = ingest_logs(con, [str(path)])
    assert (summary.loaded, summary.quarantined) == (1, 1)
    ((reason,),) = con.sql("SELECT reason FROM quarantine").fetchall()
    assert reason.startswith(f"line {good_lines + 1}: not a well-formed OTLP trace export")


def trace_starting_at(tmp_path: Path, start) -> Path:
    """One traced case as OTLP JSON Lines, every span starting at `start` (the root's start is
    the request's timestamp)."""
    path = tmp_path / "traces.jsonl"
    traced(OtlpJsonLines(path), CASES[:1])
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        export = json.loads(line)
        for span in export["resourceSpans"][0]["scopeSpans"][0]["spans"]:
            span["startTimeUnixNano"] = start
        lines[i] = json.dumps(export)
    path.write_text("\n".join(lines) + "\n")
    return path


# "0": OTLP's unset start (it loaded as 1970-01-01, a day of its own in every chart)
@pytest.mark.parametrize("start", ["9" * 30, "NaN", "1e300", "0"])
def test_a_span_start_no_clock_holds_is_a_missing_timestamp_not_a_crash(con, tmp_path, start):
    path = trace_starting_at(tmp_path, start if start.isdigit() else float(start))
    summary = ingest_logs(con, [str(path)])
    assert (summary.loaded, summary.quarantined) == (0, 1)
    assert con.sql("SELECT reason FROM quarantine").fetchall() == [
        ("missing or null required field: timestamp",)]


def test_a_span_starting_in_the_last_nanoseconds_of_a_day_stays_in_that_day(con, tmp_path):
    # 2026-11-01T23:59:59.999999999Z: as a native timestamp it keeps its microseconds
    # (truncated), never rounded into the next day's window
    path = trace_starting_at(tmp_path, "1793577599999999999")
    assert ingest_logs(con, [str(path)]).loaded == 1
    assert con.sql("SELECT strftime(timestamp, '%Y-%m-%dT%H:%M:%S.%f') FROM requests"
                   ).fetchall() == [("2026-11-01T23:59:59.999999",)]


@pytest.mark.parametrize("start", [float("nan"), 1e300])
def test_a_phoenix_row_starting_at_no_time_is_quarantined_not_a_crash(con, tmp_path, start):
    exporter = InMemorySpanExporter()
    traced(exporter, CASES[:1])
    frame = phoenix_frame(exporter.get_finished_spans()).reset_index()
    frame["start_time"] = start
    frame.to_json(tmp_path / "spans.jsonl", orient="records", lines=True, date_format="iso")
    summary = ingest_logs(con, [str(tmp_path / "spans.jsonl")])
    assert (summary.loaded, summary.quarantined) == (0, 1)


def test_columns_reads_index_version_from_another_attribute(con, tmp_path):
    path = tmp_path / "traces.jsonl"
    traced(OtlpJsonLines(path), CASES[:1])
    load_and_score(con, tmp_path, path, options=read_options(
        columns=f"index_version={SpanAttributes.METADATA}.tenant"))
    # the metadata key read as a field is no tag; the one no longer read is
    assert con.sql("SELECT index_version, tags FROM requests").fetchall() == [
        ("acme", {"index_version": "idx-1", "beta": "true"})]


def test_metadata_ids_of_another_type_are_quarantined_as_in_a_native_record(con, tmp_path):
    # a float, bool or list in the metadata became made-up IDs ("7.0", "true", "[7]"): the
    # request joined no golden, or was loaded under an index version "2.0"
    start = 1793527200_000_000_000   # 2026-11-01T10:00:00Z

    def attribute(key, value):
        return {"key": key, "value": {"stringValue": value}}

    def trace(n: int, metadata: dict) -> dict:
        tid, root, leaf = f"{n:032x}", f"{n:015x}1", f"{n:015x}2"
        return {"resourceSpans": [{"scopeSpans": [{"spans": [
            {"traceId": tid, "spanId": root, "name": "chain", "startTimeUnixNano": str(start),
             "attributes": [attribute("openinference.span.kind", "CHAIN"),
                            attribute("input.value", "what is the minimum balance?"),
                            attribute("metadata", json.dumps(metadata))]},
            {"traceId": tid, "spanId": leaf, "parentSpanId": root, "name": "retriever",
             "startTimeUnixNano": str(start + 1000),
             "attributes": [attribute("openinference.span.kind", "RETRIEVER"),
                            attribute("retrieval.documents.0.document.id", "c1")]}]}]}]}

    metadata = [{"index_version": "idx-1", "gold_id": 7.0},
                {"index_version": "idx-1", "gold_id": True},
                {"index_version": "idx-1", "gold_id": [7]},
                {"index_version": 2.0, "gold_id": "7"},
                {"index_version": "idx-1", "gold_id": 7}]
    write_jsonl(tmp_path / "traces.jsonl", [trace(n, m) for n, m in enumerate(metadata, 1)])
    write_jsonl(tmp_path / "native.jsonl", [
        {"request_id": f"n{n}", "timestamp": "2026-11-01T10:00:00Z", "query": "q", **m,
         "retrieved": [{"chunk_id": "c1"}]} for n, m in enumerate(metadata, 1)])
    summary = ingest_logs(con, [str(tmp_path / "traces.jsonl"), str(tmp_path / "native.jsonl")])
    assert [(f.loaded, f.quarantined) for f in summary.files] == [(1, 4), (1, 4)]
    reasons = con.sql("SELECT source LIKE '%traces%', line, reason FROM quarantine "
                      "ORDER BY ALL").fetchall()
    why = ["gold_id is not a string"] * 3 + ["index_version is not a string"]
    assert [r[2] for r in reasons if r[0]] == [r[2] for r in reasons if not r[0]] == why
    # a trace is quarantined at its root span's place among the file's spans
    assert [r[1] for r in reasons if r[0]] == [1, 3, 5, 7]
    assert con.sql("SELECT DISTINCT gold_id FROM requests").fetchall() == [("7",)]


def read_options(**given):
    from pipeline.sources import read_options as options

    return options(**given)


# ------------------------------------------------------------------------------------ RAGAS

SAMPLES = [
    {"user_input": "minimum balance?", "retrieved_context_ids": ["a", "x", "b"],
     "reference_context_ids": ["a", "b", "c"]},
    {"user_input": "fee?", "retrieved_context_ids": ["c", "c", "a", "y"],
     "reference_context_ids": ["a", "c"]},
    {"user_input": "rural balance?", "retrieved_context_ids": [],
     "reference_context_ids": ["r"]},
    {"user_input": "kyc?", "retrieved_context_ids": [7, "k2"],
     "reference_context_ids": ["7", "k9", "k2", "k3"]},
    {"user_input": "nothing to compare?", "retrieved_context_ids": ["a"],
     "reference_context_ids": []},
]


def ragas_dataset(samples=SAMPLES) -> list[dict]:
    """EvaluationDataset rows, with the two columns a log needs."""
    return [{**s, "retrieved_contexts": [f"text {c}" for c in s["retrieved_context_ids"]],
             "reference_contexts": [f"text {c}" for c in s["reference_context_ids"]],
             "reference": f"the answer to {s['user_input']}", "response": "an answer",
             "timestamp": f"2026-11-01T10:0{n}:00Z", "index_version": "idx-1"}
            for n, s in enumerate(samples)]


def id_based_context_recall(retrieved: list, reference: list) -> float:
    """RAGAS IDBasedContextRecall: |set(retrieved) & set(reference)| / |set(reference)| over
    IDs as strings; NaN when there is no reference ID."""
    got, needed = {str(i) for i in retrieved}, {str(i) for i in reference}
    return float("nan") if not needed else len(got & needed) / len(needed)


@pytest.mark.parametrize("suffix", ["jsonl", "parquet", "csv"])
def test_ragas_dataset_as_gold_set_and_logs_gives_ragas_id_based_recall(con, tmp_path,
                                                                         suffix):
    rows = ragas_dataset()
    path = tmp_path / f"eval.{suffix}"
    if suffix == "jsonl":
        write_jsonl(path, rows)
    elif suffix == "csv":   # lists as pandas writes them: Python reprs
        pd.DataFrame(rows).to_csv(path, index=False)
    else:
        # a Parquet list column holds one type: the mixed 7 / "k2" become text
        for row in rows:
            row["retrieved_context_ids"] = [str(i) for i in row["retrieved_context_ids"]]
        pd.DataFrame(rows).to_parquet(path)
    gold = ingest_gold(con, str(path), "ragas-v1")
    logs = ingest_logs(con, [str(path)])
    assert (gold.loaded, logs.loaded, logs.quarantined) == (5, 5, 0)
    score(con, cutoffs=CUTOFFS)
    got = dict(con.sql("SELECT q.query, s.recall FROM request_scores s JOIN requests q "
                       "USING (request_id) WHERE s.status = 'scored'").fetchall())
    at_100 = dict(con.sql("SELECT q.query, r.recall FROM recall_at_k r JOIN requests q "
                          "USING (request_id) WHERE r.k = 100").fetchall())
    expected = {s["user_input"]: id_based_context_recall(s["retrieved_context_ids"],
                                                         s["reference_context_ids"])
                for s in SAMPLES}
    assert max(len(s["retrieved_context_ids"]) for s in SAMPLES) <= 100
    undefined = {q for q, r in expected.items() if r != r}
    assert undefined == {"nothing to compare?"}
    assert got == at_100 == {q: r for q, r in expected.items() if q not in undefined}
    assert con.sql("SELECT status FROM request_scores JOIN requests USING (request_id) "
                   "WHERE query = 'nothing to compare?'").fetchall() == [("no_evidence",)]


def test_ragas_logs_without_an_id_join_a_native_gold_set_by_question(con, tmp_path):
    write_jsonl(tmp_path / "gold.jsonl", [
        {"gold_id": f"g-{n}", "question": s["user_input"].upper(),
         "gold_chunk_ids": s["reference_context_ids"]} for n, s in enumerate(SAMPLES[:2])])
    write_jsonl(tmp_path / "eval.jsonl", ragas_dataset(SAMPLES[:2]))
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "native")
    assert ingest_logs(con, [str(tmp_path / "eval.jsonl")]).loaded == 2
    score(con, cutoffs=CUTOFFS)
    assert con.sql("SELECT q.query, s.gold_id, s.recall FROM request_scores s JOIN requests q "
                   "USING (request_id) ORDER BY 1").fetchall() == [
        ("fee?", "g-1", 1.0), ("minimum balance?", "g-0", pytest.approx(2 / 3))]


def test_ragas_csv_gold_set_reads_lists_as_pandas_writes_them(con, tmp_path):
    rows = ragas_dataset()
    pd.DataFrame(rows).to_csv(tmp_path / "eval.csv", index=False)
    write_jsonl(tmp_path / "eval.jsonl", rows)
    ingest_gold(con, str(tmp_path / "eval.csv"), "csv")
    ingest_gold(con, str(tmp_path / "eval.jsonl"), "jsonl")
    by_version = {v: sorted(con.sql(
        "SELECT gold_id, question, reference, gold_chunk_ids, gold_passages FROM goldens "
        "WHERE gold_version = $v", params={"v": v}).fetchall()) for v in ("csv", "jsonl")}
    assert by_version["csv"] == by_version["jsonl"] and len(by_version["csv"]) == 5
    assert ["7", "k9", "k2", "k3"] in [g[3] for g in by_version["csv"]]


def test_a_ragas_csv_of_a_parquet_dataset_reads_its_array_cells_as_lists(con, tmp_path):
    # pandas reads a Parquet dataset's lists as numpy arrays and writes them
    # to CSV without commas, ['c1' 'c2']: read as Python text, the items ran together into
    # one ID ('c1c2'), no quarantine, recall 0 for 1
    rows = ragas_dataset()
    for row in rows:
        row["retrieved_context_ids"] = [str(i) for i in row["retrieved_context_ids"]]
    pd.DataFrame(rows).to_parquet(tmp_path / "eval.parquet")
    pd.read_parquet(tmp_path / "eval.parquet").to_csv(tmp_path / "eval.csv", index=False)
    assert "['7' 'k9' 'k2' 'k3']" in (tmp_path / "eval.csv").read_text()
    ingest_gold(con, str(tmp_path / "eval.parquet"), "parquet")
    ingest_gold(con, str(tmp_path / "eval.csv"), "csv")
    by_version = {v: sorted(con.sql(
        "SELECT gold_id, gold_chunk_ids, gold_passages FROM goldens WHERE gold_version = $v",
        params={"v": v}).fetchall()) for v in ("parquet", "csv")}
    assert by_version["csv"] == by_version["parquet"]
    logs = ingest_logs(con, [str(tmp_path / "eval.csv")])
    assert (logs.loaded, logs.quarantined) == (5, 0)
    assert con.sql("SELECT max(len(retrieved)) FROM requests").fetchall() == [
        (max(len(s["retrieved_context_ids"]) for s in SAMPLES),)]


def test_a_ragas_csv_with_a_context_over_128_kib_loads_as_gold_and_as_logs(con, tmp_path):
    # Python's csv module refuses a field over 128 KiB unless told otherwise
    rows = ragas_dataset(SAMPLES[:2])
    rows[0]["retrieved_contexts"][0] = "long " * 40_000
    rows[0]["reference_contexts"][0] = "long " * 40_000
    pd.DataFrame(rows).to_csv(tmp_path / "eval.csv", index=False)
    assert ingest_gold(con, str(tmp_path / "eval.csv"), "v1").loaded == 2
    assert ingest_logs(con, [str(tmp_path / "eval.csv")]).loaded == 2
    assert con.sql("SELECT max(strlen(x.text)) FROM requests, unnest(retrieved) AS u(x)"
                   ).fetchall() == [(200_000,)]


def test_ragas_parquet_with_a_date_column_reads_its_days(con, tmp_path):
    import datetime as dt

    rows = ragas_dataset(SAMPLES[:2])
    for row in rows:
        row["timestamp"] = dt.date(2026, 11, 1)
    pd.DataFrame(rows).to_parquet(tmp_path / "eval.parquet")
    summary = ingest_logs(con, [str(tmp_path / "eval.parquet")])
    assert (summary.loaded, summary.quarantined) == (2, 0)
    assert con.sql("SELECT DISTINCT timestamp FROM requests").fetchall() == [
        (dt.datetime(2026, 11, 1),)]


@pytest.mark.parametrize("mapping", ["request_id=id,timestamp=created_at", "bogus=x"])
def test_columns_given_for_a_native_log_are_refused_not_ignored(run_cli, tmp_path, mapping):
    write_jsonl(tmp_path / "logs.jsonl", [{
        "id": "n1", "created_at": "2026-11-01T10:00:00Z", "query": "q", "index_version": "i",
        "retrieved": [{"chunk_id": "c1"}]}])
    code, _, err = run_cli("ingest", "logs", tmp_path / "logs.jsonl", "--columns", mapping)
    assert code == 2 and f"--columns {mapping} does not apply to a log in the native" in err
    assert len(err.strip().splitlines()) == 1


def test_ragas_logs_without_a_timestamp_column_are_one_clear_error(run_cli, tmp_path):
    rows = [{k: v for k, v in r.items() if k != "timestamp"} for r in ragas_dataset()]
    write_jsonl(tmp_path / "eval.jsonl", rows)
    code, _, err = run_cli("ingest", "logs", tmp_path / "eval.jsonl")
    assert code == 2
    assert "needs timestamp" in err and "--columns timestamp=COLUMN" in err
    assert len(err.strip().splitlines()) == 1
    code, out, _ = run_cli("ingest", "logs", tmp_path / "eval.jsonl", "--columns",
                           "timestamp=index_version")
    assert code == 0 and "quarantined 5" in out   # 'idx-1' is no time: every sample says so


def test_ragas_ids_and_sessions_written_as_floats_are_quarantined_not_replaced(con, tmp_path):
    # pandas writes an integer column with a missing value as float64 (1.0): as in a native
    # log such a value is no ID, and the sample is quarantined instead of taking the next id
    # column, a made-up ID or no session
    pd.DataFrame({"id": [1, None, 3], "session_id": [10, 11, None],
                  **{k: [v] * 3 for k, v in ragas_dataset(SAMPLES[:1])[0].items()}}
                 ).to_parquet(tmp_path / "eval.parquet")
    logs = ingest_logs(con, [str(tmp_path / "eval.parquet")])
    assert (logs.read, logs.loaded, logs.quarantined) == (3, 0, 3)
    assert con.sql("SELECT line, reason FROM quarantine ORDER BY line").fetchall() == [
        (1, "id is not a string"), (2, "session_id is not a string"),
        (3, "id is not a string")]
    gold = ingest_gold(con, str(tmp_path / "eval.parquet"), "v1")
    assert (gold.loaded, gold.quarantined) == (1, 2)
    assert con.sql("SELECT line, reason FROM quarantine WHERE kind = 'gold' ORDER BY line"
                   ).fetchall() == [(1, "id is not a string"), (3, "id is not a string")]


def test_ragas_tags_get_the_checks_of_a_native_log(con, tmp_path):
    # a Parquet map keeps its tags; a value that is no object is quarantined, as natively
    rows = ragas_dataset(SAMPLES[:3])
    pa_table = pa.Table.from_pylist([{**r, "tags": t} for r, t in zip(rows, [
        [("tenant", "acme")], [("a", "1"), ("a", "2")], None], strict=True)],
        schema=pa.Table.from_pylist(rows).schema.append(
            pa.field("tags", pa.map_(pa.string(), pa.string()))))
    pq.write_table(pa_table, tmp_path / "eval.parquet")
    write_jsonl(tmp_path / "eval.jsonl", [{**rows[0], "request_id": "j1", "tags": ["x"]}])
    summary = ingest_logs(con, [str(tmp_path / "eval.parquet"), str(tmp_path / "eval.jsonl")])
    assert (summary.loaded, summary.quarantined) == (2, 2)
    assert con.sql("SELECT query, tags FROM requests ORDER BY 1").fetchall() == [
        ("minimum balance?", {"tenant": "acme"}), ("rural balance?", None)]
    assert sorted(con.sql("SELECT reason FROM quarantine").fetchall()) == [
        ("tags has a duplicate key: a",), ("tags is not an object",)]


def test_ragas_json_lines_tags_are_judged_and_stored_as_in_a_native_log(con, tmp_path):
    # a repeated key is quarantined, and a nested value stored as DuckDB writes it
    tags = ['{"o": {"\u00e9": 1}, "n": 1.5, "x": null}', '{"t": "a", "t": "b"}']

    def with_tags(record: dict, text: str) -> str:
        return json.dumps(record)[:-1] + ', "tags": ' + text + "}"

    (tmp_path / "eval.jsonl").write_text("".join(
        with_tags(row, text) + "\n" for row, text in zip(ragas_dataset(SAMPLES[:2]), tags,
                                                        strict=True)))
    (tmp_path / "native.jsonl").write_text("".join(
        with_tags(request(f"n{i}", ["a"]), text) + "\n" for i, text in enumerate(tags)))
    summary = ingest_logs(con, [str(tmp_path / "eval.jsonl"), str(tmp_path / "native.jsonl")])
    assert [(f.loaded, f.quarantined) for f in summary.files] == [(1, 1), (1, 1)]
    assert con.sql("SELECT reason FROM quarantine").fetchall() == [
        ("tags has a duplicate key: t",)] * 2
    ((ragas,), (native,)) = con.sql("SELECT tags FROM requests ORDER BY request_id = 'n0'"
                                    ).fetchall()
    assert ragas == native == {"o": '{"\u00e9":1}', "n": "1.5"}


def test_a_ragas_csv_header_with_spaces_after_its_commas_reads_as_logs(con, tmp_path):
    (tmp_path / "eval.csv").write_text(
        'user_input, retrieved_context_ids, timestamp, index_version\n'
        'q1,"[""c1""]",2026-11-01T10:00:00Z,v1\n')
    summary = ingest_logs(con, [str(tmp_path / "eval.csv")])
    assert (summary.loaded, summary.quarantined) == (1, 0)
    assert con.sql("SELECT query, index_version FROM requests").fetchall() == [("q1", "v1")]


def test_multi_turn_sample_is_quarantined(con, tmp_path):
    rows = ragas_dataset(SAMPLES[:1])
    rows.append({**rows[0], "user_input": [{"content": "hi", "type": "human"}]})
    write_jsonl(tmp_path / "eval.jsonl", rows)
    summary = ingest_logs(con, [str(tmp_path / "eval.jsonl")])
    assert (summary.loaded, summary.quarantined) == (1, 1)
    ((raw, reason),) = con.sql("SELECT raw, reason FROM quarantine").fetchall()
    assert "multi-turn" in reason
    # raw is the sample as the file holds it, not its conversion
    assert json.loads(raw) == json.loads(json.dumps(rows[1]))


def test_a_multi_turn_sample_saved_to_csv_is_quarantined_not_read_as_a_question(con, tmp_path):
    # pandas writes the list of messages as its repr: it loaded as the question
    # "[{'content': 'hi', ...}]", matching no golden
    rows = ragas_dataset(SAMPLES[:1])
    turns = [{"content": "hi", "type": "human"}, {"content": "hello", "type": "ai"},
             {"content": "what is the fee?", "type": "human"}]
    rows.append({**rows[0], "user_input": turns})
    rows.append({**rows[0], "user_input": "[{not a list}] of things"})   # a question
    pd.DataFrame(rows).to_csv(tmp_path / "eval.csv", index=False)
    summary = ingest_logs(con, [str(tmp_path / "eval.csv")])
    assert (summary.loaded, summary.quarantined) == (2, 1)
    ((line, reason),) = con.sql("SELECT line, reason FROM quarantine").fetchall()
    assert line == 3 and "multi-turn sample saved to CSV" in reason
    gold = ingest_gold(con, str(tmp_path / "eval.csv"), "v1")
    assert (gold.loaded, gold.quarantined) == (2, 1)
    assert con.sql("SELECT reason FROM quarantine WHERE kind = 'gold'").fetchall() == [
        (reason,)]


# -------------------------------------------------------------------------------- detection

def test_file_matching_no_format_is_one_error_naming_what_each_expects(run_cli, tmp_path):
    write_jsonl(tmp_path / "other.jsonl", [{"question": "q", "contexts": ["c"]}])
    code, _, err = run_cli("ingest", "logs", tmp_path / "other.jsonl")
    assert code == 2
    assert "matches no known log format (its columns: contexts, question)" in err
    assert "native (request_id, timestamp, retrieved or retrieval_steps; JSON Lines or " \
           "Parquet)" in err
    assert "ragas (user_input, retrieved_context_ids or retrieved_contexts)" in err
    assert "openinference (OTLP JSON with resourceSpans" in err
    assert "Give --format to choose one." in err


def test_an_empty_csv_in_a_log_directory_is_read_as_empty_and_the_rest_loads(con, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a-empty.csv").write_bytes(b"")
    write_jsonl(logs / "b.jsonl", ragas_dataset(SAMPLES[:2]))
    summary = ingest_logs(con, [str(logs)])
    assert [(f.read, f.loaded) for f in summary.files] == [(0, 0), (2, 2)]


def test_format_option_overrides_detection(run_cli, tmp_path):
    # a request_id column does not hide a RAGAS dataset's own columns from detection
    rows = [{**r, "request_id": f"q-{n}"} for n, r in enumerate(ragas_dataset())]
    write_jsonl(tmp_path / "eval.jsonl", rows)
    code, out, _ = run_cli("ingest", "logs", tmp_path / "eval.jsonl")
    assert code == 0 and "loaded 5, quarantined 0" in out
    # --format native reads the same rows as native records: none has a retrieved list
    code, out, _ = run_cli("ingest", "logs", tmp_path / "eval.jsonl", "--format", "native")
    assert code == 0 and "loaded 0, quarantined 5" in out
    code, _, err = run_cli("ingest", "logs", tmp_path / "eval.jsonl", "--format", "phoenix")
    assert code == 2 and "unknown format 'phoenix'" in err


def test_a_deeply_nested_line_is_quarantined_not_a_crash(con, tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text("[" * 100_000 + "\n" + json.dumps(
        {"request_id": "r-1", "timestamp": "2026-11-01T00:00:00Z", "query": "q",
         "index_version": "i", "retrieved": []}) + "\n")
    summary = ingest_logs(con, [str(path)])
    assert (summary.read, summary.loaded, summary.quarantined) == (2, 1, 1)
    assert con.sql("SELECT line FROM quarantine").fetchall() == [(1,)]


def test_the_quality_check_reads_a_trace_or_ragas_file_as_ingest_does(tmp_path, run_cli):
    # check --logs staged the converted records, then judged them after the converted file
    # was gone: an internal error for every OpenInference and RAGAS input (and so the
    # scheduled DAG's check task with RECALLWATCH_LOG_FORMAT set)
    start = int(datetime(2026, 11, 1, 10, tzinfo=UTC).timestamp()) * 10**9
    traces = trace_starting_at(tmp_path, str(start))
    write_jsonl(tmp_path / "eval.jsonl", ragas_dataset(SAMPLES[:2]))
    for path in (traces, tmp_path / "eval.jsonl"):
        code, out, err = run_cli("check", "--logs", path, "--start", "2026-11-01",
                                 "--end", "2026-11-02")
        assert (code, err) == (0, ""), err
        assert "blocking records parse: all" in out and "internal error" not in out


def test_a_tag_of_a_list_or_object_is_stored_as_a_native_log_stores_it(con, tmp_path):
    # a trace wrote ["bm25", "dense"] (spaced, keys sorted, non-ASCII escaped) where the native
    # log stores ["bm25","dense"]: two slices, and the same request re-delivered as a trace
    # was quarantined as conflicting with itself
    case = {**CASES[0], "metadata": {"retrievers": ["bm25", "dense"],
                                     "filters": {"zone": "süd", "after": 2}}}
    trace_ids = traced(OtlpJsonLines(tmp_path / "traces.jsonl"), [case])
    write_jsonl(tmp_path / "app.jsonl", native_records(trace_ids, [case]))
    assert ingest_logs(con, [str(tmp_path / "app.jsonl")]).loaded == 1
    again = ingest_logs(con, [str(tmp_path / "traces.jsonl")])
    assert (again.loaded, again.quarantined) == (1, 0), con.sql(
        "SELECT reason FROM quarantine").fetchall()
    assert con.sql("SELECT tags['retrievers'], tags['filters'] FROM requests").fetchall() == [
        ('["bm25","dense"]', '{"zone":"süd","after":2}')]


@pytest.mark.parametrize("start, outcome", [
    ("2026-11-01t10:22:01z", datetime(2026, 11, 1, 10, 22, 1)),   # RFC 3339 allows lower case
    ("2026-02-29T10:22:01Z", "bad timestamp: 2026-02-29T10:22:01Z"),
    ("2026-11-01T10Z", "bad timestamp: 2026-11-01T10Z"),           # as a native log says
])
def test_a_phoenix_start_written_as_text_is_read_as_a_native_timestamp(con, tmp_path, start,
                                                                       outcome):
    # a start the converter could not parse was "missing" (untrue), a lower-case z that a
    # native log loads was refused, and spellings a native log refuses were taken
    exporter = InMemorySpanExporter()
    traced(exporter, CASES[:1])
    frame = phoenix_frame(exporter.get_finished_spans()).reset_index()
    frame["start_time"] = start
    frame.to_json(tmp_path / "spans.jsonl", orient="records", lines=True, date_format="iso")
    ingest_logs(con, [str(tmp_path / "spans.jsonl")])
    if isinstance(outcome, datetime):
        assert con.sql("SELECT timestamp FROM requests").fetchall() == [(outcome,)]
    else:
        assert con.sql("SELECT reason FROM quarantine").fetchall() == [(outcome,)]


def test_an_otlp_start_that_is_no_number_is_a_bad_timestamp_not_a_missing_one(con, tmp_path):
    ingest_logs(con, [str(trace_starting_at(tmp_path, "yesterday"))])
    assert con.sql("SELECT reason FROM quarantine").fetchall() == [
        ("bad timestamp: yesterday",)]


DEEP_OTLP = {"resourceSpans": [{"scopeSpans": [{"spans": [{
    "traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331",
    "startTimeUnixNano": "1793527200000000000", "attributes": [
        {"key": "openinference.span.kind", "value": {"stringValue": "RETRIEVER"}},
        {"key": "input.value", "value": {"stringValue": "q"}},
        {"key": "metadata", "value": {"stringValue": "{\"index_version\": \"v1\"}"}},
        {"key": "retrieval.documents.0.document.id", "value": {"stringValue": "c1"}}]}]}]}]}
DEEP_RAGAS = {"user_input": "q", "retrieved_context_ids": ["a"],
              "timestamp": "2026-11-01T10:00:00Z", "index_version": "v1"}


@pytest.mark.parametrize("good", [DEEP_OTLP, DEEP_RAGAS], ids=["openinference", "ragas"])
def test_a_deeply_nested_line_of_a_trace_or_ragas_log_is_quarantined_not_a_crash(
        con, tmp_path, good):
    path = tmp_path / "deep.jsonl"
    path.write_text(json.dumps(good) + "\n" + "[" * 100_000 + "\n")
    summary = ingest_logs(con, [str(path)])
    assert (summary.read, summary.loaded, summary.quarantined) == (2, 1, 1)


def test_a_deeply_nested_line_of_a_gold_set_is_quarantined_not_a_crash(con, tmp_path):
    path = tmp_path / "gold.jsonl"
    path.write_text(json.dumps({"gold_id": "g1", "question": "q", "gold_chunk_ids": ["a"]})
                    + "\n" + "[" * 100_000 + "\n")
    ingest_gold(con, str(path), "g1")
    assert con.sql("SELECT line, reason FROM quarantine").fetchall() == [(2, "invalid JSON")]


@pytest.mark.parametrize("fmt", ["ragas", "openinference"])
def test_max_record_bytes_applies_to_ragas_and_trace_logs_as_to_native_ones(con, tmp_path, fmt):
    # a RAGAS sample of 300 bytes under a limit of 2,000 was quarantined as "record too
    # large (limit 8388608; raise it with --max-record-bytes)" at any limit: the format read
    # its lines with the default limit
    text = "x" * 300
    if fmt == "ragas":
        record = {**DEEP_RAGAS, "retrieved_contexts": [text]}
    else:
        record = json.loads(json.dumps(DEEP_OTLP))
        record["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"].append(
            {"key": "retrieval.documents.0.document.content", "value": {"stringValue": text}})
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps(record) + "\n")
    size = path.stat().st_size
    # a trace line holds a batch of spans: it may be 16 times as long as a record
    limit = size if fmt == "ragas" else -(-size // 16)
    assert ingest_logs(con, [str(path)], max_record_bytes=limit).loaded == 1
    con.execute("DELETE FROM ingest_files")
    summary = ingest_logs(con, [str(path)], max_record_bytes=limit - 1)
    assert summary.quarantined == 1
    ((reason,),) = con.sql("SELECT reason FROM quarantine").fetchall()
    assert reason.endswith(
        f"record too large: {size} bytes (limit {(limit - 1) * (1 if fmt == 'ragas' else 16)}; "
        "raise it with --max-record-bytes)")


def test_a_gold_record_too_large_names_no_option_that_ingest_gold_lacks(con, tmp_path):
    path = tmp_path / "gold.jsonl"
    path.write_text(json.dumps({"gold_id": "g1", "question": "q" * (9 << 20),
                                "gold_chunk_ids": ["a"]}) + "\n" + json.dumps(
        {"gold_id": "g2", "question": "q", "gold_chunk_ids": ["a"]}) + "\n")
    ingest_gold(con, str(path), "g1")
    ((reason,),) = con.sql("SELECT reason FROM quarantine").fetchall()
    assert reason.startswith("record too large: ") and reason.endswith("(limit 8388608)")
