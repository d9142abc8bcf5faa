#!/usr/bin/env bash
# Starts the PostgreSQL server the shared-storage tests can use, on 127.0.0.1, with a
# database and user "hpsearch". Installs Debian's postgresql first if it is missing.
# Idempotent: a running server, an existing user or database are left as they are.
# Prints the URL and exports nothing; to use it:
#   export HPSEARCH_TEST_POSTGRES_URL=$(.ci/start-services.sh)
# (Without that variable, tests/test_postgres.py starts a throw-away server of its own.)
set -euo pipefail

sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"

if ! dpkg-query -W -f='${Status}' postgresql 2>/dev/null | grep -q "install ok installed"; then
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq >&2
    $sudo apt-get install -y -qq --no-install-recommends postgresql >/dev/null
fi

version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
cluster=main
if ! pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1 == v && $2 == c' | grep -q .; then
    $sudo pg_createcluster "$version" "$cluster" >/dev/null
fi
port=$(pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1 == v && $2 == c {print $3}')
if ! pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1 == v && $2 == c {print $4}' | grep -q online; then
    $sudo pg_ctlcluster "$version" "$cluster" start
fi

psql_admin() { $sudo runuser -u postgres -- psql -p "$port" -v ON_ERROR_STOP=1 -qtA "$@"; }
for _ in $(seq 30); do psql_admin -c "SELECT 1" >/dev/null 2>&1 && break; sleep 1; done
if [[ -z $(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = 'hpsearch'") ]]; then
    psql_admin -c "CREATE ROLE hpsearch LOGIN PASSWORD 'hpsearch'"
fi
if [[ -z $(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = 'hpsearch'") ]]; then
    psql_admin -c "CREATE DATABASE hpsearch OWNER hpsearch"
fi

echo "postgresql://hpsearch:hpsearch@127.0.0.1:${port}/hpsearch"
