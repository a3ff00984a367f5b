"""What clients read before they act: `/version` and health, discovery, OpenAPI.

catalog.py is the one list of served kinds (built-ins, CRDs, extra versions, subresources) that
groups.py (`/api`, `/apis`, per group-version lists, aggregated discovery v2), openapi.py
(`/openapi/v2` and `/openapi/v3`, from openapischemas.py; openapiproto.py its protobuf form) and
kctl.kubeapi.table read; version.py answers `/version`, `/healthz`, `/livez` and `/readyz`.
kctl.kubeapi.app asks each handler module in turn (NON_RESOURCE_HANDLERS).
"""
