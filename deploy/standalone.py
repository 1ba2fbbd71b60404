"""Run the recallwatch Airflow deployment natively, without Docker: the processes of
docker-compose.yml (api-server, scheduler, dag-processor, triggerer, and Celery workers for the
celery profile) started from this checkout's virtualenv against a PostgreSQL database, with the
settings of deploy/airflow.env (and deploy/celery.env).

Only locations differ from the containers, and only in the keys of LOCATION_KEYS: the database's
host, user and name (never its driver), the dags folder, the api-server's address, ports, and
where the data lives. `make airflow` and `make airflow-stop` call `start` and `stop` below;
tests/test_deployment.py imports this file and runs the same Deployment in a temporary home.

    python deploy/standalone.py start [--home .airflow] [--database URL] [--port 8080]
    python deploy/standalone.py status|stop [--home .airflow]

Each process runs in its own process group, its PID in HOME/pids/NAME.pid and its output in
HOME/process-logs/NAME.log; `stop` ends those groups (SIGTERM, then SIGKILL after a grace time).
This module imports neither Airflow nor recallwatch: it starts them."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

DEPLOY = Path(__file__).resolve().parent
ROOT = DEPLOY.parent
ENV_FILE = DEPLOY / "airflow.env"
INIT_SCRIPT = DEPLOY / "init.sh"
EXECUTOR_FILES = {"local": DEPLOY / "local.env", "celery": DEPLOY / "celery.env"}
BIN = Path(sys.executable).parent  # the virtualenv's airflow, recallwatch and python

# The keys a native run may set differently from the containers: where things are, never how
# they behave. tests/test_compose.py holds the files to this.
LOCATION_KEYS = frozenset({
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
    "AIRFLOW__CORE__DAGS_FOLDER",
    "AIRFLOW__CORE__EXECUTION_API_SERVER_URL",
    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE",
    "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT",
    "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT",
    "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT",
    "AIRFLOW__CELERY__BROKER_URL",
    "AIRFLOW__CELERY__RESULT_BACKEND",
    "RECALLWATCH_WAREHOUSE",
    "RECALLWATCH_LOG_SOURCE",
    "RECALLWATCH_REPORT_DIR",
})
# The components of docker-compose.yml that are Airflow processes, with their commands.
COMPONENTS = {
    "api-server": ["airflow", "api-server"],
    "scheduler": ["airflow", "scheduler"],
    "dag-processor": ["airflow", "dag-processor"],
    "triggerer": ["airflow", "triggerer"],
}
HEALTH_KEYS = {"scheduler": "scheduler", "dag-processor": "dag_processor",
               "triggerer": "triggerer"}
DEFAULT_DATABASE = "postgresql+psycopg2://postgres@127.0.0.1:5432/recallwatch_airflow"


class DeploymentError(Exception):
    """Something the person starting the deployment can fix; the message says what."""


# --------------------------------------------------------------------------- settings

def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of a compose env_file as written in deploy/ (comments and blank lines
    skipped; no quotes or ${...} in values, so compose and this reader agree on every value)."""
    values: dict[str, str] = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip() or any(c in value for c in "\"'$"):
            raise DeploymentError(f"{path}:{number} is not a plain KEY=VALUE line "
                                  "(no quotes, no $).")
        values[key.strip()] = value.strip()
    return values


def settings(executor: str = "local") -> dict[str, str]:
    """What compose gives an Airflow container: deploy/airflow.env, then the executor's file
    laid over it (`deploy/${RECALLWATCH_EXECUTOR:-local}.env`)."""
    if executor not in EXECUTOR_FILES:
        raise DeploymentError(f"executor {executor!r} is none of {', '.join(EXECUTOR_FILES)}.")
    return {**read_env_file(ENV_FILE), **read_env_file(EXECUTOR_FILES[executor])}


