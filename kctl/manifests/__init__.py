"""Manifests: YAML/JSON text in and out, and the `-f` sources (files, directories, stdin, URLs) read with it.

A library package at the bottom of kctl's layers: the CLI (`apply -f`, `-o yaml`) and git sync
(kctl.sync.render) import it; it imports nothing of kctl's but the version string. Modules:
`sources` (find and read what `-f` names, expanding Lists), `yamlio` (decode a stream and split
it into documents, read as Kubernetes reads them) over its readers `jsonreader`, `fastreader` and
`ruamelreader`, which resolve scalars as `yaml11` (go-yaml v2's YAML 1.1); `writer` (YAML and
JSON out, as kubectl prints them); `errors` (ManifestError), `bounds` (size, depth, node and
alias limits) and `charsets` (YAML's character classes). Nothing is imported here, so each
caller loads only what it uses.
"""
