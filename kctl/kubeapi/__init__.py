"""The Kubernetes REST API over HTTPS: kubectl, client libraries and tools reach kctl's API here.

`kctl daemon --listen ADDR:PORT` serves it (aiohttp): TLS with the cluster's PKI, authentication
(client certificates, ServiceAccount tokens), RBAC, discovery and OpenAPI, the resource verbs of
kctl.apiserver's API, watches, and the pod streams (logs, exec, attach, port-forward).
"""
