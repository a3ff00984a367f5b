"""The scheduler's configuration file (KubeSchedulerConfiguration-shaped) and its profiles.

`kctl daemon` reads it (optional; the built-in default profile "default-scheduler" runs
without one) and kctl.scheduler.scheduler builds one Framework per profile from it:

    apiVersion: kubescheduler.config.k8s.io/v1
    kind: KubeSchedulerConfiguration
    percentageOfNodesToScore: 0          # 0: adaptive (50 - nodes/125, at least 5%)
    podInitialBackoffSeconds: 1
    podMaxBackoffSeconds: 10
    profiles:
    - schedulerName: default-scheduler
      percentageOfNodesToScore: 30       # per profile, overrides the global one
      plugins:
        multiPoint: {enabled: [{name: my.pkg.plugins:GPUFirst, weight: 5}]}
        score:
          disabled: [{name: ImageLocality}]
          enabled: [{name: NodeAffinity, weight: 5}]
      pluginConfig:
      - name: NodeResourcesFit
        args: {scoringStrategy: {type: MostAllocated}}

As in kube-scheduler, `plugins.<point>.enabled` adds to the defaults (its order after
them), `disabled` removes defaults by name (`*`: all of that point), and `multiPoint`
enables a plugin at every extension point it implements. A name with ":" is an import
path "package.module:Class" of a plugin outside kctl.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path

from kctl.scheduler.framework import EXTENSION_POINTS, Framework, Handle, PluginFactory, PluginRef, implements
from kctl.scheduler.queue import QueueSettings

DEFAULT_SCHEDULER_NAME = "default-scheduler"

#: kube-scheduler's default plugins (v1 multiPoint) and score weights
DEFAULT_MULTIPOINT: tuple[PluginRef, ...] = (
    PluginRef("NodeName"), PluginRef("NodeUnschedulable"), PluginRef("TaintToleration", 3),
    PluginRef("NodeAffinity", 2), PluginRef("NodePorts"), PluginRef("NodeResourcesFit", 1),
    PluginRef("VolumeRestrictions"), PluginRef("VolumeBinding"), PluginRef("PodTopologySpread", 2),
    PluginRef("InterPodAffinity", 2),
    PluginRef("NodeResourcesBalancedAllocation", 1), PluginRef("ImageLocality", 1), PluginRef("DefaultPreemption"),
    PluginRef("DefaultBinder"),
)


class ConfigError(ValueError):
    """The scheduler config file is wrong; the message says where."""


@dataclass(frozen=True)
class PluginSet:
    """One extension point's enabled and disabled plugins, as written."""

    enabled: tuple[PluginRef, ...] = ()
    disabled: tuple[str, ...] = ()


@dataclass(frozen=True)
class Profile:
    """One scheduler profile: its schedulerName, plugin sets and plugin args."""

    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    plugins: dict[str, PluginSet] = field(default_factory=dict)
    plugin_config: dict[str, dict] = field(default_factory=dict)
    percentage_of_nodes_to_score: int | None = None


@dataclass(frozen=True)
class SchedulerConfig:
    """The whole file: profiles, percentageOfNodesToScore and the queue's back-off."""

    profiles: tuple[Profile, ...] = (Profile(),)
    percentage_of_nodes_to_score: int | None = None
    queue: QueueSettings = QueueSettings()


def _refs(items: object, where: str) -> tuple[PluginRef, ...]:
    if items is None:
        return ()
    if not isinstance(items, list):
        raise ConfigError(f"{where}: must be a list of {{name, weight}}")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ConfigError(f"{where}[{i}].name: required")
        weight = item.get("weight")
        if weight is not None and (not isinstance(weight, int) or weight < 0):
            raise ConfigError(f"{where}[{i}].weight: must be a non-negative integer")
        out.append(PluginRef(item["name"], weight or 1))
    return tuple(out)


