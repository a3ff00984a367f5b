"""Service addresses, allocated by the API layer as kube-apiserver's Service REST storage does.

kctl.apiserver.server calls `strategy.before_create` / `before_update` / `after_delete`
inside the transaction that writes a Service; `clusterip` (ServiceCIDR + IPAddress
objects) and `nodeport` (one stored bitmap) allocate in that same transaction, so two
writers never share an address or a port and a failed write leaks nothing. `ranges`
holds the defaults and the flags' parsers; `config.configure` writes a daemon's
--service-cluster-ip-range and --service-node-port-range to the store. See
docs/networking.md, "Addresses".
"""
