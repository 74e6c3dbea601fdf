#!/usr/bin/env bash
# Provision PostgreSQL 15 + the pgmq extension 1.13.0 for crossbench's pgmq adapter.
#
# Run as root on Debian 12 (a fresh machine or one where this already ran: every step
# checks before it acts). Network: Debian apt and PyPI only. Result: a cluster on
# 127.0.0.1:5432 that user `postgres` can reach over TCP without a password, a database
# `crossbench`, and `CREATE EXTENSION pgmq` (1.13.0) in it.
#
# Environment overrides:
#   PGMQ_CACHE   where the pinned wheel is kept (default /var/cache/crossbench; never the repo)
#   PG_MAJOR     PostgreSQL major version (default 15)
#   PG_PORT      cluster port (default 5432)
#   PG_DB        database to create the extension in (default crossbench)
set -euo pipefail

PG_MAJOR="${PG_MAJOR:-15}"
PG_PORT="${PG_PORT:-5432}"
PG_DB="${PG_DB:-crossbench}"
CACHE="${PGMQ_CACHE:-/var/cache/crossbench}"
PGMQ_WHEEL_VERSION="1.1.4"      # PyPI package `pgmq`; ships pgmq/sql/pgmq.sql = extension 1.13.0
PGMQ_EXT_VERSION="1.13.0"
PGMQ_WHEEL="pgmq-${PGMQ_WHEEL_VERSION}-py3-none-any.whl"
PGMQ_WHEEL_SHA256="4d9e7aa517295669d46a11d3d13106efbdc738d0e127d84c567b6d4c936e7d1d"

say() { printf 'pgmq.sh: %s\n' "$*"; }
die() { printf 'pgmq.sh: ERROR: %s\n' "$*" >&2; exit 1; }
trap 'die "failed at line $LINENO: $BASH_COMMAND"' ERR

[ "$(id -u)" = 0 ] || die "run as root (it installs packages and writes into the PostgreSQL share dir)"

PGBIN="/usr/lib/postgresql/${PG_MAJOR}/bin"
psql_tcp() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres "$@"; }

# 1. PostgreSQL server package.
if [ -x "$PGBIN/postgres" ]; then
    say "postgresql-${PG_MAJOR} already installed ($("$PGBIN/postgres" --version))"
else
    say "installing postgresql-${PG_MAJOR} (+ contrib for pgbench) with apt"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends "postgresql-${PG_MAJOR}" postgresql-contrib unzip python3-pip >/dev/null \
        || die "apt-get install postgresql-${PG_MAJOR} failed"
fi
command -v unzip >/dev/null || { say "installing unzip"; apt-get install -y -q --no-install-recommends unzip >/dev/null; }

# 2. The cluster: create it if the package did not, start it if down.
if ! pg_lsclusters -h 2>/dev/null | awk -v v="$PG_MAJOR" '$1==v && $2=="main"' | grep -q .; then
    say "creating cluster ${PG_MAJOR}/main on port ${PG_PORT}"
    pg_createcluster --port "$PG_PORT" "$PG_MAJOR" main >/dev/null
fi
status=$(pg_lsclusters -h | awk -v v="$PG_MAJOR" '$1==v && $2=="main" {print $4}')
if [ "$status" != "online" ]; then
    say "starting cluster ${PG_MAJOR}/main (was: ${status:-unknown})"
    pg_ctlcluster --skip-systemctl-redirect "$PG_MAJOR" main start || die "pg_ctlcluster start failed (see /var/log/postgresql/postgresql-${PG_MAJOR}-main.log)"
else
    say "cluster ${PG_MAJOR}/main is online"
fi
for _ in $(seq 1 50); do "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" && break; sleep 0.2; done
"$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" || die "PostgreSQL does not accept connections on 127.0.0.1:${PG_PORT} (is listen_addresses localhost?)"

# 3. TCP login for user postgres from 127.0.0.1 without a password (the adapter's default DSN).
if psql_tcp -d postgres -c 'select 1' >/dev/null 2>&1; then
    say "127.0.0.1 login as postgres works"
else
    HBA=$(runuser -u postgres -- psql -X -At -p "$PG_PORT" -c 'show hba_file') || die "cannot ask the cluster for its hba_file over the local socket"
    say "adding 'host all postgres 127.0.0.1/32 trust' at the top of $HBA and reloading"
    cp -p "$HBA" "$HBA.crossbench.bak"
    { echo "host all postgres 127.0.0.1/32 trust   # added by crossbench scripts/provision/pgmq.sh"; cat "$HBA.crossbench.bak"; } > "$HBA"
    runuser -u postgres -- psql -X -q -p "$PG_PORT" -c 'select pg_reload_conf()' >/dev/null
    sleep 0.5
    psql_tcp -d postgres -c 'select 1' >/dev/null || die "still cannot log in as postgres on 127.0.0.1:${PG_PORT} after editing $HBA"
fi

