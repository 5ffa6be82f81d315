# queuebox server image.
#
#   docker build -t queuebox .
#   docker run -d --name queuebox -p 3301:3301 -p 8080:8080 -v queuebox-data:/var/lib/queuebox \
#       -e QUEUEBOX_USER=app -e QUEUEBOX_PASSWORD=change-me queuebox
#
# Plain Dockerfile syntax only (no `# syntax=` line, no RUN --mount), so it
# builds with the classic builder and with BuildKit, and BuildKit never fetches
# a frontend image. Two stages: the builder installs the project, compiled
# (mypyc), and its dependencies into a virtualenv (the only step that needs an
# index or a wheelhouse); the runtime stage copies that virtualenv, so nothing
# is fetched when the container runs and no compiler is shipped.
# docker/README.md documents every setting and the offline build.

# Any Debian-based image with python3 (3.11+) and its venv module on PATH: the
# official image by default, or a local stand-in for an air-gapped build.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
# Unset, pip installs from its index (PIP_INDEX_URL can name a mirror). For an
# offline build, WHEELHOUSE names a folder of wheels inside the build context
# (docker/README.md, "Offline build") and pip looks nowhere else.
ARG PIP_INDEX_URL
ARG WHEELHOUSE=
# Optional parts to install with it, e.g. EXTRAS=etcd for failover with etcd
# (aetcd and grpcio, some 19 MB); none by default: a single server needs none.
ARG EXTRAS=
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
# .dockerignore lets in only the packaging metadata, setup.py, the six package
# folders and an optional wheelhouse/.
COPY . .
# The image ships the compiled build (docs/performance.md). With WHEELHOUSE,
# pip installs the queuebox wheel in it, compiled where the wheelhouse was made
# (docker/README.md, "Offline build"): nothing is compiled here. Without, pip
# builds queuebox from this source, so gcc (and Python's headers, if the base
# lacks them) come first from the distribution's index. Either way the build
# stops unless `queuebox --version` says compiled.
# The same path in both stages: the venv's scripts name /opt/queuebox/bin/python,
# a link to the base image's python3, which the runtime stage has too. pip and
# setuptools leave the venv once they are done (25 MB the server never uses).
RUN set -e; \
    target=queuebox; \
    if [ -z "$WHEELHOUSE" ]; then \
        target=.; \
        headers=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])'); \
        apt-get update; \
        apt-get install -y --no-install-recommends gcc libc6-dev \
            $([ -e "$headers/Python.h" ] || echo python3-dev); \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    python3 -m venv /opt/queuebox; \
    target="$target${EXTRAS:+[$EXTRAS]}"; \
    /opt/queuebox/bin/pip install ${WHEELHOUSE:+--no-index --find-links="/src/$WHEELHOUSE"} "$target"; \
    /opt/queuebox/bin/pip uninstall --yes pip setuptools; \
    /opt/queuebox/bin/queuebox --version | grep '(compiled: '

FROM ${PYTHON_IMAGE} AS runtime
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PATH=/opt/queuebox/bin:$PATH
# A fixed numeric uid/gid, so volume ownership and `runAsNonRoot` checks are
# predictable wherever the image runs.
RUN groupadd --system --gid 10001 queuebox \
 && useradd --system --uid 10001 --gid 10001 --no-create-home \
        --home-dir /var/lib/queuebox --shell /usr/sbin/nologin queuebox \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/queuebox
# Only the installed environment crosses over: no wheels, sources or pip cache.
COPY --from=builder /opt/queuebox /opt/queuebox

# The guest (a client that does not log in) gets no rights, whatever address
# the server listens on; on 0.0.0.0 the server then refuses to start without
# QUEUEBOX_USER + QUEUEBOX_PASSWORD. An open server takes two explicit
# settings: QUEUEBOX_GUEST_RIGHTS=all and QUEUEBOX_ALLOW_OPEN_GUEST=1.
# The HTTP listener (web console, /metrics, /healthz) is on at 8080: with the
# guest given nothing, the console asks for QUEUEBOX_USER's login.
ENV QUEUEBOX_LISTEN=0.0.0.0:3301 \
    QUEUEBOX_HTTP_LISTEN=0.0.0.0:8080 \
    QUEUEBOX_DATA_DIR=/var/lib/queuebox \
    QUEUEBOX_GUEST_RIGHTS=none \
    QUEUEBOX_LOG_FORMAT=json
VOLUME ["/var/lib/queuebox"]
EXPOSE 3301 8080
WORKDIR /var/lib/queuebox
USER 10001:10001

# `queuebox ping` finds the server from the same environment: the port of
# QUEUEBOX_LISTEN on 127.0.0.1, and QUEUEBOX_USER/PASSWORD to log in, so the
# check also fails if the configured credentials do not work. Containers that
# run other commands from this image (compose's example clients) turn it off.
HEALTHCHECK --interval=10s --timeout=5s --start-period=15s --retries=3 \
    CMD ["queuebox", "ping", "--connect-timeout", "2"]

# Exec form: the server is PID 1 and receives SIGTERM itself (docker stop),
# which it handles as a graceful shutdown.
STOPSIGNAL SIGTERM
ENTRYPOINT ["queuebox"]
CMD ["serve"]
