#!/usr/bin/env bash
# Builds localhost/busybox:demo (tools/demo-image/Containerfile) from the host's static
# busybox, into the Podman that the arguments name, and does nothing when it is there.
#   tools/build-demo-image.sh [PODMAN GLOBAL ARGS...]
#   e.g. tools/build-demo-image.sh --url unix:///run/kctl/podman.sock
#        tools/build-demo-image.sh --root DIR/storage --runroot DIR/run
# Called by `make`, the integration-test fixtures (tests/integration/conftest.py) and by
# hand. IMAGE=name:tag overrides the tag; BUSYBOX=path the busybox binary. The Podman
# it talks to needs a containers.conf that works on the host (kctl/runtime/containers.conf).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
image="${IMAGE:-localhost/busybox:demo}"
busybox="${BUSYBOX:-/bin/busybox}"
if podman "$@" image exists "$image" 2>/dev/null; then
    exit 0
fi
if [[ "$(ldd "$busybox" 2>&1 || true)" != *"not a dynamic"* ]]; then
    echo "build-demo-image: $busybox is not a static busybox (apt-get install busybox-static)" >&2
    exit 1
fi
context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
mkdir -p "$context/bin"
cp "$busybox" "$context/bin/busybox"
cp "$here/demo-image/Containerfile" "$context/Containerfile"
podman "$@" build --quiet -t "$image" -f "$context/Containerfile" "$context" >/dev/null
echo "built $image"
