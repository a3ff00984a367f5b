"""Controllers: level-triggered reconcilers that make the store's desired state true.

`base` (the Controller protocol, its context and key helpers) and `manager` (runs
controllers' workers while this process leads) sit beside one module per controller.
What they share with the scheduler and the node agents (work queue, informers,
expectations, leader election, retry_on_conflict) is the client layer, kctl/client/.
`kctl daemon` makes the controllers from one name -> factory table
(kctl/daemon/controllers.py) and runs them in a ControllerManager; see docs/controllers.md.
"""
