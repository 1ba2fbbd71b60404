"""A normal install works anywhere: the wheel carries the SQL files and templates, and the
installed command runs from a directory far from the checkout."""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import golden, request, write_jsonl

ROOT = Path(__file__).resolve().parent.parent


def sh(*args, cwd: Path | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                            timeout=600, check=False)
    assert result.returncode == 0, f"{args}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of the checkout (so no build files land in it)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pipeline", "sql"):
        shutil.copytree(ROOT / name, source / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    dist = tmp_path_factory.mktemp("dist")
    sh(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
       "--disable-pip-version-check", "-q", "-w", dist, source)
    (found,) = dist.glob("recallwatch-*.whl")
    return found


def test_wheel_carries_every_sql_file_and_template(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in (ROOT / "sql").glob("*.sql"):
        assert f"pipeline/sql/{path.name}" in names
    for path in (ROOT / "pipeline" / "templates").iterdir():
        assert f"pipeline/templates/{path.name}" in names


@pytest.mark.slow
def test_installed_wheel_runs_from_another_directory(wheel, tmp_path):
    venv = tmp_path / "venv"
    sh(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    # the dependencies come from the test environment; recallwatch itself only from the wheel
    target = Path(sh(python, "-c", "import site; print(site.getsitepackages()[0])")
                  .stdout.strip())
    (target / "test-deps.pth").write_text(site.getsitepackages()[0] + "\n")
    sh(python, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check", "-q", wheel)

    elsewhere = tmp_path / "elsewhere"
    write_jsonl(elsewhere / "gold.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(elsewhere / "logs" / "dt=2026-11-01" / "p.jsonl",
                [request("r-1", ["a", "x"], ts="2026-11-01T10:00:00Z")])
    where = sh(python, "-c", "import pipeline; print(pipeline.__file__)", cwd=elsewhere)
    assert where.stdout.startswith(str(venv))

    recallwatch = venv / "bin" / "recallwatch"
    run = sh(recallwatch, "--warehouse", "w.duckdb", "run", "--logs", "logs",
             "--gold", "gold.jsonl", "--gold-version", "v1", "--out", "report", cwd=elsewhere)
    assert "scored 1 day window(s)" in run.stdout
    html = (elsewhere / "report" / "report.html").read_text()
    assert "recall@" in html and "v1" in html
    exported = sh(recallwatch, "--warehouse", "w.duckdb", "export", "request_scores",
                  "scores.csv", cwd=elsewhere)
    assert "1 rows" in exported.stdout
    assert "0.5" in (elsewhere / "scores.csv").read_text()
