"""The client layer (client-go's place): what every reader and writer of the API shares.

Read bottom-up: `workqueue` (de-duplicated, per-key serialised queue with back-off),
`informer` (list + watch into an indexed cache, shared per resource), `expectations`
(creations/deletions in flight), `leader` (Lease-based leader election), `retry`
(`retry_on_conflict` for read-modify-write), `claim` (ControllerRefManager: adopt orphans,
release what stopped matching), `tolerations` (v1 Toleration.ToleratesTaint), `errors`
(temporary vs permanent errors), `statuswriter` (status written only when it changed),
`scale` (a workload's scale subresource: the HPA controller's scale client).

Used by the controllers (kctl/controllers/), the scheduler (kctl/scheduler/), the node
agents (kctl/agent/) and the daemon's composition (kctl/daemon/); it sits on the API
layer (kctl/api/) and imports nothing above it.
"""
