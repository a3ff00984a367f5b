"""Manifests: YAML/JSON text in and out, and the `-f` sources (files, directories, stdin, URLs) read with it.

A library package at the bottom of kctl's layers: the CLI (`apply -f`, `-o yaml`) and git sync
(kctl.sync.render) import it; it imports nothing of kctl's but the version string. Modules:
`yamlio` (decode and encode YAML/JSON as Kubernetes does) and `sources` (find and read what `-f`
names, expanding Lists). Nothing is imported here, so each caller loads only what it uses.
"""
