"""The clusterrole-aggregation controller: ClusterRoles with an aggregationRule get the rules of those it selects.

As Kubernetes' clusterrole-aggregation controller (pkg/controller/clusterroleaggregation): a ClusterRole
with `aggregationRule.clusterRoleSelectors` (admin, edit and view of the default policy,
kctl.apiserver.bootstrappolicy) has as its `rules` the union of the rules of every other ClusterRole that
one of the selectors matches (selector by selector, roles in name order), a rule repeated only once. Any
ClusterRole's change re-queues every aggregating ClusterRole (a label added to a role brings its rules in;
a label removed takes them out); a reconcile writes only when the union differs from the rules stored.
The ControllerManager (kctl.daemon.controlplane) runs it; registered in kctl/daemon/controllers.py as
"clusterrole-aggregation".
"""

from __future__ import annotations

import copy
import logging
from typing import TYPE_CHECKING

from kctl.machinery.errors import Conflict, NotFound

if TYPE_CHECKING:
    from kctl.client.informer import Informer
    from kctl.client.workqueue import WorkQueue
    from kctl.controllers.base import ControllerContext

log = logging.getLogger("kctl.controllers.clusterroleaggregation")

CLUSTER_ROLES = "clusterroles.rbac.authorization.k8s.io"


def _name(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("name") or ""


def selectors_of(role: dict) -> list[dict]:
    """The aggregationRule's clusterRoleSelectors (empty: the role does not aggregate)."""
    rule = role.get("aggregationRule")
    selectors = rule.get("clusterRoleSelectors") if isinstance(rule, dict) else None
    return [s for s in selectors if isinstance(s, dict)] if isinstance(selectors, list) else []


def aggregated_rules(role: dict, roles: list[dict]) -> list[dict]:
    """The rules `role` aggregates from `roles`: selector by selector, the selected roles' in name order, each rule
    once (Kubernetes' order)."""
    from kctl.machinery.errors import Invalid
    from kctl.machinery.selectors import from_label_selector_object

    own = _name(role)
    by_name = sorted((r for r in roles if _name(r) != own), key=_name)
    rules: list[dict] = []
    for obj in selectors_of(role):
        try:
            selector = from_label_selector_object(obj, path="aggregationRule.clusterRoleSelectors")
        except Invalid as exc:  # validation should have refused it; such a selector selects nothing
            log.warning("ClusterRole %s: %s", own, exc)
            continue
        for other in by_name:
            if not selector.matches((other.get("metadata") or {}).get("labels") or {}):
                continue
            for rule in other.get("rules") or []:
                if isinstance(rule, dict) and rule not in rules:
                    rules.append(copy.deepcopy(rule))
    return rules


class ClusterRoleAggregationController:
    """Keeps the rules of aggregating ClusterRoles equal to the union of the roles they select."""

    name = "clusterrole-aggregation"

    def register(self, ctx: ControllerContext, queue: WorkQueue[str]) -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.roles: Informer = ctx.informers.informer(CLUSTER_ROLES)
        self.roles.add_handler(on_add=self._changed, on_update=lambda old, new: self._changed(new),
                               on_delete=self._changed)

    def _changed(self, obj: dict) -> None:
        """Any ClusterRole's change may change what every aggregating role selects: queue them all."""
        for role in self.roles.list():
            if selectors_of(role):
                self.queue.add(_name(role))

    def object_for(self, key: str) -> dict | None:
        return self.roles.get("", key)

    def reconcile(self, key: str) -> float | None:
        """Write the aggregated rules of one ClusterRole if they differ from those stored."""
        role = self.roles.get("", key)
        if role is None or not selectors_of(role):
            return None
        rules = aggregated_rules(role, self.roles.list())
        if (role.get("rules") or []) == rules:
            return None
        updated = copy.deepcopy(role)
        updated["rules"] = rules
        try:
            self.api.update(updated)
            log.info("ClusterRole %s: %d aggregated rules", key, len(rules))
        except NotFound:
            return None
        except Conflict:  # a newer version is on its way through the informer, which re-queues the key
            return None
        return None


__all__ = ["ClusterRoleAggregationController", "aggregated_rules", "selectors_of"]
