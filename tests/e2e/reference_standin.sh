#!/usr/bin/env bash
# A stand-in for shared/tools/reference-server.sh where Tarantool + queue 1.5.0 is
# not at hand (a CI machine: the queue module is not in any package registry).
# Same interface: PORT and REF_WORKDIR in the environment, prints the server's
# PID once it accepts connections; `stop PID` stops it. It serves queuebox under
# the reference's user (queue/queue), so the comparison suite's machinery (parts,
# rounds, table, JSON) runs end to end; what it measures is no comparison.
set -euo pipefail
if [[ "${1:-}" == "stop" ]]; then
    kill -TERM "$2" 2>/dev/null || exit 0
    for _ in $(seq 100); do kill -0 "$2" 2>/dev/null || exit 0; sleep 0.1; done
    kill -KILL "$2" 2>/dev/null || true
    exit 0
fi
dir="${REF_WORKDIR:?REF_WORKDIR is needed}"
mkdir -p "$dir"
printf '[users.queue]\npassword = "queue"\nrights = "all"\n' > "$dir/users.toml"
setsid "${PYTHON:-python3}" -m queuebox serve --listen "127.0.0.1:${PORT:?}" \
    --data-dir "$dir/data" --config "$dir/users.toml" >>"$dir/log" 2>&1 </dev/null &
pid=$!
for _ in $(seq 600); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then echo "$pid"; exit 0; fi
    kill -0 "$pid" 2>/dev/null || { tail -20 "$dir/log" >&2; exit 1; }
    sleep 0.1
done
echo "the stand-in did not start in 60 s" >&2
kill "$pid"
exit 1
