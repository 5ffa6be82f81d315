# etcd for the `ha` profile of docker/compose.yaml (the primary and the replica
# keep their leader lease in it). Debian's own etcd-server package on the same
# Debian base as the queuebox image (the PYTHON_IMAGE build argument of the
# top-level Dockerfile), so an offline build needs that base and a Debian
# mirror, nothing else. Plain Dockerfile syntax, like the main one.
#
#   docker build -f docker/etcd.Dockerfile -t queuebox-etcd docker
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE}
# The package's postinst makes the `etcd` system user; `id` fails the build if not.
RUN apt-get update \
    && apt-get install -y --no-install-recommends etcd-server \
    && rm -rf /var/lib/apt/lists/* \
    && id etcd \
    && install -d -o etcd -g etcd -m 700 /var/lib/etcd/data
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