def same_driver(configured: str, given: str, what: str) -> str:
    """`given`, if it uses the driver (URL scheme) deploy/ configures; else a DeploymentError."""
    if urlsplit(configured).scheme != urlsplit(given).scheme:
        raise DeploymentError(f"{what} {_safe(given)} must use {urlsplit(configured).scheme}:// "
                              f"like deploy/, not {urlsplit(given).scheme}://.")
    return given


def localize(configured: dict[str, str], locations: dict[str, str]) -> dict[str, str]:
    """The configured settings with some locations replaced; database, broker and result
    backend keep the configured drivers. Anything but LOCATION_KEYS is refused."""
    wrong = sorted(set(locations) - LOCATION_KEYS)
    if wrong:
        raise DeploymentError(f"{', '.join(wrong)} are settings, not locations: change them in "
                              "deploy/airflow.env for every deployment alike.")
    result = dict(configured)
    for key, value in locations.items():
        if key in configured and "://" in configured[key] and "://" in value:
            same_driver(configured[key], value, key)
        result[key] = value
    return result


def native_settings(home: Path, *, database: str, api_port: int, executor: str = "local",
                    data: dict[str, str] | None = None, broker: str | None = None,
                    ports: dict[str, int] | None = None) -> dict[str, str]:
    """deploy/'s settings for processes on this machine: AIRFLOW_HOME `home`, the api-server on
    127.0.0.1:`api_port`, this checkout's dags/, `data` (RECALLWATCH_* paths) and, for Celery,
    `broker` (the result backend is the metadata database, as in deploy/celery.env)."""
    home = Path(home).resolve()
    configured = settings(executor)
    locations = {
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": database,
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "auth" / "passwords.json"),
        **{key: str(port) for key, port in (ports or {}).items()},
        **(data or {}),
    }
    if executor == "celery":
        if not broker:
            raise DeploymentError("the celery executor needs a broker URL (e.g. "
                                  "redis://127.0.0.1:6379/0).")
        locations["AIRFLOW__CELERY__BROKER_URL"] = broker
        locations["AIRFLOW__CELERY__RESULT_BACKEND"] = "db+" + database.replace(
            "+psycopg2://", "://", 1)
    return {"AIRFLOW_HOME": str(home), **localize(configured, locations)}


def process_environment(native: dict[str, str], *, inherit: dict[str, str] | None = None,
                        drop_prefixes: tuple[str, ...] = ("AIRFLOW__", "AIRFLOW_HOME",
                                                          "AIRFLOW_CONFIG")) -> dict[str, str]:
    """The environment of the Airflow processes: the caller's (without its own Airflow settings,
    so nothing but deploy/ configures Airflow), this virtualenv first on PATH, then `native`."""
    base = {k: v for k, v in (os.environ if inherit is None else inherit).items()
            if not k.startswith(drop_prefixes)}
    base["PATH"] = f"{BIN}{os.pathsep}{base.get('PATH', '')}"
    return {**base, **native}


# --------------------------------------------------------------------------- PostgreSQL

def _connect_maintenance(database_url: str):
    import psycopg2  # the postgres extra of apache-airflow
    from sqlalchemy.engine import make_url

    url = make_url(database_url)
    try:
        con = psycopg2.connect(host=url.host or "127.0.0.1", port=url.port or 5432,
                               user=url.username, password=url.password, dbname="postgres",
                               connect_timeout=10)
    except psycopg2.OperationalError as exc:
        raise DeploymentError(
            f"cannot reach PostgreSQL at {url.host}:{url.port or 5432} as {url.username} "
            f"({str(exc).strip().splitlines()[0]}): start it (on this machine: pg_ctlcluster "
            "--skip-systemctl-redirect $(ls /etc/postgresql) main start).") from None
    con.autocommit = True
    return con, url.database


def create_database(database_url: str) -> bool:
    """Create the URL's database when it does not exist; True if it was created."""
    from psycopg2 import sql

    con, name = _connect_maintenance(database_url)
    try:
        with con.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if cur.fetchall():
                return False
            cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            return True
    finally:
        con.close()


