# etcd for the `ha` profile of docker/compose.yaml (the primary and the replica
# keep their leader lease in it): Debian's own etcd-server package on the same
# Debian base as the queuebox image (the PYTHON_IMAGE build argument of the
# top-level Dockerfile). Plain Dockerfile syntax, like the main one.
#
#   docker build -f docker/etcd.Dockerfile -t queuebox-etcd .    # from the repository root
#
# Online (no WHEELHOUSE), apt fetches the package from the base's Debian index.
# Offline, WHEELHOUSE names the folder of the offline build (docker/README.md,
# "Offline build") that holds etcd-server's .deb beside the wheels: it is
# installed from there and nothing is fetched (`docker build --network none`).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# Only the .deb files cross over from the build context (which .dockerignore
# limits to the sources and wheelhouse/): a missing one fails the build here.
FROM ${PYTHON_IMAGE} AS debs
ARG WHEELHOUSE=
COPY . /context
RUN set -e; mkdir /debs; \
    if [ -n "$WHEELHOUSE" ]; then cp /context/"$WHEELHOUSE"/etcd-server_*.deb /debs/; fi

FROM ${PYTHON_IMAGE}
ARG WHEELHOUSE=
COPY --from=debs /debs /tmp/debs
# The package's postinst makes the `etcd` system user; `id` fails the build if not.
RUN set -e; \
    if [ -n "$WHEELHOUSE" ]; then \
        apt-get install -y --no-install-recommends /tmp/debs/*.deb; \
    else \
        apt-get update; \
        apt-get install -y --no-install-recommends etcd-server; \
    fi; \
    rm -rf /tmp/debs /var/lib/apt/lists/* /var/cache/apt/*.bin; \
    id etcd; \
    install -d -o etcd -g etcd -m 700 /var/lib/etcd/data
USER etcd
EXPOSE 2379
VOLUME ["/var/lib/etcd"]
# One member. Clients reach it as etcd:2379 on the compose network; the peer
# port stays on the container's loopback (no other member to talk to).
ENTRYPOINT ["etcd"]
CMD ["--name", "etcd", "--data-dir", "/var/lib/etcd/data", \
     "--listen-client-urls", "http://0.0.0.0:2379", \
     "--advertise-client-urls", "http://etcd:2379", \
     "--listen-peer-urls", "http://127.0.0.1:2380", \
     "--initial-advertise-peer-urls", "http://127.0.0.1:2380", \
     "--initial-cluster", "etcd=http://127.0.0.1:2380"]
