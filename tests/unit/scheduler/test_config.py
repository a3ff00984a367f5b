"""The scheduler config file: profiles, plugin sets per extension point, weights, args."""

from __future__ import annotations

import re
import textwrap

import pytest

from kctl.scheduler.config import (ConfigError, Profile, build_framework, enabled_plugins, load_config,
                                   parse_config)
from kctl.scheduler.framework import Handle
from kctl.scheduler.plugins.registry import registry

EXAMPLE = textwrap.dedent("""\
    apiVersion: kubescheduler.config.k8s.io/v1
    kind: KubeSchedulerConfiguration
    percentageOfNodesToScore: 20
    podInitialBackoffSeconds: 2
    podMaxBackoffSeconds: 20
    profiles:
    - schedulerName: default-scheduler
      plugins:
        score:
          disabled: [{name: ImageLocality}]
          enabled: [{name: NodeAffinity, weight: 5}]
      pluginConfig:
      - name: NodeResourcesFit
        args: {scoringStrategy: {type: MostAllocated}}
    - schedulerName: bin-packer
      percentageOfNodesToScore: 100
      plugins:
        multiPoint:
          disabled: [{name: PodTopologySpread}]
    """)


def test_load_example(tmp_path):
    """The documented example loads: two profiles, global and per-profile percentages, back-off."""
    path = tmp_path / "sched.yaml"
    path.write_text(EXAMPLE)
    config = load_config(path)
    assert [p.scheduler_name for p in config.profiles] == ["default-scheduler", "bin-packer"]
    assert config.percentage_of_nodes_to_score == 20
    assert config.profiles[1].percentage_of_nodes_to_score == 100
    assert (config.queue.initial_backoff, config.queue.max_backoff) == (2.0, 20.0)


def test_default_profile_matches_kube():
    """No file: one profile "default-scheduler" with kube's default plugins and weights."""
    config = parse_config(None)
    fw = build_framework(config.profiles[0], handle=Handle())
    assert fw.profile_name == "default-scheduler"
    assert fw.plugin_names("filter") == ["NodeName", "NodeUnschedulable", "TaintToleration", "NodeAffinity",
                                         "NodePorts", "NodeResourcesFit", "VolumeRestrictions", "VolumeBinding",
                                         "PodTopologySpread", "InterPodAffinity"]
    assert fw.plugin_names("reserve") == ["VolumeBinding"]
    assert fw.plugin_names("preBind") == ["VolumeBinding"]
    assert fw.weights == {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1,
                          "PodTopologySpread": 2, "InterPodAffinity": 2, "NodeResourcesBalancedAllocation": 1,
                          "ImageLocality": 1}
    assert fw.plugin_names("postFilter") == ["DefaultPreemption"]
    assert fw.plugin_names("bind") == ["DefaultBinder"]


def test_disable_enable_and_weights(tmp_path):
    """disabled removes a default at one point; enabled re-weights it; pluginConfig reaches the plugin."""
    path = tmp_path / "sched.yaml"
    path.write_text(EXAMPLE)
    profile = load_config(path).profiles[0]
    fw = build_framework(profile, handle=Handle())
    assert "ImageLocality" not in fw.plugin_names("score")
    assert fw.weights["NodeAffinity"] == 5
    assert fw.plugins["NodeResourcesFit"].strategy == "MostAllocated"


def test_multipoint_disable_removes_everywhere(tmp_path):
    """multiPoint.disabled takes a plugin out of every extension point."""
    path = tmp_path / "sched.yaml"
    path.write_text(EXAMPLE)
    enabled, _ = enabled_plugins(load_config(path).profiles[1], registry())
    assert all("PodTopologySpread" not in [r.name for r in refs] for refs in enabled.values())


def test_star_disables_a_whole_point():
    """`disabled: [{name: "*"}]` at score leaves no score plugin but the ones enabled there."""
    config = parse_config({"profiles": [{"plugins": {"score": {"disabled": [{"name": "*"}],
                                                               "enabled": [{"name": "ImageLocality"}]}}}]})
    enabled, _ = enabled_plugins(config.profiles[0], registry())
    assert [r.name for r in enabled["score"]] == ["ImageLocality"]


class GPUFirst:
    """An outside plugin for the import-path test."""

    NAME = "GPUFirst"

    def __init__(self, args: dict, handle: Handle) -> None:
        self.args = args

    def score(self, state, pod, node) -> int:
        return 100 if "gpu" in node.labels else 0


def test_outside_plugin_by_import_path():
    """"package.module:Class" loads a plugin from outside kctl, with its args and weight."""
    path = f"{__name__}:GPUFirst"
    config = parse_config({"profiles": [{
        "plugins": {"multiPoint": {"enabled": [{"name": path, "weight": 4}]}},
        "pluginConfig": [{"name": "GPUFirst", "args": {"x": 1}}]}]})
    fw = build_framework(config.profiles[0], handle=Handle())
    assert "GPUFirst" in fw.plugin_names("score")
    assert fw.weights["GPUFirst"] == 4
    assert fw.plugins[path].args == {"x": 1}


BAD = [
    ("wrong-kind", {"kind": "Pod"}, "KubeSchedulerConfiguration"),
    ("unknown-point", {"profiles": [{"plugins": {"sorting": {}}}]}, "unknown extension point"),
    ("unknown-plugin", {"profiles": [{"plugins": {"filter": {"enabled": [{"name": "Nope"}]}}}]}, "unknown plugin"),
    ("bad-import", {"profiles": [{"plugins": {"filter": {"enabled": [{"name": "no.such.module:X"}]}}}]},
     "cannot import"),
    ("wrong-point", {"profiles": [{"plugins": {"bind": {"enabled": [{"name": "ImageLocality"}]}}}]},
     "does not implement"),
    ("duplicate-profile", {"profiles": [{}, {}]}, "duplicate"),
    ("bad-percentage", {"percentageOfNodesToScore": 150}, "0 to 100"),
    ("bad-weight", {"profiles": [{"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": -1}]}}}]},
     "non-negative"),
    ("bad-args", {"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit",
                                                  "args": {"scoringStrategy": {"type": "Bogus"}}}]}]}, "Bogus"),
]


@pytest.mark.parametrize("doc,message", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_errors(doc, message):
    """A wrong file is one ConfigError naming what is wrong."""
    with pytest.raises(ConfigError, match=message):
        config = parse_config(doc)
        for profile in config.profiles:
            build_framework(profile, handle=Handle())


def test_unreadable_yaml_names_the_file(tmp_path):
    """A YAML syntax error becomes a ConfigError that starts with the file's path."""
    path = tmp_path / "bad.yaml"
    path.write_text("profiles: [\n")
    with pytest.raises(ConfigError, match="bad.yaml"):
        load_config(path)


def test_profile_default_name():
    """A profile without schedulerName is the default scheduler's."""
    assert Profile().scheduler_name == "default-scheduler"


@pytest.mark.parametrize("doc, field", [
    ({"profiles": 3}, "profiles"),
    ({"profiles": [{"plugins": ["a"]}]}, "profiles[0].plugins"),
], ids=["profiles-not-a-list", "plugins-not-a-mapping"])
def test_wrong_shapes_are_config_errors(doc, field):
    """A field of the wrong type is a ConfigError naming it, not a crash."""
    with pytest.raises(ConfigError, match=re.escape(field)):
        parse_config(doc)
