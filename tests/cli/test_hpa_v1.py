"""`kctl apply -f` of an autoscaling/v1 HorizontalPodAutoscaler (an old chart's): stored and shown as autoscaling/v2."""

from __future__ import annotations

import json

import pytest

from kctl.manifests.yamlio import load_documents

V1_HPA = """\
apiVersion: autoscaling/v1
kind: HorizontalPodAutoscaler
metadata:
  name: web
  namespace: default
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 5
  targetCPUUtilizationPercentage: 60
"""


def _only(text: str) -> dict:
    docs = [doc for _, _, doc in load_documents(text, source="<stdout>")]
    assert len(docs) == 1
    return docs[0]


def test_apply_v1_hpa_is_stored_and_shown_as_v2(kctl, tmp_path):
    """A v1 HPA applies (created, then unchanged) and `get -o yaml` shows its v2 form with the cpu metric."""
    manifest = tmp_path / "hpa.yaml"
    manifest.write_text(V1_HPA)
    first = kctl("apply", "-f", str(manifest))
    assert first.code == 0, first.err
    assert "horizontalpodautoscaler.autoscaling/web created" in first.out
    again = kctl("apply", "-f", str(manifest))
    assert again.code == 0, again.err
    assert "horizontalpodautoscaler.autoscaling/web unchanged" in again.out
    shown = kctl("get", "hpa", "web", "-o", "yaml")
    assert shown.code == 0, shown.err
    obj = _only(shown.out)
    assert obj["apiVersion"] == "autoscaling/v2"
    assert obj["spec"]["minReplicas"] == 2 and obj["spec"]["maxReplicas"] == 5
    assert obj["spec"]["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}]
    assert "targetCPUUtilizationPercentage" not in obj["spec"]


def test_apply_v1_hpa_change_updates_the_v2_metric(kctl, tmp_path):
    """Re-applying the v1 manifest with a new target changes the stored v2 metric (configured)."""
    manifest = tmp_path / "hpa.yaml"
    manifest.write_text(V1_HPA)
    assert kctl("apply", "-f", str(manifest)).code == 0
    manifest.write_text(V1_HPA.replace("targetCPUUtilizationPercentage: 60", "targetCPUUtilizationPercentage: 75"))
    changed = kctl("apply", "-f", str(manifest))
    assert changed.code == 0, changed.err
    assert "configured" in changed.out
    obj = json.loads(kctl("get", "hpa", "web", "-o", "json").out)
    assert obj["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 75


@pytest.mark.parametrize("old, new, message", [
    ("  maxReplicas: 5\n", "", "spec.maxReplicas"),
    ("targetCPUUtilizationPercentage: 60", "targetCPUUtilizationPercentage: 0",
     "spec.metrics[0].resource.target.averageUtilization"),
    ("  minReplicas: 2\n", "  minReplicas: 2\n  bogus: 1\n", "spec.bogus"),
], ids=["no-max", "zero-target", "unknown-field"])
def test_apply_invalid_v1_hpa_names_the_v2_field(kctl, tmp_path, old, new, message):
    """An invalid v1 HPA is refused with one line naming the field (at its stored-version path), no traceback."""
    manifest = tmp_path / "hpa.yaml"
    manifest.write_text(V1_HPA.replace(old, new))
    result = kctl("apply", "-f", str(manifest))
    assert result.code != 0
    assert message in result.err
    assert "Traceback" not in result.err


def test_apply_unknown_version_is_still_refused(kctl, tmp_path):
    """An HPA at a version kctl does not serve (v2beta1) is refused with `no matches for kind`."""
    manifest = tmp_path / "hpa.yaml"
    manifest.write_text(V1_HPA.replace("autoscaling/v1", "autoscaling/v2beta1"))
    result = kctl("apply", "-f", str(manifest))
    assert result.code != 0
    assert 'no matches for kind "HorizontalPodAutoscaler" in version "autoscaling/v2beta1"' in result.err
