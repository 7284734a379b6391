#!/bin/sh
# Start the seeded PostgreSQL cluster of the mcp sandbox and wait until it accepts connections.
# Idempotent (a running cluster is left alone); run as root or postgres. Listens on loopback
# only (127.0.0.1:5432) and on the socket folder /run/postgresql, so it works with
# `--network none`; logs go to the data folder, on the sandbox's disk.
set -eu
PGBIN=/usr/lib/postgresql/15/bin
PGDATA=/var/lib/postgresql/15/main
as_postgres() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
if "$PGBIN/pg_isready" -q -h 127.0.0.1 -p 5432; then
    exit 0
fi
if [ "$(id -u)" = 0 ]; then
    mkdir -p /run/postgresql
    chown postgres:postgres /run/postgresql
    chmod 2775 /run/postgresql
fi
# A postmaster.pid left by a container that was stopped while the server ran names a pid of
# that container; here it would block the start (or name an unrelated process).
if [ -f "$PGDATA/postmaster.pid" ] && ! as_postgres "$PGBIN/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1; then
    rm -f "$PGDATA/postmaster.pid"
fi
as_postgres "$PGBIN/pg_ctl" -D "$PGDATA" -l "$PGDATA/server.log" -w -t 30 -s start
exec "$PGBIN/pg_isready" -q -h 127.0.0.1 -p 5432 -t 10
