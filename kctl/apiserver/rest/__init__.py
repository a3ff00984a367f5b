"""kctl as a client of a Kubernetes REST API over HTTPS (`kctl --kubeconfig K ...`, `--server https://...`).

- kubeconfig: kubectl's kubeconfig files, merged and resolved to a Connection;
- transport: HTTPS with the standard library (keep-alive pool, TLS client certificates, tokens);
- status: Status answers and Warning headers -> kctl.machinery.errors classes and warnings;
- identity: the user name a connection's credentials stand for;
- client: RESTAPIClient, the API contract (kctl.apiserver.contract.API) over that REST API.

kctl.cli.connect imports kctl.apiserver.rest.client only when a command line asks for HTTPS, so
the local-store path pays nothing for it. This package imports nothing itself.
"""
