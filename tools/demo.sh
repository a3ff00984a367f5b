#!/usr/bin/env bash
# `make run` / `make stop`: the demo on the embedded store (.state/kctl.db in the checkout).
#   tools/demo.sh up    start `kctl daemon` in the background (pid and log under .state/),
#                       build the demo image into this host's Podman, apply examples/,
#                       wait until the web pod is Ready, show it and fetch its page
#   tools/demo.sh down  delete the demo's objects (their containers go), stop the daemon
# KCTL_STORE (exported by the Makefile) names the store; the daemon registers this host.
set -euo pipefail
cd "$(dirname "$0")/.."
kctl=.venv/bin/kctl
state=.state
pidfile=$state/daemon.pid
log=$state/daemon.log
port=18080

running() { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

wait_until() {  # wait_until SECONDS WHAT COMMAND...
    local seconds=$1 what=$2
    shift 2
    for _ in $(seq $((seconds * 5))); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        running || { echo "kctl daemon exited; its log ($log):" >&2; tail -20 "$log" >&2; exit 1; }
        sleep 0.2
    done
    echo "timed out waiting for $what; the daemon's log ($log):" >&2
    tail -20 "$log" >&2
    exit 1
}

node_ready() {
    [ "$($kctl get nodes -o jsonpath='{.items[0].status.conditions[?(@.type=="Ready")].status}')" = True ]
}

pod_ready() {
    [ "$($kctl get pod hello -n demo -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

up() {
    mkdir -p "$state"
    chmod 700 "$state"
    if running; then
        echo "kctl daemon already running (pid $(cat "$pidfile"))"
    else
        setsid "$kctl" daemon >>"$log" 2>&1 < /dev/null &
        echo $! > "$pidfile"
        echo "kctl daemon started (pid $!, log $log)"
    fi
    wait_until 60 "this host's Node to be Ready" node_ready
    node=$($kctl get nodes -o jsonpath='{.items[0].metadata.name}')
    url=$($kctl get node "$node" -o jsonpath='{.metadata.annotations.kctl\.io/podman-url}')
    tools/build-demo-image.sh --url "$url"
    $kctl apply -f examples/web/
    sed "s|@HOOKS_DIR@|$PWD/examples/hooks|" examples/hooks/hooks.yaml | $kctl apply -f -
    sed "s|@NODE@|$node|" examples/pod/web-pod.yaml | $kctl apply -f -
    wait_until 120 "pod demo/hello to be Ready" pod_ready
    echo
    $kctl get nodes -o wide
    echo
    $kctl get pods -n demo -o wide
    echo
    echo "GET http://127.0.0.1:$port/ (pod demo/hello, through its host port):"
    python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$port/', timeout=5).read().decode(), end='')"
    echo
    echo "The daemon keeps running in the background. Stop it and remove the demo: make stop"
}

down() {
    if running; then
        # The namespace controller deletes what is in it (the agent stops the pods within
        # their grace period), then the namespace goes.
        $kctl delete namespace demo --ignore-not-found --wait --timeout 90 || true
        $kctl delete mutatingadmissionhooks,validatingadmissionhooks --all --ignore-not-found >/dev/null || true
        kill -TERM "$(cat "$pidfile")"
        for _ in $(seq 100); do running || break; sleep 0.2; done
        echo "kctl daemon stopped"
    else
        echo "kctl daemon is not running"
    fi
    rm -f "$pidfile"
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
