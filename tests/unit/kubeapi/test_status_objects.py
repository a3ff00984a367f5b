"""Errors as Status objects (kctl.kubeapi.status): Kubernetes' reason, code, details and message."""

from __future__ import annotations

import pytest

from kctl.kubeapi.status import failure, status_of, success
from kctl.machinery.errors import (AlreadyExists, BadRequest, Conflict, FieldError, Forbidden, Gone, Invalid,
                                   NotFound, RequestEntityTooLarge, Timeout, TooManyRequests)

CASES = [
    (NotFound("pods", "web"), 404, "NotFound", 'pods "web" not found', {"name": "web", "kind": "pods"}),
    (NotFound("deployments.apps", "web"), 404, "NotFound", 'deployments.apps "web" not found',
     {"name": "web", "group": "apps", "kind": "deployments"}),
    (AlreadyExists("configmaps", "c"), 409, "AlreadyExists", 'configmaps "c" already exists',
     {"name": "c", "kind": "configmaps"}),
    (Conflict('Operation cannot be fulfilled on pods "p": the object has been modified'), 409, "Conflict",
     'Operation cannot be fulfilled on pods "p": the object has been modified', None),
    (BadRequest("bad"), 400, "BadRequest", "bad", None),
    (Forbidden('namespace "default" is forbidden: this namespace may not be deleted'), 403, "Forbidden",
     'namespace "default" is forbidden: this namespace may not be deleted', {"name": "default", "kind": "namespace"}),
    (Gone("too old resource version: 1 (5)"), 410, "Expired", "too old resource version: 1 (5)", None),
    (Timeout("Too large resource version: 9, current: 3"), 504, "Timeout",
     "Too large resource version: 9, current: 3", None),
    (TooManyRequests("Cannot evict pod as it would violate the pod's disruption budget."), 429, "TooManyRequests",
     "Cannot evict pod as it would violate the pod's disruption budget.", None),
    (RequestEntityTooLarge("request is too large"), 413, "RequestEntityTooLarge", "request is too large", None),
]


@pytest.mark.parametrize("exc,code,reason,message,details", CASES, ids=[type(c[0]).__name__ + str(i)
                                                                         for i, c in enumerate(CASES)])
def test_status_of_errors(exc, code, reason, message, details):
    """Each kctl error is a v1 Status Failure with Kubernetes' code and reason, its message and details."""
    status = status_of(exc)
    assert status["kind"] == "Status" and status["apiVersion"] == "v1" and status["status"] == "Failure"
    assert (status["code"], status["reason"], status["message"]) == (code, reason, message)
    assert status.get("details") == details


def test_invalid_names_the_kind_and_each_cause():
    """Invalid: details name the Kind (not the resource) and one cause per field error, with its field path."""
    exc = Invalid('Deployment.apps "web"', [FieldError("spec.replicas", 'Invalid value: -1: must be >= 0'),
                                           FieldError("spec.template", "Required value")])
    status = status_of(exc)
    assert status["code"] == 422 and status["reason"] == "Invalid"
    assert status["message"].startswith('Deployment.apps "web" is invalid: spec.replicas: Invalid value')
    assert status["details"]["name"] == "web" and status["details"]["kind"] == "Deployment"
    assert status["details"]["group"] == "apps"
    assert status["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "message": "Invalid value: -1: must be >= 0", "field": "spec.replicas"},
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.template"}]


def test_details_given_by_the_caller_win():
    """The request's own name/group/resource override what the message suggests."""
    status = status_of(Conflict("Operation cannot be fulfilled"), name="web", group="apps", kind="deployments")
    assert status["details"] == {"name": "web", "group": "apps", "kind": "deployments"}


def test_failure_and_success_shapes():
    """A bare failure takes Kubernetes' reason for its code; a success has status Success."""
    assert failure(401, "Unauthorized") == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                            "status": "Failure", "message": "Unauthorized",
                                            "reason": "Unauthorized", "code": 401}
    assert success(code=201) == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                 "code": 201}
