"""`kctl apply --server-side`: each document applied by the API server as its field manager's configuration.

Called by kctl.cli.apply. Each document goes to the API's `apply_server_side`
(kctl.apiserver.fieldmanager): created when absent, else merged as structured-merge-diff does,
with Kubernetes' conflict error when another manager owns a field it would change, unless
`--force-conflicts`. Result lines say `serverside-applied`, as kubectl's do.
"""

from __future__ import annotations

#: the field manager of `kctl apply --server-side` (kubectl's is `kubectl`)
DEFAULT_FIELD_MANAGER = "kctl"

CONFLICT_HELP = """\
Please review the fields above--they currently have other managers. Here
are the ways you can resolve this warning:
* If you intend to manage all of these fields, please re-run the apply
  command with the `--force-conflicts` flag.
* If you do not intend to manage all of the fields, please edit your
  manifest to remove references to the fields that should keep their
  current managers.
* You may co-own fields by updating your manifest to match the existing
  value; in this case, you'll become the manager if the other manager(s)
  stop managing the field (remove it from their configuration).
See https://kubernetes.io/docs/reference/using-api/server-side-apply/#conflicts"""


def apply_server_side(server, docs, *, namespace: str | None, dry_run: bool, force: bool,
                      field_manager: str) -> list:
    """One WriteResult per document (action `serverside-applied`, or the error with kubectl's conflict help)."""
    from kctl.apiserver.contract import WriteResult
    from kctl.machinery.errors import APIError

    results = []
    for doc in docs:
        try:
            rt = server.resource_for(doc.obj)
            meta = doc.obj.get("metadata") if isinstance(doc.obj.get("metadata"), dict) else {}
            obj = server.apply_server_side(rt, str(meta.get("name") or ""), doc.obj, namespace=namespace,
                                           field_manager=field_manager, force=force, dry_run=dry_run)
            results.append(WriteResult(obj=obj, action="serverside-applied"))
        except APIError as exc:
            if exc.code == 409 and exc.message.startswith("Apply failed with"):
                exc.message = f"{exc.message}\n{CONFLICT_HELP}"
            results.append(WriteResult(error=exc))
    return results


__all__ = ["DEFAULT_FIELD_MANAGER", "apply_server_side"]