# 4. The pinned pgmq wheel, in a cache outside the repository.
mkdir -p "$CACHE"
if [ -f "$CACHE/$PGMQ_WHEEL" ] && echo "$PGMQ_WHEEL_SHA256  $CACHE/$PGMQ_WHEEL" | sha256sum -c --status; then
    say "cached $CACHE/$PGMQ_WHEEL (sha256 ok)"
else
    rm -f "$CACHE/$PGMQ_WHEEL"
    PIP=$(command -v pip3 || command -v pip || true)
    [ -n "$PIP" ] || die "pip is missing: apt-get install python3-pip"
    say "downloading pgmq==${PGMQ_WHEEL_VERSION} from PyPI into $CACHE"
    "$PIP" download -q --no-deps --only-binary=:all: "pgmq==${PGMQ_WHEEL_VERSION}" -d "$CACHE" || die "pip download pgmq==${PGMQ_WHEEL_VERSION} failed"
    echo "$PGMQ_WHEEL_SHA256  $CACHE/$PGMQ_WHEEL" | sha256sum -c --status \
        || die "sha256 of $CACHE/$PGMQ_WHEEL is not $PGMQ_WHEEL_SHA256: refusing to install it"
    say "sha256 verified"
fi

# 5. Extension files into the server's share dir.
PGCONFIG="$PGBIN/pg_config"; [ -x "$PGCONFIG" ] || PGCONFIG=pg_config
EXT="$("$PGCONFIG" --sharedir)/extension"
[ -d "$EXT" ] || die "extension dir $EXT does not exist"
tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
unzip -p "$CACHE/$PGMQ_WHEEL" pgmq/sql/pgmq.sql > "$tmp" || die "pgmq/sql/pgmq.sql not found in the wheel"
ver=$(unzip -p "$CACHE/$PGMQ_WHEEL" pgmq/sql/VERSION 2>/dev/null | tr -d '[:space:]' || true)
[ -z "$ver" ] || [ "$ver" = "$PGMQ_EXT_VERSION" ] || die "wheel ships pgmq SQL $ver, expected $PGMQ_EXT_VERSION"
if cmp -s "$tmp" "$EXT/pgmq--${PGMQ_EXT_VERSION}.sql"; then
    say "$EXT/pgmq--${PGMQ_EXT_VERSION}.sql already in place"
else
    install -m 0644 "$tmp" "$EXT/pgmq--${PGMQ_EXT_VERSION}.sql"
    say "installed $EXT/pgmq--${PGMQ_EXT_VERSION}.sql"
fi
control="comment = 'A lightweight message queue. Like AWS SQS and RSMQ but on Postgres.'
default_version = '${PGMQ_EXT_VERSION}'
schema = 'pgmq'
relocatable = false
superuser = false"
if [ "$(cat "$EXT/pgmq.control" 2>/dev/null)" = "$control" ]; then
    say "$EXT/pgmq.control already in place"
else
    printf '%s\n' "$control" > "$EXT/pgmq.control"; chmod 0644 "$EXT/pgmq.control"
    say "wrote $EXT/pgmq.control"
fi

# 6. Database + extension.
if [ "$(psql_tcp -d postgres -At -c "select 1 from pg_database where datname = '${PG_DB}'")" = 1 ]; then
    say "database ${PG_DB} exists"
else
    psql_tcp -d postgres -c "create database \"${PG_DB}\"" >/dev/null
    say "created database ${PG_DB}"
fi
psql_tcp -d "$PG_DB" -c 'create extension if not exists pgmq' >/dev/null
have=$(psql_tcp -d "$PG_DB" -At -c "select extversion from pg_extension where extname = 'pgmq'")
if [ "$have" != "$PGMQ_EXT_VERSION" ]; then
    say "pgmq is at ${have}; updating to ${PGMQ_EXT_VERSION}"
    psql_tcp -d "$PG_DB" -c "alter extension pgmq update to '${PGMQ_EXT_VERSION}'" >/dev/null \
        || die "pgmq ${have} is installed in ${PG_DB} and cannot be updated to ${PGMQ_EXT_VERSION}; drop it (drop extension pgmq cascade) and rerun"
fi
fns=$(psql_tcp -d "$PG_DB" -At -c "select string_agg(distinct proname, ',' order by proname) from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = 'pgmq' and proname in ('read_grouped_head','read_grouped_rr','create_fifo_index','send_batch','delete','archive')")
say "pgmq ${PGMQ_EXT_VERSION} ready in database ${PG_DB} on 127.0.0.1:${PG_PORT} (functions: ${fns})"
say "DSN: postgres://postgres@127.0.0.1:${PG_PORT}/${PG_DB}"
# Said, not changed: the server is shared and its settings are its owner's. With
# autovacuum off (a CI image's conf.d can set it), dead row versions pile up in every
# table that outlives a cell (Queen's own tables, for one); each pgmq record says it.
av=$(psql_tcp -d "$PG_DB" -At -c "show autovacuum")
if [ "$av" != on ]; then
    say "NOTE: autovacuum is ${av} on this server ($(psql_tcp -d "$PG_DB" -At -c "select coalesce(sourcefile, source) from pg_settings where name = 'autovacuum'")): tables that outlive a cell are never vacuumed unless you VACUUM them"
fi
