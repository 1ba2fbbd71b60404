"""The Docker deployment, checked without a Docker engine: docker-compose.yml is valid against
the compose-spec JSON schema (the copy check-jsonschema vendors) once interpolated the way
compose does, its references resolve, every Airflow container gets exactly deploy/airflow.env
(plus the executor's file) and no Airflow setting of its own, a native run changes only
locations, the DAGs agree with the file on the pool and the data paths, and the Dockerfile
installs recallwatch as a wheel built from what it copies, never editable."""

from __future__ import annotations

import ast
import copy
import importlib.resources
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
# What a user puts in .env (the compose file refuses to start without a start date).
USER_ENV = {"RECALLWATCH_START_DATE": "2026-10-01"}
AIRFLOW_IMAGE = "apache/airflow:3.3.2-python3.11"


def load_standalone():
    """deploy/standalone.py, which is a script beside the deployment files, not a package."""
    if "recallwatch_standalone" not in sys.modules:
        spec = importlib.util.spec_from_file_location("recallwatch_standalone",
                                                      ROOT / "deploy" / "standalone.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    return sys.modules["recallwatch_standalone"]


standalone = load_standalone()


# --------------------------------------------------------------------------- compose semantics

VARIABLE = re.compile(r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
                      r"(?:(?P<op>:-|-|:\?|\?|:\+|\+)(?P<arg>[^}]*))?\}|\$(?P<bare>[A-Za-z_]\w*)")


def interpolate(value, env: dict[str, str]):
    """Compose's interpolation of every string: $$ is a literal $, ${VAR}, ${VAR:-default}
    (unset or empty), ${VAR-default} (unset), ${VAR:?error}, ${VAR:+replacement}."""
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if not isinstance(value, str):
        return value

    def one(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group("name") or match.group("bare")
        op, arg, current = match.group("op"), match.group("arg"), env.get(name)
        if op == ":-":
            return current if current else arg
        if op == "-":
            return arg if current is None else current
        if op in (":?", "?") and (current is None or (op == ":?" and not current)):
            raise ValueError(f"compose would refuse to start: {arg}")
        if op == ":+":
            return arg if current else ""
        if op == "+":
            return "" if current is None else arg
        return current or ""

    return VARIABLE.sub(one, value)


def compose(env: dict[str, str] | None = None) -> dict:
    """docker-compose.yml as compose reads it: YAML merge keys applied (PyYAML's safe loader
    does), extension fields kept, every string interpolated with `env`."""
    raw = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    return interpolate(raw, {**USER_ENV, **(env or {})})


def schema() -> dict:
    vendored = importlib.resources.files("check_jsonschema.builtin_schemas.vendor")
    return json.loads((vendored / "compose-spec.json").read_text(encoding="utf-8"))


def schema_errors(document: dict) -> list[str]:
    validator = jsonschema.Draft202012Validator(
        schema(), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(document)]


def airflow_services(document: dict) -> dict[str, dict]:
    """The services that run the recallwatch image (every Airflow process and the CLI)."""
    return {name: s for name, s in document["services"].items() if "build" in s}


def env_files(service: dict) -> list[Path]:
    items = service.get("env_file", [])
    items = [items] if isinstance(items, str) else items
    return [ROOT / (item if isinstance(item, str) else item["path"]) for item in items]


def container_env(service: dict) -> dict[str, str]:
    """The environment compose gives the container: its env files in order, then
    `environment` over them."""
    env: dict[str, str] = {}
    for path in env_files(service):
        env.update(standalone.read_env_file(path))
    declared = service.get("environment", {})
    if isinstance(declared, list):
        declared = dict(item.split("=", 1) for item in declared)
    env.update({k: "" if v is None else str(v) for k, v in declared.items()})
    return env


# --------------------------------------------------------------------------- schema

@pytest.mark.parametrize("executor", ["local", "celery"])
def test_compose_file_is_valid_against_the_compose_spec_schema(executor):
    assert schema_errors(compose({"RECALLWATCH_EXECUTOR": executor})) == []


def test_compose_file_is_valid_before_interpolation_too():
    raw = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert schema_errors(raw) == []


@pytest.mark.parametrize("break_it", [
    lambda d: d["services"]["scheduler"].update(restart=5),
    lambda d: d["services"]["api-server"].update(portz=["8080:8080"]),
    lambda d: d.update(servicez={}),
    lambda d: d["services"]["init"]["depends_on"]["postgres"].update(condition="whenever"),
])
def test_the_schema_check_rejects_a_broken_compose_file(break_it):
    document = copy.deepcopy(compose())
    break_it(document)
    assert schema_errors(document)


def test_compose_refuses_to_start_without_a_start_date():
    with pytest.raises(ValueError, match="RECALLWATCH_START_DATE"):
        interpolate(yaml.safe_load(COMPOSE_FILE.read_text()), {})


# --------------------------------------------------------------------------- references

def test_every_reference_in_the_compose_file_resolves():
    document = compose({"RECALLWATCH_EXECUTOR": "celery"})
    services, volumes = document["services"], set(document.get("volumes") or {})
    profiled = {name for name, s in services.items() if s.get("profiles")}
    for name, service in services.items():
        for target in service.get("depends_on", {}):
            assert target in services, f"{name} depends on a missing service {target}"
            if not service.get("profiles"):
                assert target not in profiled, f"{name} (every profile) waits for {target}"
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            if not source.startswith((".", "/")):
                assert source in volumes, f"{name} mounts an undeclared volume {source}"
        for path in env_files(service):
            assert path.is_file(), f"{name} reads {path}, which does not exist"
        if "build" in service:
            assert (ROOT / service["build"] / "Dockerfile").is_file()
    assert {"api-server", "scheduler", "dag-processor", "triggerer", "postgres",
            "init"} <= set(services) - profiled
    assert {"redis", "worker-1", "worker-2"} <= {
        n for n in profiled if "celery" in services[n]["profiles"]}


def test_init_runs_deploy_init_sh_before_the_airflow_processes_start():
    services = compose()["services"]
    assert services["init"]["command"] == ["bash", "/opt/recallwatch/deploy/init.sh"]
    assert services["init"]["restart"] == "no"
    for name in ("api-server", "scheduler", "dag-processor", "triggerer", "worker-1", "worker-2"):
        assert services[name]["depends_on"]["init"] == {
            "condition": "service_completed_successfully"}
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_workers_have_hostnames_of_their_own_and_refuse_a_local_scheduler():
    services = compose()["services"]
    assert services["worker-1"]["hostname"] != services["worker-2"]["hostname"]
    for name in ("worker-1", "worker-2"):
        script = services[name]["command"][-1]
        assert "airflow celery worker" in script
        done = subprocess.run(["bash", "-c", script.replace("exec airflow", "exec echo")],
                              env={"RECALLWATCH_EXECUTOR": "local", "PATH": "/usr/bin:/bin"},
                              capture_output=True, text=True, check=False)
        assert done.returncode != 0 and "RECALLWATCH_EXECUTOR=celery" in done.stderr


# --------------------------------------------------------------------------- one place

@pytest.mark.parametrize("executor", ["local", "celery"])
def test_every_airflow_container_gets_exactly_deploy_airflow_env(executor):
    """The Airflow settings (executor, database, dags folder, examples, auth) and the pool of
    every container are deploy/'s files, which the native deployment and its test read."""
    services = airflow_services(compose({"RECALLWATCH_EXECUTOR": executor}))
    assert {"init", "api-server", "scheduler", "dag-processor", "triggerer", "worker-1",
            "worker-2", "recallwatch"} <= set(services)
    for name, service in services.items():
        declared = service.get("environment", {})
        assert not [k for k in declared if k.startswith("AIRFLOW__")], \
            f"{name} sets Airflow settings outside deploy/airflow.env"
        wanted = standalone.settings("celery" if name.startswith("worker") else executor)
        env = container_env(service)
        assert {k: v for k, v in env.items() if k in wanted} == wanted, name
        assert env["AIRFLOW__CORE__EXECUTOR"] == (
            "CeleryExecutor" if executor == "celery" or name.startswith("worker")
            else "LocalExecutor")


def test_deploy_airflow_env_holds_the_settings_that_must_agree():
    configured = standalone.settings("local")
    assert configured["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    assert configured["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
    assert configured["AIRFLOW__CORE__DAGS_FOLDER"] == "/opt/airflow/dags"
    assert configured["AIRFLOW__CORE__LOAD_EXAMPLES"] == "False"
    assert configured["RECALLWATCH_WRITER_POOL"] == "recallwatch_writer"
    assert configured["RECALLWATCH_WRITER_POOL_SLOTS"] == "1"
    celery = standalone.settings("celery")
    assert celery["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert celery["AIRFLOW__CELERY__BROKER_URL"].startswith("redis://")


def test_a_native_run_changes_only_locations_and_keeps_the_drivers(tmp_path):
    for executor in ("local", "celery"):
        native = standalone.native_settings(
            tmp_path, database="postgresql+psycopg2://postgres@127.0.0.1:5432/x", api_port=9,
            executor=executor, broker="redis://127.0.0.1:6379/5",
            data={"RECALLWATCH_WAREHOUSE": str(tmp_path / "w.duckdb")})
        configured = standalone.settings(executor)
        changed = {k for k in configured if native[k] != configured[k]}
        assert changed <= standalone.LOCATION_KEYS
        assert set(native) - set(configured) <= standalone.LOCATION_KEYS | {"AIRFLOW_HOME"}
    assert native["AIRFLOW__CELERY__RESULT_BACKEND"] == "db+postgresql://postgres@127.0.0.1:5432/x"
    with pytest.raises(standalone.DeploymentError, match="postgresql\\+psycopg2"):
        standalone.native_settings(tmp_path, database="sqlite:////tmp/airflow.db", api_port=9)
    with pytest.raises(standalone.DeploymentError, match="not locations"):
        standalone.localize(standalone.settings(),
                            {"AIRFLOW__CORE__EXECUTOR": "SequentialExecutor"})


def test_env_files_are_plain_lines_that_compose_and_python_read_alike(tmp_path):
    for path in (ROOT / "deploy").glob("*.env"):
        standalone.read_env_file(path)  # raises on quotes, $ or a line without =
    bad = tmp_path / "bad.env"
    bad.write_text('A="quoted"\n')
    with pytest.raises(standalone.DeploymentError, match="bad.env:1"):
        standalone.read_env_file(bad)


def dag_constants(path: Path) -> dict[str, object]:
    """NAME = "..." and NAME = os.environ.get("VAR", "default") assignments of a DAG file
    (the default, keyed by VAR)."""
    found: dict[str, object] = {}
    for node in ast.parse(path.read_text()).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        value = node.value
        if isinstance(value, ast.Constant):
            found[node.targets[0].id] = value.value
        elif (isinstance(value, ast.Call) and ast.unparse(value.func) == "os.environ.get"
              and len(value.args) == 2):
            found[value.args[0].value] = value.args[1].value
    return found


@pytest.mark.parametrize("dag_file", ["recallwatch_monitor.py", "recallwatch_backfill.py"])
def test_the_dags_name_the_pool_and_paths_of_deploy_airflow_env(dag_file):
    configured = standalone.settings()
    constants = dag_constants(ROOT / "dags" / dag_file)
    assert constants["WRITER"] == configured["RECALLWATCH_WRITER_POOL"]
    for key in ("RECALLWATCH_WAREHOUSE", "RECALLWATCH_LOG_SOURCE", "RECALLWATCH_REPORT_DIR"):
        if key in constants:  # the DAG's fallback is the container's path
            assert constants[key] == configured[key], key


def test_the_data_paths_of_deploy_airflow_env_are_compose_volumes():
    configured = standalone.settings()
    for name, service in airflow_services(compose()).items():
        targets = [m.split(":")[1] for m in service["volumes"]]
        for key in ("RECALLWATCH_WAREHOUSE", "RECALLWATCH_LOG_SOURCE", "RECALLWATCH_REPORT_DIR"):
            assert any(configured[key] == t or configured[key].startswith(t + "/")
                       for t in targets), f"{name}: {configured[key]} is on no volume"
        logs = next(m for m in service["volumes"] if ":/opt/recallwatch/logs" in m)
        assert logs.endswith(":ro")  # recallwatch never writes to the request logs


# --------------------------------------------------------------------------- Dockerfile

def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    lines, joined = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        if line.strip().startswith("#") and not joined:
            continue
        joined += line.rstrip()
        if joined.endswith("\\"):
            joined = joined[:-1] + " "
            continue
        if joined.strip():
            lines.append(joined.strip())
        joined = ""
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def stages() -> list[list[tuple[str, str]]]:
    found: list[list[tuple[str, str]]] = []
    for instruction in dockerfile_instructions():
        if instruction[0] == "FROM":
            found.append([])
        if found:
            found[-1].append(instruction)
    return found


def test_dockerfile_builds_on_the_official_airflow_3_image():
    args = dict(a.split("=", 1) for i, a in dockerfile_instructions() if i == "ARG" and "=" in a)
    assert args["AIRFLOW_IMAGE"] == AIRFLOW_IMAGE
    assert [s[0][1].split()[0] for s in stages()] == ["${AIRFLOW_IMAGE}"] * 2


def test_dockerfile_installs_a_wheel_never_an_editable_checkout():
    builder, final = stages()
    runs = " ".join(a for i, a in builder if i == "RUN")
    assert "pip wheel" in runs and "--no-deps" in runs
    installs = [a for i, a in final if i == "RUN" and "pip install" in a]
    assert installs and all(".whl" in a for a in installs)
    # pinned to the image's Airflow, so recallwatch's requirements cannot move it
    assert all('"apache-airflow==${AIRFLOW_VERSION}"' in a for a in installs)
    for _, arguments in dockerfile_instructions():
        assert not re.search(r"(^|\s)(-e|--editable)(\s|$)", arguments), arguments
    copied = [a for i, a in final if i == "COPY"]
    assert any(a.endswith("dags/ /opt/airflow/dags/") for a in copied)
    assert standalone.settings()["AIRFLOW__CORE__DAGS_FOLDER"] == "/opt/airflow/dags"
    assert any(a.endswith("deploy/ /opt/recallwatch/deploy/") for a in copied)


def dockerignored(relative: str) -> bool:
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()
                if p.strip() and not p.startswith("#")]
    parts = relative.split("/")
    return any(fnmatch(relative, p) or fnmatch(parts[0], p)
               or (p.startswith("**/") and any(fnmatch(part, p[3:]) for part in parts))
               for p in patterns)


@pytest.mark.slow
def test_the_wheel_stage_builds_a_wheel_from_exactly_what_it_copies(tmp_path):
    """The builder stage's COPY lines, replayed from the build context (.dockerignore
    applied), hold everything its `pip wheel` needs; the wheel carries the SQL files."""
    builder = stages()[0]
    context = tmp_path / "context"
    for instruction, arguments in builder:
        if instruction != "COPY":
            continue
        *sources, _ = [a for a in arguments.split() if not a.startswith("--")]
        for source in sources:
            assert not dockerignored(source), f".dockerignore hides {source}"
            origin = ROOT / source
            if origin.is_dir():
                shutil.copytree(origin, context / source, ignore=lambda d, names: [
                    n for n in names
                    if dockerignored(str((Path(d) / n).relative_to(ROOT)))])
            else:
                (context / source).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(origin, context / source)
    for path in ("dags", "deploy"):
        assert not dockerignored(path), f".dockerignore hides {path}, which the image copies"
    dist = tmp_path / "dist"
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "--disable-pip-version-check", "-q",
                           "--wheel-dir", str(dist), str(context)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = dist.glob("recallwatch-*.whl")
    import zipfile
    names = zipfile.ZipFile(wheel).namelist()
    assert "pipeline/sql/schema.sql" in names and "pipeline/api.py" in names
