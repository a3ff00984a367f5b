"""Cluster DNS (CoreDNS's kubernetes plugin, cut down): Service and pod names under the cluster domain.

records.py answers one question from the Services and EndpointSlices (Kubernetes' DNS
specification for Services: A, SRV, CNAME, headless and pod hostnames); server.py serves
those answers over UDP and TCP and forwards every other name to the host's resolvers.
`kctl daemon` runs the server; docs/networking.md says where it listens and why.
"""
