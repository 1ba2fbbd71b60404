"""Input files: paths, directories and globs expand to the files to read, and a path that
names no input is an error rather than an empty run."""

from __future__ import annotations

import pytest

from pipeline.errors import RecallwatchError
from pipeline.ingest import LOG_SUFFIXES, expand_paths, ingest_logs


def test_empty_directory_is_an_error_not_an_empty_run(con, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecallwatchError, match="no input files found"):
        ingest_logs(con, [str(tmp_path / "empty")])


def test_missing_path_is_an_error(tmp_path):
    with pytest.raises(RecallwatchError, match="no such file or directory"):
        expand_paths([str(tmp_path / "nowhere.jsonl")], LOG_SUFFIXES)


def test_unsupported_file_type_is_an_error(tmp_path):
    (tmp_path / "logs.txt").write_text("{}\n")
    with pytest.raises(RecallwatchError, match="unsupported file type"):
        expand_paths([str(tmp_path / "logs.txt")], LOG_SUFFIXES)


def test_directories_and_globs_expand_once_each_in_a_stable_order(tmp_path):
    for part in ("dt=2026-11-02", "dt=2026-11-01"):
        (tmp_path / part).mkdir()
        (tmp_path / part / "a.jsonl").write_text("{}\n")
        (tmp_path / part / "notes.txt").write_text("not a log\n")
    found = expand_paths([str(tmp_path), str(tmp_path / "dt=*" / "*.jsonl")], LOG_SUFFIXES)
    assert [p.parent.name for p in found] == ["dt=2026-11-01", "dt=2026-11-02"]
