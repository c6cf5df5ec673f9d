# The check's stand-in for the official postgres image (no registry is reachable where
# scripts/compose-check.sh runs): Debian's postgresql package with the same contract as
# postgres:17-bookworm for what docker/compose.yaml uses: POSTGRES_USER / POSTGRES_PASSWORD /
# POSTGRES_DB create the role and database on the first start, the data live in
# /var/lib/postgresql/data (the pgdata volume), pg_isready is on PATH, port 5432, and the server
# runs as the unprivileged `postgres` user.
ARG BASE_IMAGE=animegamer-check/debian:bookworm
FROM ${BASE_IMAGE}
# The base image's release fixes the versions (Debian bookworm's PostgreSQL 15).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends postgresql-15 postgresql-client-15 \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/postgresql/data /var/run/postgresql \
    && chown postgres:postgres /var/lib/postgresql/data /var/run/postgresql \
    && chmod 700 /var/lib/postgresql/data
COPY docker/check/postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint.sh
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
# A fresh named volume takes the directory's owner from the image, so no root step is needed.
USER postgres
EXPOSE 5432
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint.sh"]
