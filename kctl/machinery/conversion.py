"""Objects between the API versions of a kind served at more than one (the storage version and older ones).

A built-in kind is stored at one version (its ResourceType's); Kubernetes also serves some at
others, converting on the way in and out. `EXTRA_VERSIONS` names them per kind and the
converters (one module per converted kind: kctl.machinery.hpaconversion) do the work.
Callers: the Registry (kctl.machinery.resources) maps an extra version's apiVersion+kind to the
stored kind's ResourceType; the API server (kctl.apiserver.server) converts what a client
writes with `to_storage` before admission; the HTTPS API (kctl.kubeapi) serves the extra
versions' paths and converts answers with `convert`; discovery lists them (kctl.kubeapi.discovery.catalog).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from kctl.machinery.errors import BadRequest

if TYPE_CHECKING:
    from kctl.machinery.resources import ResourceType

__all__ = ["EXTRA_VERSIONS", "convert", "converts", "extra_versions", "to_storage"]

Converter = Callable[[dict], dict]

#: group_kind -> the versions served besides the stored one (the ResourceType's)
EXTRA_VERSIONS: dict[str, tuple[str, ...]] = {
    "HorizontalPodAutoscaler.autoscaling": ("v1",),
}


def _converters() -> dict[tuple[str, str, str, str], Converter]:
    """(group, kind, from version, to version) -> converter (imported when first needed)."""
    from kctl.machinery import hpaconversion

    return {
        ("autoscaling", "HorizontalPodAutoscaler", "v1", "v2"): hpaconversion.v1_to_v2,
        ("autoscaling", "HorizontalPodAutoscaler", "v2", "v1"): hpaconversion.v2_to_v1,
    }


def extra_versions(group_kind: str) -> tuple[str, ...]:
    """The versions a built-in kind is served at besides its stored one (usually none)."""
    return EXTRA_VERSIONS.get(group_kind, ())


def _split(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def converts(api_version: str, kind: str) -> bool:
    """Whether objects of this apiVersion and kind are served by conversion (an extra version)."""
    group, version = _split(api_version)
    return version in extra_versions(f"{kind}.{group}" if group else kind)


def convert(obj: dict, api_version: str) -> dict:
    """obj at `api_version` of its kind's group: obj itself when it is there already, else a converted copy.

    BadRequest when no converter joins the two versions.
    """
    current = obj.get("apiVersion")
    if current == api_version or not isinstance(current, str):
        return obj
    kind = obj.get("kind")
    (group, source), (target_group, target) = _split(current), _split(api_version)
    converter = _converters().get((group, str(kind), source, target)) if group == target_group else None
    if converter is None:
        raise BadRequest(f'no conversion of kind "{kind}" from version "{current}" to "{api_version}"')
    return converter(obj)


def to_storage(obj: dict, rt: ResourceType) -> dict:
    """A written object at its kind's stored version (rt's): converted when it is at an extra version."""
    if isinstance(obj, dict) and obj.get("apiVersion") != rt.api_version and not rt.is_custom \
            and converts(str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")):
        return convert(obj, rt.api_version)
    return obj
