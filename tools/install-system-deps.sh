#!/usr/bin/env bash
# Installs what kctl's run and tests need from Debian, if missing: Podman (with runc,
# since crun fails on hosts with hybrid cgroups, and what rootless Podman needs), sshd
# for multi-host tests, a static busybox to build the demo image from, and etcd (the
# store on etcd; its packaged service is disabled where systemd runs). Also installs
# a containers.conf that works on such hosts when the machine has none. Run as root (CI
# and `make` do).
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v podman >/dev/null || need+=(podman)
command -v runc >/dev/null || need+=(runc)
# rootless Podman (docs/multi-host.md, tests/integration/agent/test_daemon_rootless.py):
# newuidmap/newgidmap for the user namespace, slirp4netns for its pods' network
command -v newuidmap >/dev/null || need+=(uidmap)
command -v slirp4netns >/dev/null || need+=(slirp4netns)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
[ -x /bin/busybox ] && /bin/busybox --list >/dev/null 2>&1 && ldd /bin/busybox 2>&1 | grep -q "not a dynamic" || need+=(busybox-static)
command -v git >/dev/null || need+=(git)
command -v nft >/dev/null || need+=(nftables)  # kube-proxy rules (tests/unit/proxy: nft -c, a private netns)
command -v zsh >/dev/null && command -v fish >/dev/null || need+=(zsh fish)  # shell completion tests (tests/cli/test_completion.py)
# the store on etcd (kctl.testing.etcdcluster, tests/integration/etcd, the test bed's control hosts): Debian's 3.4
[ -x /usr/bin/etcd ] || need+=(etcd-server)
command -v etcdctl >/dev/null || need+=(etcd-client)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "missing system packages: ${need[*]} (run as root, or install them)" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
# etcd-server enables its own service (one member on 2379): kctl's tests and test bed run their own members
if [ -d /run/systemd/system ] && [ "$(id -u)" = 0 ] && [ -x /usr/bin/etcd ]; then
    systemctl disable --now etcd >/dev/null 2>&1 || true
fi
if [ ! -f /etc/containers/containers.conf ] && [ "$(id -u)" = 0 ]; then
    install -D -m 0644 kctl/runtime/containers.conf /etc/containers/containers.conf
fi
