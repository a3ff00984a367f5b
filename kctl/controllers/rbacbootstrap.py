"""The default RBAC policy, written when the control plane starts (kube-apiserver's rbac/bootstrap-roles).

Registered in kctl/daemon/controllers.py as "rbac-bootstrap"; like "storageclass-default" it acts once per
control-plane term, when the controller manager starts leading: `kctl.apiserver.bootstrappolicy.ensure`
creates the default ClusterRoles and ClusterRoleBindings that are missing and completes those still
annotated `rbac.authorization.kubernetes.io/autoupdate: "true"`. A role a user deleted comes back at the
next start, as in Kubernetes; one whose annotation a user set to "false" is left as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

KEY = "default-policy"


class RBACBootstrapController:
    """Writes the default RBAC policy once per term."""

    name = "rbac-bootstrap"

    def register(self, ctx: ControllerContext, queue: WorkQueue[str]) -> None:
        self.api = ctx.api
        queue.add(KEY)

    def object_for(self, key: str) -> dict | None:
        return None

    def reconcile(self, key: str) -> float | None:
        """Create or complete the default roles and bindings."""
        from kctl.apiserver.bootstrappolicy import ensure

        if key == KEY:
            ensure(self.api)
        return None


__all__ = ["RBACBootstrapController"]