def _percentage(value: object, where: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or not 0 <= value <= 100:
        raise ConfigError(f"{where}: must be an integer from 0 to 100")
    return value or None


def parse_config(doc: dict | None) -> SchedulerConfig:
    """A KubeSchedulerConfiguration document (already parsed YAML) as a SchedulerConfig."""
    doc = doc or {}
    if not isinstance(doc, dict):
        raise ConfigError("the scheduler config must be a mapping")
    kind = doc.get("kind")
    if kind not in (None, "KubeSchedulerConfiguration"):
        raise ConfigError(f"kind: expected KubeSchedulerConfiguration, got {kind!r}")
    profiles = []
    seen: set[str] = set()
    listed = doc.get("profiles") or [{}]
    if not isinstance(listed, list):
        raise ConfigError("profiles: must be a list")
    for i, p in enumerate(listed):
        where = f"profiles[{i}]"
        if not isinstance(p, dict):
            raise ConfigError(f"{where}: must be a mapping")
        name = p.get("schedulerName") or DEFAULT_SCHEDULER_NAME
        if name in seen:
            raise ConfigError(f"{where}.schedulerName: duplicate {name!r}")
        seen.add(name)
        sets = {}
        plugins = p.get("plugins") or {}
        if not isinstance(plugins, dict):
            raise ConfigError(f"{where}.plugins: must be a mapping")
        for point, body in plugins.items():
            if point not in EXTENSION_POINTS and point not in ("multiPoint", "queueSort"):
                raise ConfigError(f"{where}.plugins.{point}: unknown extension point")
            body = body or {}
            sets[point] = PluginSet(_refs(body.get("enabled"), f"{where}.plugins.{point}.enabled"),
                                    tuple(r.name for r in _refs(body.get("disabled"),
                                                                f"{where}.plugins.{point}.disabled")))
        args = {}
        for j, pc in enumerate(p.get("pluginConfig") or ()):
            if not isinstance(pc, dict) or not isinstance(pc.get("name"), str):
                raise ConfigError(f"{where}.pluginConfig[{j}].name: required")
            args[pc["name"]] = pc.get("args") or {}
        profiles.append(Profile(name, sets, args, _percentage(p.get("percentageOfNodesToScore"),
                                                              f"{where}.percentageOfNodesToScore")))
    defaults = QueueSettings()
    queue = QueueSettings(initial_backoff=float(doc.get("podInitialBackoffSeconds", defaults.initial_backoff)),
                          max_backoff=float(doc.get("podMaxBackoffSeconds", defaults.max_backoff)))
    if queue.initial_backoff <= 0 or queue.max_backoff < queue.initial_backoff:
        raise ConfigError("podInitialBackoffSeconds must be > 0 and podMaxBackoffSeconds >= it")
    return SchedulerConfig(tuple(profiles), _percentage(doc.get("percentageOfNodesToScore"),
                                                        "percentageOfNodesToScore"), queue)


def load_config(path: str | Path) -> SchedulerConfig:
    """Read and parse a config file; ConfigError (naming the file) when it is wrong."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        doc = YAML(typ="safe", pure=True).load(Path(path).read_text())
    except (OSError, YAMLError) as exc:
        raise ConfigError(f"{path}: {' '.join(str(exc).split())}") from None
    try:
        return parse_config(doc)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def load_plugin(path: str) -> PluginFactory:
    """A plugin class named "package.module:Class"."""
    module_name, _, attr = path.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"plugin {path!r}: cannot import: {exc}") from None
    if not isinstance(getattr(factory, "NAME", None), str):
        raise ConfigError(f"plugin {path!r}: has no NAME")
    return factory


def enabled_plugins(profile: Profile, registry: dict[str, PluginFactory]
                    ) -> tuple[dict[str, list[PluginRef]], dict[str, PluginFactory]]:
    """(extension point -> the plugins enabled there, name -> factory of each plugin named).

    Defaults merged with the profile's sets; import paths are loaded here.
    """
    factories = dict(registry)

    def factory(name: str) -> PluginFactory:
        if name not in factories:
            if ":" not in name:
                raise ConfigError(f"profile {profile.scheduler_name!r}: unknown plugin {name!r}")
            factories[name] = load_plugin(name)
        return factories[name]

    multi = profile.plugins.get("multiPoint", PluginSet())
    base = [r for r in DEFAULT_MULTIPOINT if r.name not in multi.disabled and "*" not in multi.disabled]
    base += [r for r in multi.enabled]
    out: dict[str, list[PluginRef]] = {}
    for point in EXTENSION_POINTS:
        ps = profile.plugins.get(point, PluginSet())
        refs = [r for r in base if implements(factory(r.name), point)
                and r.name not in ps.disabled and "*" not in ps.disabled]
        explicit = {r.name: r for r in ps.enabled}
        refs = [explicit.pop(r.name, r) for r in refs]
        for r in explicit.values():
            if not implements(factory(r.name), point):
                raise ConfigError(f"profile {profile.scheduler_name!r}: plugin {r.name} does not implement "
                                  f"extension point {point}")
            refs.append(r)
        out[point] = refs
    return out, factories


def build_framework(profile: Profile, *, handle: Handle, registry: dict[str, PluginFactory] | None = None,
                    percentage_of_nodes_to_score: int | None = None) -> Framework:
    """Instantiate a profile's plugins (each once, with its pluginConfig args) into a Framework."""
    from kctl.scheduler.plugins.registry import registry as in_tree

    enabled, factories = enabled_plugins(profile, registry if registry is not None else in_tree())
    plugins = {}
    for point in EXTENSION_POINTS:
        for ref in enabled[point]:
            if ref.name in plugins:
                continue
            factory = factories[ref.name]
            # pluginConfig is keyed by the plugin's NAME (or, for an outside plugin, its import path)
            args = profile.plugin_config.get(factory.NAME, profile.plugin_config.get(ref.name, {}))
            try:
                plugins[ref.name] = factory(args, handle)
            except ConfigError:
                raise
            except (TypeError, ValueError, KeyError) as exc:
                raise ConfigError(f"profile {profile.scheduler_name!r}: plugin {ref.name}: {exc}") from None
    return Framework(profile.scheduler_name, plugins, enabled, handle=handle,
                     percentage_of_nodes_to_score=profile.percentage_of_nodes_to_score or percentage_of_nodes_to_score)


__all__ = ["ConfigError", "DEFAULT_MULTIPOINT", "DEFAULT_SCHEDULER_NAME", "PluginSet", "Profile",
           "SchedulerConfig", "build_framework", "enabled_plugins", "load_config", "load_plugin", "parse_config"]
