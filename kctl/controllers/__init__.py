"""Controllers: level-triggered reconcilers that make the store's desired state true.

The shared machinery lives here (read bottom-up): `workqueue` (client-go's work queue),
`informer` (list + watch into a cache with indexes and handlers), `expectations`
(creations/deletions in flight), `leader` (Lease-based leader election), `base` (the
Controller protocol, its context and key helpers) and `manager` (runs controllers'
workers while this process leads). Each controller is one module beside them.
`kctl daemon` builds the ControllerManager; see docs/controllers.md.
"""
