"""pipeline.atomic.written_whole, the one writer of every file for a reader: what it writes in
place, and the mode the new file gets."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.atomic import written_whole

REPO = Path(__file__).resolve().parent.parent


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_077():
    old = os.umask(0o077)
    yield
    os.umask(old)


def test_scores_written_to_dev_stdout_reach_the_pipe_it_is():
    # /dev/stdout of a pipe resolves to /proc/<pid>/fd/pipe:[N], no directory to write a
    # temporary file in: `score-dataset --out /dev/stdout | jq` failed with "No such file"
    code = ("from pipeline.contract import write_scores\n"
            "write_scores('/dev/stdout', [{'row': 1}, {'row': 2}])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, '{"row": 1}\n{"row": 2}\n', "")


def test_a_file_replaced_keeps_its_mode(tmp_path):
    # an export or claims file made private stays private: it holds logged queries and answers
    target = tmp_path / "claims.jsonl"
    target.write_text("old\n")
    target.chmod(0o600)
    with written_whole(target) as written:
        written.write_text("new\n")
    assert (target.read_text(), _mode(target)) == ("new\n", 0o600)


def test_a_new_file_gets_the_umasks_mode_unless_one_is_asked(tmp_path, umask_077):
    with written_whole(tmp_path / "quarantine.jsonl") as written:
        written.write_text("x\n")
    # the report and the metrics file are read by a web server or a collector of another user
    with written_whole(tmp_path / "report.html", 0o644) as written:
        written.write_text("<html>\n")
    assert (_mode(tmp_path / "quarantine.jsonl"), _mode(tmp_path / "report.html")) == (
        0o600, 0o644)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quarantine.jsonl", "report.html"]


def test_a_loop_of_links_is_refused_not_replaced_by_a_file(tmp_path):
    loop = tmp_path / "loop.jsonl"
    loop.symlink_to("loop.jsonl")
    with pytest.raises(OSError, match="symbolic links"), written_whole(loop) as written:
        written.write_text("x\n")
    assert loop.is_symlink()
    assert [p.name for p in tmp_path.iterdir()] == ["loop.jsonl"]
