# syntax=docker/dockerfile:1
#
# queuebox server image.
#
#   docker build -t queuebox .
#   docker run -d --name queuebox -p 3301:3301 -v queuebox-data:/var/lib/queuebox \
#       -e QUEUEBOX_USER=app -e QUEUEBOX_PASSWORD=change-me queuebox
#
# Two stages: the builder turns the project and its dependencies into wheels
# (the only step that needs the network); the runtime stage installs those
# wheels with --no-index, so nothing is fetched when the container runs.
# docker/README.md documents every setting.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
# .dockerignore lets in only the packaging metadata and the five packages.
COPY . .
RUN pip wheel --wheel-dir /wheels .

FROM ${PYTHON_IMAGE} AS runtime
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
# A fixed numeric uid/gid, so volume ownership and `runAsNonRoot` checks are
# predictable wherever the image runs.
RUN groupadd --system --gid 10001 queuebox \
 && useradd --system --uid 10001 --gid 10001 --no-create-home \
        --home-dir /var/lib/queuebox --shell /usr/sbin/nologin queuebox \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/queuebox
# Bind-mounting the wheels (instead of COPY + rm) keeps them out of every layer.
# The wheels were built from this very checkout, so the version is pinned by them.
# hadolint ignore=DL3013
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels queuebox

# The guest (a client that does not log in) gets no rights, whatever address
# the server listens on; on 0.0.0.0 the server then refuses to start without
# QUEUEBOX_USER + QUEUEBOX_PASSWORD. An open server takes two explicit
# settings: QUEUEBOX_GUEST_RIGHTS=all and QUEUEBOX_ALLOW_OPEN_GUEST=1.
ENV QUEUEBOX_LISTEN=0.0.0.0:3301 \
    QUEUEBOX_DATA_DIR=/var/lib/queuebox \
    QUEUEBOX_GUEST_RIGHTS=none \
    QUEUEBOX_LOG_FORMAT=json
VOLUME ["/var/lib/queuebox"]
EXPOSE 3301
WORKDIR /var/lib/queuebox
USER 10001:10001

# `queuebox ping` finds the server from the same environment: the port of
# QUEUEBOX_LISTEN on 127.0.0.1, and QUEUEBOX_USER/PASSWORD to log in, so the
# check also fails if the configured credentials do not work.
HEALTHCHECK --interval=10s --timeout=5s --start-period=15s --retries=3 \
    CMD ["queuebox", "ping", "--connect-timeout", "2"]

# Exec form: the server is PID 1 and receives SIGTERM itself (docker stop),
# which it handles as a graceful shutdown.
STOPSIGNAL SIGTERM
ENTRYPOINT ["queuebox"]
CMD ["serve"]
