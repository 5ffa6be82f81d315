#!/usr/bin/env bash
# THE test command: on a fresh Debian machine (root, CI=true, no stdin) it
# installs what the tests need, checks lint, format and types (ruff, mypy),
# then runs the suite on both builds: the pure-Python package runs the unit
# and property tests and the end-to-end tests of the wire and the queue calls
# (PURE_SUBSET below: the compiled modules' behaviour over real sockets); the
# hot modules compiled in place with mypyc (setup.py; docs/performance.md)
# run the whole suite. Arguments, when given, are what both builds run
# instead; a failing check or the first failing pytest run's exit code is ours.
#
#   bash tests/run.sh                           # pure: the subset; compiled: everything
#   bash tests/run.sh tests/e2e -x              # a part, both builds
#   QUEUEBOX_BUILDS=pure bash tests/run.sh      # one build (pure or compiled), everything
set -euo pipefail

cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi
}

apt_updated=0
apt_install() {
    if [ "$apt_updated" -eq 0 ]; then
        as_root apt-get update -q </dev/null
        apt_updated=1
    fi
    as_root apt-get install -y -q --no-install-recommends "$@" </dev/null
}

# --- Python (3.11+) and pip ---
if [ -z "${PYTHON:-}" ]; then
    if command -v python3 >/dev/null; then PYTHON=python3
    elif command -v python >/dev/null; then PYTHON=python
    else apt_install python3 python3-pip; PYTHON=python3
    fi
fi

# --- pip ---
if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
    apt_install python3-pip
fi
# A fresh Debian python is "externally managed" (PEP 668); the suite installs
# into it on purpose (CI machine, no venv), so say so instead of failing.
if "$PYTHON" - <<'PY'
import os, sys, sysconfig
marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
sys.exit(0 if os.path.exists(marker) and sys.prefix == sys.base_prefix else 1)
PY
then
    export PIP_BREAK_SYSTEM_PACKAGES=1
fi

# --- A C compiler and Python's headers: the compiled run builds with mypyc ---
if ! command -v cc >/dev/null; then
    apt_install gcc libc6-dev
fi
if ! "$PYTHON" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
    apt_install python3-dev
fi

# --- The compiled build, started first ------------------------------------------
# The compiled modules land beside their .py files (queuebox/<pkg> are links to
# the folders), where they would hide every later edit of the .py: they are
# removed on any exit. tests/unit/test_compiled_build.py fails a run whose
# build is not the one QUEUEBOX_EXPECT_BUILD names, so a compile that silently
# fell back to pure Python cannot pass as the compiled run.
# One mypyc compile: the wheel a user would build from this checkout (from a
# copy of the files git tracks, so nothing of the work tree changes under
# it); the compiled run imports its modules (unpacked in place) and
# tests/e2e/test_packaging.py inspects and installs that same wheel. The
# compile is a few minutes of one C compiler on one core, and the compiled run
# waits for it, so it starts as soon as pip and the compiler are there and
# runs in the background while the installs, the checks and the pure run (which
# wait on servers more than they compute) go on.
builds=${QUEUEBOX_BUILDS:-pure compiled}
wheel_work=""  # where the compiled run's wheel is built
wheel_pid=""   # the background compile, while it runs
remove_compiled() {
    if [ -n "$wheel_pid" ]; then  # the compile's whole process group: pip, gcc
        kill -- "-$wheel_pid" 2>/dev/null || true
        wait "$wheel_pid" 2>/dev/null || true
    fi
    find protocol storage drivers server clients queuebox -name '*.so' -delete
    rm -rf build ${wheel_work:+"$wheel_work"}
}
trap remove_compiled EXIT
remove_compiled
wheel_work=$(mktemp -d)
if [[ " $builds " == *" compiled "* ]]; then
    setsid "$PYTHON" -m tests.wheelbuild compiled "$wheel_work" \
        >"$wheel_work/wheel" 2>"$wheel_work/log" </dev/null &
    wheel_pid=$!
fi
wait_compiled() {  # waits for the background compile; sets wheel to its path
    local pid=$wheel_pid
    wheel_pid=""
    if ! wait "$pid"; then
        echo "the compiled build failed:" >&2
        cat "$wheel_work/log" >&2
        return 1
    fi
    wheel=$(cat "$wheel_work/wheel")
}

# --- Python packages: the project itself (editable) and its test extra ---
# pip is idempotent here: already satisfied requirements are not reinstalled.
# An editable install is always pure Python (setup.py): the compiled run
# imports the wheel's modules, unpacked in place.
"$PYTHON" -m pip install -q --disable-pip-version-check -e '.[test]' </dev/null

# --- Tarantool: its net.box is one of the client connectors under test ---
if ! command -v tarantool >/dev/null; then
    apt_install tarantool
fi

