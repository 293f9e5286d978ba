# syntax=docker/dockerfile:1
# The Argus operator image: `argus-operator` in a virtual environment holding exactly the
# locked dependencies (requirements/operator.txt: hashes required; the build backend from
# requirements/build.txt), on a base image pinned by digest, as a non-root user. The operator
# only talks to the Kubernetes API and the Ray dashboard; the training runs on the Ray
# workers, not here.
#
#   docker build -t argus-operator:dev .
#
# BASE_IMAGE below is the one record of the base image's digest: `hack/pin-base-image.sh
# --write` replaces it with the tag's current digest (where a registry is reachable), and a
# bot that updates Dockerfile digests (Renovate's dockerfile manager reads ARG defaults used
# in FROM) can propose the same change. A --build-arg BASE_IMAGE=... without a digest, or an
# empty one, is refused. Any Debian-based CPython 3.11 image with `python3 -m venv` works:
# docs/deploy.md ("The image") builds one with buildah and debootstrap on a machine without
# Docker or registry access (hack/build-image.sh passes that base's digest instead).
# Not verified here: this machine reaches no registry, so the digest below was copied from a
# public record of the tag and never pulled; run `hack/pin-base-image.sh --write` where a
# registry is reachable (docs/releasing.md) before an image is built from the default.
ARG BASE_IMAGE=docker.io/library/python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91

FROM ${BASE_IMAGE} AS build
ARG BASE_IMAGE
RUN case "${BASE_IMAGE}" in *@sha256:*) ;; *) echo "BASE_IMAGE=${BASE_IMAGE}: pin the base image by digest (name@sha256:..., as the Dockerfile's default; hack/pin-base-image.sh)" >&2; exit 1 ;; esac
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY requirements/operator.txt requirements/build.txt requirements/image-prune.txt requirements/
# The build backend first, from its hashed lock (requirements/build.txt, hack/lock.sh); every
# build after it runs without build isolation, which would fetch an unpinned backend from the
# index (the lock's one sdist, antlr4-python3-runtime, and the operator's wheel); the prune
# below removes the backend again.
RUN python3 -m venv /opt/argus \
 && /opt/argus/bin/pip install --require-hashes --only-binary :all: --no-deps -r requirements/build.txt \
 && /opt/argus/bin/pip install --require-hashes --prefer-binary --no-deps --no-build-isolation -r requirements/operator.txt
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
RUN /opt/argus/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /tmp/wheels . \
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
