"""Property tests: every diff the patch module computes, applied, gives back its target."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kctl.machinery import schemas
from kctl.machinery.apply import LAST_APPLIED, applied_object, apply_patch, last_applied_of
from kctl.machinery.patch import (
    create_merge_patch,
    create_strategic_patch,
    merge_patch,
    strategic_merge_patch,
)
from kctl.machinery.resources import builtin_registry

POD = schemas.load(builtin_registry().lookup("pod"))
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

KEYS = st.sampled_from(["a", "b", "c", "d", "e"])
SCALARS = st.one_of(st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=3))
# Null inside a list is data; null as an object value means "delete" and cannot be sent.
JSON_LIKE = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(st.one_of(inner, st.none()), max_size=3),
                            st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=12,
)
OBJECTS = st.dictionaries(KEYS, JSON_LIKE, max_size=5)


@FAST
@given(a=OBJECTS, b=OBJECTS)
def test_merge_patch_round_trip(a, b):
    """merge_patch(a, create_merge_patch(a, b)) == b, and neither input is mutated."""
    a0, b0 = copy.deepcopy(a), copy.deepcopy(b)
    assert merge_patch(a, create_merge_patch(a, b)) == b
    assert (a, b) == (a0, b0)


NAMES = st.sampled_from(["app", "db", "cache", "log", "proxy"])
WORDS = st.sampled_from(["x", "y", "z", "1", "-v"])


def unique_by(key: str, element: st.SearchStrategy, max_size: int = 4) -> st.SearchStrategy:
    return st.lists(element, max_size=max_size, unique_by=lambda e: e[key])


def optional(**fields) -> st.SearchStrategy:
    """A dict of which every field may be present or not."""
    return st.fixed_dictionaries({}, optional=fields)


CONTAINER = st.builds(
    lambda name, rest: {"name": name, **rest},
    NAMES,
    optional(
        image=st.sampled_from(["nginx", "redis", "busybox"]),
        imagePullPolicy=st.sampled_from(["Always", "IfNotPresent"]),
        args=st.lists(WORDS, max_size=3),
        env=unique_by("name", st.builds(lambda n, v: {"name": n, "value": v},
                                        st.sampled_from(["A", "B", "C"]), WORDS)),
        ports=unique_by("containerPort", st.builds(lambda p, rest: {"containerPort": p, **rest},
                                                   st.sampled_from([80, 443, 8080]),
                                                   optional(name=WORDS, protocol=st.just("TCP")))),
        resources=optional(limits=st.dictionaries(st.sampled_from(["cpu", "memory"]), WORDS, max_size=2)),
    ),
)
VOLUME = st.builds(
    lambda name, source: {"name": name, **source},
    st.sampled_from(["data", "conf", "tmp"]),
    st.one_of(st.just({"emptyDir": {}}), st.builds(lambda p: {"hostPath": {"path": p}}, WORDS),
              st.builds(lambda n: {"configMap": {"name": n}}, WORDS)),
)
POD_LIKE = st.builds(
    lambda metadata, spec: {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **metadata},
                            "spec": spec},
    optional(
        labels=st.dictionaries(st.sampled_from(["app", "tier", "team"]), WORDS, max_size=3),
        finalizers=st.lists(st.sampled_from(["f1", "f2", "f3", "f4"]), unique=True, max_size=4),
    ),
    st.builds(
        lambda containers, rest: {"containers": containers, **rest},
        unique_by("name", CONTAINER),
        optional(
            nodeName=WORDS,
            volumes=unique_by("name", VOLUME, max_size=3),
            tolerations=st.lists(optional(key=WORDS, operator=st.sampled_from(["Exists", "Equal"])),
                                 max_size=2),
            securityContext=optional(runAsUser=st.integers(0, 3), fsGroup=st.integers(0, 3)),
        ),
    ),
)


@FAST
@given(a=POD_LIKE, b=POD_LIKE)
def test_strategic_patch_round_trip(a, b):
    """strategic_merge_patch(a, create_strategic_patch(a, b, S), S) == b for Pods."""
    a0, b0 = copy.deepcopy(a), copy.deepcopy(b)
    patch = create_strategic_patch(a, b, POD)
    assert strategic_merge_patch(a, patch, POD) == b
    assert (a, b) == (a0, b0)
    assert create_strategic_patch(b, b, POD) == {}


def without_annotation(obj: dict) -> dict:
    obj = copy.deepcopy(obj)
    annotations = obj["metadata"].pop("annotations", {})
    annotations.pop(LAST_APPLIED, None)
    if annotations:
        obj["metadata"]["annotations"] = annotations
    return obj


@FAST
@given(m0=POD_LIKE, m=POD_LIKE, ready=st.booleans())
def test_apply_is_idempotent_and_converges(m0, m, ready):
    """Applying m over the result of applying m0 gives m (plus what others wrote), and
    re-applying m changes nothing."""
    first = applied_object(m0, None, POD)
    first["metadata"]["uid"] = "u-1"
    first["status"] = {"phase": "Running" if ready else "Pending"}
    second = applied_object(m, first, POD)
    assert last_applied_of(second) == m
    assert without_annotation(second) == {**m, "metadata": {**m["metadata"], "uid": "u-1"},
                                          "status": first["status"]}
    assert apply_patch(m, second, POD) == {}
    assert applied_object(m, second, POD) == second
