"""Git sync: a repository (or folder) of manifests as the source of truth.

The steps a source goes through, one module each, lowest first:
`fetch` (the `git` command: a revision into a local checkout), `render` (the checkout's
manifests, plain or through `kustomize`, into objects with their file and line), and
`order` (the order they are applied and pruned in). The reconciler and `kctl sync` build
on these.
"""
