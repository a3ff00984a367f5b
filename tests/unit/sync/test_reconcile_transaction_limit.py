"""A GitSource revision larger than one store transaction holds (etcd: 32 writes): checked whole by a dry run,
then written in parts; one refusal still writes nothing (the reconcile does not raise)."""

from __future__ import annotations

import pytest

from kctl.sync.reconcile import reconcile
from kctl.testing.gitrepo import GitRepo, configmap

GS = {"apiVersion": "kctl.io/v1alpha1", "kind": "GitSource"}


@pytest.fixture
def limited_api(api, monkeypatch):
    """The API server over a store whose transactions hold at most 3 writes."""
    monkeypatch.setattr(api.store, "max_writes_per_transaction", 3)
    return api


def _sync(api, tmp_path, documents) -> object:
    repo = GitRepo.create(tmp_path / "repo")
    repo.write("cms.yaml", documents)
    repo.commit()
    api.create({**GS, "metadata": {"name": "app", "namespace": "default"}, "spec": {"url": repo.url}})
    return reconcile(api, "default/app", cache_dir=tmp_path / "cache")


def test_a_revision_too_large_for_one_transaction_is_written_in_parts(limited_api, tmp_path):
    """5 new objects, 3 writes per transaction: every object applied, the source Ready."""
    result = _sync(limited_api, tmp_path, [configmap(f"c{i}") for i in range(5)])
    assert result.ready and result.reason == "Applied", result.error_line()
    assert sorted(o["metadata"]["name"] for o in limited_api.store.list("ConfigMap")[0]) == [
        "c0", "c1", "c2", "c3", "c4"]


def test_one_refusal_in_a_large_revision_writes_nothing(limited_api, tmp_path):
    """5 objects, the last invalid (a bad label value): ApplyFailed naming it, no object written."""
    bad = configmap("c4")
    bad["metadata"]["labels"] = {"app": "not valid!"}
    result = _sync(limited_api, tmp_path, [configmap(f"c{i}") for i in range(4)] + [bad])
    assert not result.ready and result.reason == "ApplyFailed"
    assert "c4" in result.error_line()
    assert limited_api.store.list("ConfigMap")[0] == []
