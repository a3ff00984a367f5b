"""The StatefulSet controller, in parts: pod identity (pods.py), claims (claims.py),
ControllerRevisions (revisions.py), the per-sync plan (update.py) and the reconciler that
carries it out (controller.py). Registered as "statefulset" in kctl/daemon/controllers.py;
revisions.py is also read by `kctl rollout history|undo statefulset` (kctl/ops/rollback.py).
Importing the package imports none of its modules.
"""
