# The Argus operator image: `argus-operator` (kopf) on a slim Python, as a non-root user.
# Nothing else: the operator only talks to the Kubernetes API and the Ray dashboard; the
# training code runs on the Ray workers, not here.
#
#   docker build -t argus-operator:dev .
#
# (Machines without Docker cannot build it: docs/deploy.md. hack/kind-e2e.sh builds it and
# loads it into a kind cluster where Docker exists.)
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The uid/gid the Helm chart's securityContext runs as (runAsNonRoot needs a numeric USER).
RUN groupadd --system --gid 10001 argus \
 && useradd --system --uid 10001 --gid 10001 --home-dir /home/argus --create-home --shell /usr/sbin/nologin argus

WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN pip install . && rm -rf /src

WORKDIR /home/argus
USER 10001:10001
# kopf's liveness endpoint (--liveness), metrics (--metrics-port), webhook (--webhook-port).
EXPOSE 8080 9090 9443
ENTRYPOINT ["argus-operator"]
