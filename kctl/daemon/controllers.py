"""The daemon's controllers: one name -> factory table, and `--controllers` to choose from it.

As kube-controller-manager's controller descriptors: every controller kctl has is one
entry here, named as the controller names itself (`Controller.name`, Kubernetes' names),
in the order their queues are made. `enabled_controllers("*,-podgc")` reads a
`--controllers` list the way kube-controller-manager does: `*` enables every controller,
`name` enables one, `-name` disables one, and the first entry that names a controller
decides for it. `new_controllers(settings)` makes the enabled ones for the
ControllerManager (kctl.daemon.controlplane). Factories import their module when called,
so reading this table (`kctl daemon --help`, flag checks) imports no controller.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

if TYPE_CHECKING:
    from typing import TypeAlias

    from kctl.controllers.base import Controller
    from kctl.daemon.settings import DaemonSettings

    #: makes one controller from the daemon's settings
    ControllerFactory: TypeAlias = Callable[[DaemonSettings], Controller]


class UnknownController(ValueError):
    """A `--controllers` entry that names no controller; the message lists the known ones."""


def _replicaset(settings: DaemonSettings) -> Controller:
    from kctl.controllers.replicaset import ReplicaSetController

    return ReplicaSetController()


def _deployment(settings: DaemonSettings) -> Controller:
    from kctl.controllers.deployment import DeploymentController

    return DeploymentController()


def _job(settings: DaemonSettings) -> Controller:
    from kctl.controllers.job import JobController

    return JobController()


def _ttl_after_finished(settings: DaemonSettings) -> Controller:
    from kctl.controllers.ttlafterfinished import TTLAfterFinishedController

    return TTLAfterFinishedController()


def _cronjob(settings: DaemonSettings) -> Controller:
    from kctl.controllers.cronjob import CronJobController

    return CronJobController()


def _garbage_collector(settings: DaemonSettings) -> Controller:
    from kctl.controllers.garbagecollector import GarbageCollector

    return GarbageCollector()


def _namespace(settings: DaemonSettings) -> Controller:
    from kctl.controllers.namespace import NamespaceController

    return NamespaceController()


def _service_account(settings: DaemonSettings) -> Controller:
    from kctl.controllers.serviceaccount import ServiceAccountController

    return ServiceAccountController()


def _resource_quota(settings: DaemonSettings) -> Controller:
    from kctl.controllers.resourcequota import ResourceQuotaController

    return ResourceQuotaController()


def _event_ttl(settings: DaemonSettings) -> Controller:
    from kctl.controllers.eventttl import EventTTLController, EventTTLSettings

    return EventTTLController(settings=EventTTLSettings(ttl_seconds=settings.event_ttl))


def _daemonset(settings: DaemonSettings) -> Controller:
    from kctl.controllers.daemonset import DaemonSetController

    return DaemonSetController()


def _statefulset(settings: DaemonSettings) -> Controller:
    from kctl.controllers.statefulset.controller import StatefulSetController

    return StatefulSetController()


def _node_lifecycle(settings: DaemonSettings) -> Controller:
    from kctl.controllers.nodelifecycle import NodeLifecycleController, NodeLifecycleSettings

    return NodeLifecycleController(settings=NodeLifecycleSettings(grace_period=settings.node_monitor_grace_period))


def _taint_manager(settings: DaemonSettings) -> Controller:
    from kctl.controllers.taintmanager import TaintManager, TaintManagerSettings

    return TaintManager(settings=TaintManagerSettings(
        default_toleration_seconds=settings.default_toleration_seconds))


def _pod_gc(settings: DaemonSettings) -> Controller:
    from kctl.controllers.podgc import PodGCController

    return PodGCController()


def _endpointslice(settings: DaemonSettings) -> Controller:
    from kctl.controllers.endpointslice import EndpointSliceController, EndpointSliceSettings

    return EndpointSliceController(settings=EndpointSliceSettings(
        max_endpoints_per_slice=settings.max_endpoints_per_slice))


def _endpoints(settings: DaemonSettings) -> Controller:
    from kctl.controllers.endpoints import EndpointsController

    return EndpointsController()


def _node_ipam(settings: DaemonSettings) -> Controller:
    from kctl.controllers.nodeipam import NodeIPAMController

    return NodeIPAMController(cluster_cidr=settings.cluster_cidr, node_cidr_mask_size=settings.node_cidr_mask_size)


def _servicelb(settings: DaemonSettings) -> Controller:
    from kctl.controllers.servicelb import ServiceLBController

    return ServiceLBController()


def _disruption(settings: DaemonSettings) -> Controller:
    from kctl.controllers.disruption import DisruptionController

    return DisruptionController()


def _horizontal_pod_autoscaler(settings: DaemonSettings) -> Controller:
    from kctl.controllers.podautoscaler.controller import HorizontalPodAutoscalerController, HPASettings

    return HorizontalPodAutoscalerController(settings=HPASettings(
        sync_period=settings.horizontal_pod_autoscaler_sync_period,
        downscale_stabilization=settings.horizontal_pod_autoscaler_downscale_stabilization,
        tolerance=settings.horizontal_pod_autoscaler_tolerance,
        cpu_initialization_period=settings.horizontal_pod_autoscaler_cpu_initialization_period,
        initial_readiness_delay=settings.horizontal_pod_autoscaler_initial_readiness_delay))


def _persistentvolume_binder(settings: DaemonSettings) -> Controller:
    from kctl.controllers.persistentvolume.binder import PersistentVolumeBinder

    return PersistentVolumeBinder()


def _persistentvolume_protection(settings: DaemonSettings) -> Controller:
    from kctl.controllers.pvprotection import PVProtectionController

    return PVProtectionController()


def _persistentvolumeclaim_protection(settings: DaemonSettings) -> Controller:
    from kctl.controllers.pvcprotection import PVCProtectionController

    return PVCProtectionController()


def _storageclass_default(settings: DaemonSettings) -> Controller:
    from kctl.controllers.storageclass import DefaultStorageClassController

    return DefaultStorageClassController()


def _rbac_bootstrap(settings: DaemonSettings) -> Controller:
    from kctl.controllers.rbacbootstrap import RBACBootstrapController

    return RBACBootstrapController()


def _clusterrole_aggregation(settings: DaemonSettings) -> Controller:
    from kctl.controllers.clusterroleaggregation import ClusterRoleAggregationController

    return ClusterRoleAggregationController()


def _root_ca_cert_publisher(settings: DaemonSettings) -> Controller:
    from kctl.controllers.rootcacert import RootCACertPublisher

    return RootCACertPublisher(wait_for_ca=settings.listen is not None)


def _kubernetes_service(settings: DaemonSettings) -> Controller:
    from kctl.controllers.kubernetesservice import KubernetesServiceController, KubernetesServiceSettings

    if settings.listen is None:
        return KubernetesServiceController(settings=KubernetesServiceSettings())
    import ipaddress

    from kctl.apiserver.services.ranges import parse_service_cidr

    host, port = settings.listen
    first_ip = str(next(parse_service_cidr(settings.service_cluster_ip_range).hosts()))
    return KubernetesServiceController(settings=KubernetesServiceSettings(
        cluster_ip=first_ip, port=port, advertise_addresses=_advertise_addresses(host, ipaddress)))


def _advertise_addresses(host: str, ipaddress) -> tuple[str, ...]:
    """Where pods reach a daemon listening on host: the address itself, the default route's for a wildcard,
    nothing for loopback (a pod cannot be sent there)."""
    import socket

    from kctl.daemon.clusterdns import route_source

    host = host.strip("[]")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        try:
            ip = ipaddress.ip_address(socket.gethostbyname(host))
        except (OSError, ValueError):
            return ()
    if ip.is_unspecified:
        source = route_source("10.255.255.255")
        return (source,) if source and not ipaddress.ip_address(source).is_loopback else ()
    if ip.is_loopback or ip.version != 4:
        return ()
    return (str(ip),)


def _git_source(settings: DaemonSettings) -> Controller:
    from kctl.sync.controller import GitSourceController

    return GitSourceController()


#: every controller kctl has, by name, in the order their queues are made
CONTROLLERS: Mapping[str, ControllerFactory] = MappingProxyType({
    "replicaset": _replicaset,
    "deployment": _deployment,
    "job": _job,
    "ttlafterfinished": _ttl_after_finished,
    "cronjob": _cronjob,
    "garbagecollector": _garbage_collector,
    "namespace": _namespace,
    "serviceaccount": _service_account,
    "resourcequota": _resource_quota,
    "eventttl": _event_ttl,
    "daemonset": _daemonset,
    "statefulset": _statefulset,
    "nodelifecycle": _node_lifecycle,
    "taintmanager": _taint_manager,
    "podgc": _pod_gc,
    "node-ipam-controller": _node_ipam,
    "endpointslice": _endpointslice,
    "endpoint": _endpoints,
    "servicelb": _servicelb,
    "disruption": _disruption,
    "horizontal-pod-autoscaler": _horizontal_pod_autoscaler,
    "persistentvolume-binder": _persistentvolume_binder,
    "persistentvolume-protection": _persistentvolume_protection,
    "persistentvolumeclaim-protection": _persistentvolumeclaim_protection,
    "storageclass-default": _storageclass_default,
    "rbac-bootstrap": _rbac_bootstrap,
    "clusterrole-aggregation": _clusterrole_aggregation,
    "root-ca-cert-publisher": _root_ca_cert_publisher,
    "kubernetes-service": _kubernetes_service,
    "gitsource": _git_source,
})

#: the names, in the table's order (`--controllers '*'`)
CONTROLLER_NAMES: tuple[str, ...] = tuple(CONTROLLERS)


def enabled_controllers(spec: str | Iterable[str]) -> tuple[str, ...]:
    """The controllers a `--controllers` list enables, in the table's order; UnknownController if an
    entry names none. `spec` is the comma-separated flag value, or its entries."""
    entries = [e.strip() for e in (spec.split(",") if isinstance(spec, str) else spec)]
    entries = [e for e in entries if e]
    unknown = [e for e in entries if e != "*" and e.removeprefix("-") not in CONTROLLERS]
    if unknown:
        names = ", ".join(f'"{e}"' for e in unknown)
        raise UnknownController(f"unknown controller{'s' if len(unknown) > 1 else ''} {names} "
                                f"(known: {', '.join(sorted(CONTROLLERS))}; '*' is all, '-name' disables one)")
    return tuple(name for name in CONTROLLERS if _enabled(name, entries))


def _enabled(name: str, entries: list[str]) -> bool:
    """kube-controller-manager's IsControllerEnabled: the first entry naming it decides, else `*`."""
    for entry in entries:
        if entry == name:
            return True
        if entry == f"-{name}":
            return False
    return "*" in entries


def new_controllers(settings: DaemonSettings) -> list[Controller]:
    """Fresh instances of the controllers settings.controllers names, in the table's order."""
    chosen = set(settings.controllers)
    if chosen - set(CONTROLLERS):
        enabled_controllers(sorted(chosen))  # raises UnknownController naming them
    return [factory(settings) for name, factory in CONTROLLERS.items() if name in chosen]


__all__ = ["CONTROLLERS", "CONTROLLER_NAMES", "UnknownController", "enabled_controllers", "new_controllers"]
