"""kctl: Kubernetes' architecture cut down to a small fleet of Podman hosts.

The package mirrors the request path: api/ (store, objects, watch) -> admission/ ->
controllers/ -> scheduler/ -> agent/ -> runtime/; cli/ is the thin edge on top.
"""

__version__ = "0.1.0"
