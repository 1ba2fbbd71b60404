# syntax=docker/dockerfile:1
# The recallwatch Airflow image: the official Airflow 3 image with recallwatch installed as a
# normal wheel (never editable) and the DAGs in the image's dags folder. docker-compose.yml
# builds it; deploy/airflow.env holds its settings.
ARG AIRFLOW_IMAGE=apache/airflow:3.3.2-python3.11

# --- wheel: build recallwatch's wheel from the sources alone (the SQL and templates ride in it)
FROM ${AIRFLOW_IMAGE} AS wheel
WORKDIR /home/airflow/build
COPY --chown=airflow:root pyproject.toml README.md ./
COPY --chown=airflow:root pipeline ./pipeline
COPY --chown=airflow:root sql ./sql
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /home/airflow/dist .

# --- the image the deployment runs
FROM ${AIRFLOW_IMAGE}
# Installed beside the pinned apache-airflow of the image, so pip can never up- or downgrade
# Airflow (or its providers' dependencies) to satisfy recallwatch's.
COPY --from=wheel /home/airflow/dist/ /tmp/wheels/
RUN pip install --no-cache-dir "apache-airflow==${AIRFLOW_VERSION}" /tmp/wheels/recallwatch-*.whl

COPY --chown=airflow:root dags/ /opt/airflow/dags/
COPY --chown=airflow:root deploy/ /opt/recallwatch/deploy/

# Mount points of the compose volumes. A new named volume starts as a copy of these folders, so
# they belong to the image's airflow user and its group 0 (compose runs as AIRFLOW_UID:0).
USER root
RUN rm -rf /tmp/wheels \
    && mkdir -p /opt/recallwatch/warehouse /opt/recallwatch/logs /opt/recallwatch/gold \
       /opt/recallwatch/index /opt/recallwatch/reports /opt/airflow/auth /opt/airflow/config \
    && chown -R airflow:root /opt/recallwatch /opt/airflow/auth /opt/airflow/config \
    && chmod -R g+rwX /opt/recallwatch /opt/airflow/auth /opt/airflow/config
USER airflow