# --- etcd: failover leadership (server/replication/leader.py) is tested against a real one ---
if ! command -v etcd >/dev/null; then
    apt_install etcd-server
fi

# --- MR::Tarantool::Box: a real Tarantool 1.5 client, for the legacy_listen port ---
if ! perl -MMR::Tarantool::Box -e 1 2>/dev/null; then
    apt_install libmr-tarantool-perl
fi

# --- Chromium: the web console's tests drive Debian's build through Playwright ---
# (tests/e2e/test_console_browser.py; Playwright's own browser download is never used)
if [ ! -x /usr/bin/chromium ]; then
    apt_install chromium
fi

# --- promtool and systemd-analyze: docs/ops's alert rules and systemd unit are ---
# checked by the tools that read them (tests/e2e/test_ops_files.py)
if ! command -v promtool >/dev/null; then
    apt_install prometheus
fi
if ! command -v systemd-analyze >/dev/null; then
    apt_install systemd
fi

# --- Spark part (clients/pipeline, tests/spark) -------------------------------
# The pipeline tests need the `.[spark]` extra (PySpark 4) and a Java 17+ runtime;
# Spark binds to the loopback interface only.
"$PYTHON" -m pip install -q --disable-pip-version-check -e '.[spark]' </dev/null
java_major() {  # 17 for "17.0.15", 8 for "1.8.0_292", 0 when there is no java
    local v
    v=$(java -version 2>&1 | sed -n 's/.* version "\([0-9._]*\).*/\1/p' | head -n 1)
    v=${v#1.}
    v=${v%%[._]*}
    echo "${v:-0}"
}
if ! command -v java >/dev/null || [ "$(java_major)" -lt 17 ]; then
    apt_install openjdk-17-jre-headless
    if [ "$(java_major)" -lt 17 ]; then  # an older java still comes first on PATH
        JAVA_HOME=$(ls -d /usr/lib/jvm/java-17-openjdk-* | head -n 1)
        export JAVA_HOME PATH="$JAVA_HOME/bin:$PATH"
    fi
fi
export SPARK_LOCAL_IP=127.0.0.1
# ---------------------------------------------------------------------------

# --- Bytecode, cached for the run -------------------------------------------------
# Every pytest worker imports and rewrites the asserts of every test module,
# and the suite starts hundreds of servers and CLI runs: without cached
# bytecode (PYTHONDONTWRITEBYTECODE, as some CI images set) each of them
# compiles its sources again, some 5 s of CPU per worker. The cache goes
# beside the wheel's work (removed on exit), never into the checkout.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="$wheel_work/pycache"

# --- Lint, format and types: a failure fails the command, before any test runs ---
"$PYTHON" -m ruff check .
"$PYTHON" -m ruff format --check .
"$PYTHON" -m mypy

# --- The suite on each build -------------------------------------------------
# The pure build's share when no arguments are given: what the compiled
# modules do (protocol, storage, the queue core, the call path), seen from the
# unit tests and over real sockets. Everything else (replication, clients,
# Spark, crashes, the console) runs once, on the compiled build.
PURE_SUBSET=(
    tests/unit tests/property
    tests/e2e/test_wire.py tests/e2e/test_task_data_bytes.py
    tests/e2e/test_queue_e2e_calls.py tests/e2e/test_queue_e2e_timers.py
    tests/e2e/test_queue_e2e_restart.py tests/e2e/test_legacy_api.py
)
# Workers: most tests wait on servers, subprocesses and sleeps, so more workers
# than cores pay (QUEUEBOX_TEST_WORKERS; 1 runs in this process, no xdist). A
# worker takes a whole module, `xdist_group` or (long modules whose tests
# share nothing) test, the longest first (tests/conftest.py says how and why).
# 5: the Spark group, one unit of about a fifth of the compiled run's work, then
# ends with the rest; with 6 its JVMs, starved of CPU, ended last.
workers=${QUEUEBOX_TEST_WORKERS:-5}
parallel=()
if [ "$workers" != 1 ]; then parallel=(-n "$workers" --dist loadgroup --no-loadscope-reorder); fi
for build in $builds; do
    what=("$@")
    extra=()
    if [ "$build" = compiled ]; then
        wait_compiled
        "$PYTHON" -m tests.wheelbuild unpack "$wheel"
        extra=(QUEUEBOX_TEST_WHEEL="$wheel")
    elif [ $# -eq 0 ] && [ -z "${QUEUEBOX_BUILDS:-}" ]; then
        what=("${PURE_SUBSET[@]}")
    fi
    echo "=== the suite on the $build build: ${what[*]:-everything} ==="
    env "${extra[@]}" QUEUEBOX_EXPECT_BUILD="$build" \
        "$PYTHON" -m pytest --durations=15 "${parallel[@]}" "${what[@]}"
done
