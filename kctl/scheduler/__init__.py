"""kube-scheduler's design for kctl: queue, cache, framework, plugins, and the scheduling loop.

`kctl daemon` runs kctl.scheduler.scheduler.Scheduler; docs/scheduler.md describes it.
"""