def drop_database(database_url: str) -> None:
    """Drop the URL's database, closing whatever connections are left on it."""
    from psycopg2 import sql

    con, name = _connect_maintenance(database_url)
    try:
        with con.cursor() as cur:
            cur.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                        .format(sql.Identifier(name)))
    finally:
        con.close()


# --------------------------------------------------------------------------- processes

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def can_set_hostname() -> bool:
    """Whether `unshare --uts` works here (root): a worker then gets a hostname of its own, as
    each worker container does."""
    if not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "--uts", "true"], capture_output=True).returncode == 0


@dataclass
class Deployment:
    """The Airflow processes of one AIRFLOW_HOME. `env` is their environment
    (process_environment); `api_port` the api-server's port."""

    home: Path
    env: dict[str, str]
    api_port: int
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def path(self, *parts: str) -> Path:
        target = Path(self.home, *parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def airflow(self, *args: str, timeout: float = 120, check: bool = True,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """One `airflow ...` command with the deployment's environment."""
        result = subprocess.run([str(BIN / "airflow"), *args], env={**self.env, **(env or {})},
                                capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise DeploymentError(f"airflow {' '.join(args)} failed ({result.returncode}):\n"
                                  f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        return result

    def initialize(self, *, timeout: float = 300, env: dict[str, str] | None = None) -> str:
        """Create the metadata database if missing and run deploy/init.sh (migrate, writer
        pool, admin password). Returns what init.sh printed."""
        self.home.mkdir(parents=True, exist_ok=True)
        create_database(self.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
        result = subprocess.run(["bash", str(INIT_SCRIPT)], env={**self.env, **(env or {})},
                                capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            raise DeploymentError(f"deploy/init.sh failed ({result.returncode}):\n"
                                  f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        return result.stdout

    def start(self, name: str, argv: list[str], *, env: dict[str, str] | None = None,
              hostname: str | None = None) -> subprocess.Popen:
        """Start one process in a new process group (a new session), output to
        HOME/process-logs/NAME.log, PID to HOME/pids/NAME.pid. With `hostname`, in a UTS
        namespace of its own with that hostname (needs unshare, i.e. root)."""
        if name in self.processes and self.processes[name].poll() is None:
            raise DeploymentError(f"{name} is already running (PID {self.processes[name].pid}).")
        command = [str(BIN / argv[0]) if (BIN / argv[0]).exists() else argv[0], *argv[1:]]
        if hostname:
            command = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', hostname,
                       *command]
        log = open(self.path("process-logs", f"{name}.log"), "ab")
        try:
            process = subprocess.Popen(command, env={**self.env, **(env or {})}, stdout=log,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       cwd=self.home, start_new_session=True)
        finally:
            log.close()
        self.processes[name] = process
        self.path("pids", f"{name}.pid").write_text(f"{process.pid}\n")
        return process

    def start_components(self, names=tuple(COMPONENTS)) -> None:
        for name in names:
            argv = list(COMPONENTS[name])
            if name == "api-server":  # on loopback: this is a machine's own deployment
                argv += ["--host", "127.0.0.1", "--port", str(self.api_port)]
            self.start(name, argv)

    def start_worker(self, name: str, *, log_server_port: int | None = None,
                     own_hostname: bool = True) -> subprocess.Popen:
        """One `airflow celery worker` named NAME@host, with a PID file and a log server port
        of its own so that several can run on one machine."""
        argv = ["airflow", "celery", "worker", "--celery-hostname", f"{name}@%h",
                "--pid", str(self.path("pids", f"{name}.celery.pid"))]
        env = {"AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(log_server_port or free_port())}
        return self.start(name, argv, env=env, hostname=name if own_hostname else None)

    def health(self) -> dict:
        with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health", timeout=5) as answer:
            return json.loads(answer.read())

    def wait_healthy(self, timeout: float = 180) -> dict:
        """Until the api-server answers and every started component reports healthy; a
        process that exits meanwhile ends the wait with its log."""
        deadline = time.monotonic() + timeout
        wanted = [HEALTH_KEYS[n] for n in self.processes if n in HEALTH_KEYS]
        last: dict | str = "no answer"
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                last = self.health()
                if all((last.get(key) or {}).get("status") == "healthy" for key in wanted):
                    return last
            except (urllib.error.URLError, OSError, ValueError) as exc:
                last = str(exc)
            time.sleep(1)
        raise DeploymentError(f"not healthy after {timeout:.0f} s: {last}\n{self.tail()}")

    def check_alive(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise DeploymentError(f"{name} exited with {process.returncode}:\n"
                                      f"{self.tail(name)}")

    def tail(self, *names: str, lines: int = 40) -> str:
        out = []
        for name in names or self.processes:
            path = self.home / "process-logs" / f"{name}.log"
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {name} ({path})\n" + "\n".join(text))
        return "\n".join(out)

    def stop(self, grace: float = 30) -> list[str]:
        """End every process group this deployment started (SIGTERM, SIGKILL after `grace`
        seconds), then any process still carrying this AIRFLOW_HOME (a task process that left
        its group). Returns what had to be killed."""
        groups = {name: p.pid for name, p in self.processes.items()}
        groups.update(self._pid_files())
        for pgid in groups.values():
            _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_group_alive(g) for g in groups.values()):
            for process in self.processes.values():
                try:
                    process.wait(timeout=0.2)
                except subprocess.TimeoutExpired:
                    pass
            time.sleep(0.2)
        killed = [name for name, pgid in groups.items() if _group_alive(pgid)]
        for name in killed:
            _signal_group(groups[name], signal.SIGKILL)
        for pid in processes_with_home(self.home):
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(f"pid {pid}")
            except ProcessLookupError:
                pass
        for process in self.processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for pid_file in (self.home / "pids").glob("*.pid") if (self.home / "pids").exists() else ():
            pid_file.unlink()
        self.processes.clear()
        return killed

    def _pid_files(self) -> dict[str, int]:
        """Process groups recorded by an earlier `start` (of another Python process)."""
        found = {}
        folder = self.home / "pids"
        for path in sorted(folder.glob("*.pid")) if folder.exists() else ():
            if path.name.endswith(".celery.pid"):
                continue  # celery's own PID file; the group is the worker's
            try:
                found[path.stem] = int(path.read_text().split()[0])
            except (ValueError, IndexError):
                continue
        return found

    def running(self) -> dict[str, int]:
        return {name: pid for name, pid in self._pid_files().items() if _group_alive(pid)}


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def processes_with_home(home: Path) -> list[int]:
    """PIDs whose environment says AIRFLOW_HOME=home: only processes of this deployment."""
    marker = f"AIRFLOW_HOME={Path(home).resolve()}".encode()
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _safe(url: str) -> str:
    """A URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password:
        return url.replace(f":{parts.password}@", ":***@", 1)
    return url


# --------------------------------------------------------------------------- command line

def _local_data() -> dict[str, str]:
    """RECALLWATCH_* data locations of `make airflow`: the caller's, else the checkout's
    defaults (the warehouse the recallwatch command uses by default)."""
    defaults = {"RECALLWATCH_WAREHOUSE": ROOT / "warehouse" / "recallwatch.duckdb",
                "RECALLWATCH_LOG_SOURCE": ROOT / "data" / "logs",
                "RECALLWATCH_REPORT_DIR": ROOT / "reports" / "latest"}
    return {key: os.environ.get(key) or str(value) for key, value in defaults.items()}


def _deployment(args) -> Deployment:
    """The deployment of --home: a `start` records its port and database there, so that
    `stop`, `status` and `airflow` find them."""
    home = Path(args.home).resolve()
    recorded = json.loads((home / "deployment.json").read_text()) \
        if (home / "deployment.json").exists() else {}
    port = getattr(args, "port", None) or recorded.get("api_port", 8080)
    database = getattr(args, "database", None) or recorded.get("database", DEFAULT_DATABASE)
    native = native_settings(home, database=database, api_port=port, data=_local_data(),
                             ports={"AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT":
                                    free_port()})
    return Deployment(home=home, env=process_environment(native), api_port=port)


def cmd_start(args) -> None:
    deployment = _deployment(args)
    if running := deployment.running():
        raise DeploymentError(f"a deployment already runs from {deployment.home} (PIDs "
                              f"{', '.join(map(str, running.values()))}): make airflow-stop.")
    deployment.home.mkdir(parents=True, exist_ok=True)
    (deployment.home / ".gitignore").write_text("*\n")  # the folder keeps itself out of git
    (deployment.home / "deployment.json").write_text(json.dumps(
        {"api_port": deployment.api_port,
         "database": deployment.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]}) + "\n")
    for key in ("RECALLWATCH_LOG_SOURCE",):
        Path(deployment.env[key]).mkdir(parents=True, exist_ok=True)
    print(deployment.initialize().rstrip())
    deployment.start_components()
    try:
        deployment.wait_healthy(timeout=args.timeout)
    except DeploymentError:
        deployment.stop()
        raise
    env = deployment.env
    print(f"""
Airflow is up: {deployment.url}  (user admin, password in
  {env['AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE']})
  metadata database  {_safe(env['AIRFLOW__DATABASE__SQL_ALCHEMY_CONN'])}
  AIRFLOW_HOME       {deployment.home}   (process logs in process-logs/)
  request logs       {env['RECALLWATCH_LOG_SOURCE']}   (dt=YYYY-MM-DD/ folders)
  warehouse          {env['RECALLWATCH_WAREHOUSE']}
  report             {env['RECALLWATCH_REPORT_DIR']}
The DAGs start paused: load a gold set (recallwatch ingest gold ...), then unpause
recallwatch_monitor and recallwatch_backfill in the UI or with
  .venv/bin/python deploy/standalone.py airflow dags unpause recallwatch_monitor
Stop it with: make airflow-stop""")


def cmd_stop(args) -> None:
    deployment = _deployment(args)
    running = deployment.running()
    killed = deployment.stop()
    print(f"stopped {', '.join(running) or 'nothing (no process was running)'}"
          + (f"; had to kill {', '.join(killed)}" if killed else ""))


def cmd_airflow(args) -> int:
    """`airflow ARGS...` with the deployment's settings (the CLI talks to its database)."""
    deployment = _deployment(args)
    return subprocess.run([str(BIN / "airflow"), *args.args], env=deployment.env).returncode


def cmd_status(args) -> None:
    deployment = _deployment(args)
    running = deployment.running()
    print(f"running: {', '.join(f'{n} ({p})' for n, p in running.items()) or 'nothing'}")
    if running:
        try:
            print(json.dumps(deployment.health(), indent=1))
        except (urllib.error.URLError, OSError) as exc:
            print(f"api-server at {deployment.url} does not answer: {exc}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="deploy/standalone.py", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(required=True, dest="command")
    start = sub.add_parser("start", help="migrate, create the pool, start the processes")
    start.add_argument("--home", default=str(ROOT / ".airflow"), help="AIRFLOW_HOME")
    start.add_argument("--database", default=DEFAULT_DATABASE,
                       help="metadata database URL (created if missing)")
    start.add_argument("--port", type=int, default=8080, help="the api-server's port")
    start.add_argument("--timeout", type=float, default=180, help="seconds to become healthy")
    start.set_defaults(func=cmd_start)
    for name, func in (("stop", cmd_stop), ("status", cmd_status)):
        p = sub.add_parser(name, help=f"{name} the processes started from --home")
        p.add_argument("--home", default=str(ROOT / ".airflow"), help="AIRFLOW_HOME")
        p.set_defaults(func=func)
    cli = sub.add_parser("airflow", help="run `airflow ARGS...` against the deployment")
    cli.add_argument("--home", default=str(ROOT / ".airflow"), help="AIRFLOW_HOME")
    cli.add_argument("args", nargs=argparse.REMAINDER, help="e.g. dags list")
    cli.set_defaults(func=cmd_airflow)
    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except DeploymentError as exc:
        print(f"deploy/standalone.py: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
