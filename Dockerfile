# syntax=docker/dockerfile:1
# The Argus operator image: `argus-operator` in a virtual environment holding exactly the
# locked dependencies (requirements/operator.txt: hashes required), on a base
# image pinned by digest, as a non-root user. The operator only talks to the Kubernetes API
# and the Ray dashboard; the training runs on the Ray workers, not here.
#
#   docker build --build-arg BASE_IMAGE=python:3.11-slim-bookworm@sha256:<digest> -t argus-operator:dev .
#
# BASE_IMAGE must name a digest (the build refuses a bare tag): hack/pin-base-image.sh prints
# the current one where the registry is reachable. Any Debian-based CPython 3.11 image with
# `python3 -m venv` works: docs/deploy.md ("The image") builds one with buildah and
# debootstrap on a machine without Docker or registry access (hack/build-image.sh).
ARG BASE_IMAGE

FROM ${BASE_IMAGE} AS build
ARG BASE_IMAGE
RUN case "${BASE_IMAGE}" in *@sha256:*) ;; *) echo "BASE_IMAGE=${BASE_IMAGE}: pin the base image by digest (name@sha256:...)" >&2; exit 1 ;; esac
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY requirements/operator.txt requirements/image-prune.txt requirements/
RUN python3 -m venv /opt/argus \
 && /opt/argus/bin/pip install --require-hashes --prefer-binary --no-deps -r requirements/operator.txt
# The pinned verl releases' config trees the operator composes tasks with when the cluster's
# own verl snapshot is not mounted (operator/argus/verl-releases.txt; wheels sha256-checked,
# unpacked, never imported): /opt/argus/verl/<version>.
COPY operator/argus/verl-releases.txt operator/argus/
COPY hack/fetch-verl.sh hack/
RUN PYTHON=/opt/argus/bin/python ARGUS_CACHE_DIR=/tmp/verl-cache bash hack/fetch-verl.sh >/dev/null \
 && mv /tmp/verl-cache/verl /opt/argus/verl && rm -f /opt/argus/verl/.fetch.lock
COPY pyproject.toml README.md ./
COPY operator ./operator
COPY hack/prune-venv.sh hack/
RUN /opt/argus/bin/pip wheel --no-deps --wheel-dir /tmp/wheels . \
 && /opt/argus/bin/pip install --no-deps /tmp/wheels/argus_operator-*.whl \
 && /opt/argus/bin/pip check \
 && bash hack/prune-venv.sh /opt/argus requirements/image-prune.txt \
 && /opt/argus/bin/python -m compileall -q -j 0 /opt/argus/lib \
 && /opt/argus/bin/argus-operator --help >/dev/null

FROM ${BASE_IMAGE}
LABEL org.opencontainers.image.title="argus-operator" \
      org.opencontainers.image.description="Runs ArgusTasks (verl training) on a shared Ray cluster"
ENV PATH=/opt/argus/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HOME=/tmp
# The uid/gid the Helm chart's default securityContext runs as (runAsNonRoot needs a numeric
# USER); platforms that assign their own uid (OpenShift) work too: nothing here needs it.
COPY --from=build /opt/argus /opt/argus
USER 10001:10001
WORKDIR /tmp
# Probes (--health-port), metrics (--metrics-port), webhook (--webhook-port).
EXPOSE 8080 9090 9443
ENTRYPOINT ["argus-operator"]
