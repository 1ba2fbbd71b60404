#!/usr/bin/env bash
# Prepare an Airflow metadata database for recallwatch, once, before the other processes start:
# wait for the database, migrate it, create the one-slot writer pool, and give the admin its
# password. Compose's init service runs it in the image, `make airflow` and
# tests/test_deployment.py run it natively; all with deploy/airflow.env in the environment.
# Running it again changes nothing (a password already stored is kept unless AIRFLOW_PASSWORD
# asks for another).
set -euo pipefail

: "${RECALLWATCH_WRITER_POOL:?deploy/airflow.env is not in the environment}"
: "${RECALLWATCH_WRITER_POOL_SLOTS:?deploy/airflow.env is not in the environment}"

airflow db check --retry 30 --retry-delay 2 >/dev/null
airflow db migrate >/dev/null
echo "metadata database migrated"
airflow pools set "$RECALLWATCH_WRITER_POOL" "$RECALLWATCH_WRITER_POOL_SLOTS" \
    "one process at a time may open the recallwatch DuckDB warehouse" >/dev/null
echo "pool $RECALLWATCH_WRITER_POOL: $RECALLWATCH_WRITER_POOL_SLOTS slot(s)"

mkdir -p "$(dirname "$RECALLWATCH_WAREHOUSE")" "$RECALLWATCH_REPORT_DIR"

# The simple auth manager reads passwords from a JSON file ({"user": "password"}) and would
# make one up for a user it lacks, printing it only in the api-server's log. Decide it here:
# AIRFLOW_PASSWORD when given, else the stored one, else a new random one, said once below.
python - <<'PY'
import json, os, secrets
from pathlib import Path

path = Path(os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"])
users = [u.split(":")[0] for u in os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].split(",")]
stored = json.loads(path.read_text() or "{}") if path.exists() else {}
given = os.environ.get("AIRFLOW_PASSWORD")
for user in users:
    if given and user == os.environ.get("AIRFLOW_USER", users[0]):
        stored[user] = given
    elif user not in stored:
        stored[user] = secrets.token_urlsafe(12)
        print(f"Airflow user {user!r} has the new password {stored[user]} (kept in {path})")
path.parent.mkdir(parents=True, exist_ok=True)
path.write_text(json.dumps(stored) + "\n")
path.chmod(0o600)
print(f"Airflow users: {', '.join(users)} (passwords in {path})")
PY
