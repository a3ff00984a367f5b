#!/usr/bin/env bash
# `make run` / `make stop`: the demo on the embedded store (.state/kctl.db in the checkout).
#   tools/demo.sh up    start `kctl daemon` in the background (pid and log under .state/),
#                       build the demo image into this host's Podman, apply examples/,
#                       wait until the web pod is Ready, show it and fetch its page; then
#                       reach the web Deployment through its Service: the ClusterIP by DNS
#                       name from inside a pod (kctl exec), the NodePort from this host
#                       The daemon also serves the Kubernetes API on https://127.0.0.1:6443
#                       (docs/api.md); .state/kubeconfig is kubectl's way in:
#                       kubectl --kubeconfig .state/kubeconfig get pods -A
#   tools/demo.sh down  delete the demo's objects (their containers go), stop the daemon,
#                       remove what the pod network and kube-proxy made on this host
# KCTL_STORE (exported by the Makefile) names the store; the daemon registers this host.
set -euo pipefail
cd "$(dirname "$0")/.."
kctl=.venv/bin/kctl
state=.state
pidfile=$state/daemon.pid
log=$state/daemon.log
port=18080
nodeport=30080   # Service demo/web's spec.ports[0].nodePort (examples/web/20-web.yaml)
listen=127.0.0.1:6443   # the Kubernetes REST API over HTTPS (kubectl, client libraries)
kubeconfig=$state/kubeconfig

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

web_ready() {
    local want ready
    want=$($kctl get deployment web -n demo -o jsonpath='{.spec.replicas}')
    ready=$($kctl get deployment web -n demo -o jsonpath='{.status.readyReplicas}')
    [ -n "$want" ] && [ "$want" = "$ready" ]
}

fetch() {  # fetch URL: print the page (5 s timeout)
    python3 -c "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode(), end='')" "$1"
}

from_pod() {  # from_pod URL: print the page as pod demo/hello gets it (busybox wget inside the pod)
    $kctl exec hello -n demo -- timeout 5 wget -qO- "$1"
}

up() {
    mkdir -p "$state"
    chmod 700 "$state"
    if running; then
        echo "kctl daemon already running (pid $(cat "$pidfile"))"
    else
        setsid "$kctl" daemon --listen "$listen" >>"$log" 2>&1 < /dev/null &
        echo $! > "$pidfile"
        echo "kctl daemon started (pid $!, log $log)"
    fi
    wait_until 60 "this host's Node to be Ready" node_ready
    (umask 077 && $kctl config kubeconfig --server "https://$listen" > "$kubeconfig")
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
    fetch "http://127.0.0.1:$port/"
    wait_until 120 "deployment demo/web to be Ready" web_ready
    echo
    $kctl get services -n demo
    local name=http://web.demo.svc.cluster.local/
    echo
    echo "GET $name from pod demo/hello (cluster DNS -> Service web's ClusterIP -> a web pod):"
    wait_until 30 "Service web to answer pod demo/hello" from_pod "$name"
    from_pod "$name"
    local address
    address=$($kctl get node "$node" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
    echo
    echo "GET http://$address:$nodeport/ from this host (Service web's NodePort, on every host's address):"
    wait_until 30 "Service web's NodePort to answer" fetch "http://$address:$nodeport/"
    fetch "http://$address:$nodeport/"
    if command -v kubectl >/dev/null; then
        echo
        echo "kubectl --kubeconfig $kubeconfig get pods -A (the Kubernetes API on https://$listen):"
        kubectl --kubeconfig "$kubeconfig" get pods -A
    fi
    echo
    echo "The daemon keeps running in the background. Stop it and remove the demo: make stop"
}

remove_host_network() {  # what the pod network and kube-proxy made on this host (docs/networking.md)
    if podman network exists kctl 2>/dev/null && ! podman network rm kctl >/dev/null 2>&1; then
        echo "kept kctl's pod network and nft tables: containers still use them (docs/networking.md)"
        return
    fi
    nft delete table ip kctl 2>/dev/null || true
    nft delete table ip kctl-net 2>/dev/null || true
    ip route flush proto 76 2>/dev/null || true
    echo "removed kctl's pod network, nft tables and routes from this host"
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
        remove_host_network
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
