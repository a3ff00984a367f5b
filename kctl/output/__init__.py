"""Output: how objects are shown, as kubectl shows them.

A library package the CLI (`get`, `describe`, `wait --for=jsonpath`, `diff`) calls: `formats`
(the -o flag), `printers` (writing tables and -o yaml/json/name/jsonpath/custom-columns/go-template,
all at once or per watch event), `tables` (each kind's columns and row function), `cells` (ages,
durations, labels, selectors as kubectl prints them), `crdcolumns` (a CRD's printer columns),
`sorting` (--sort-by), `describe`, `jsonpath` (kubectl's JSONPath templates), `gotemplate` (Go's
text/template) and `keyorder` (kubectl's sorted keys). It uses the store level's resource types and
errors (kctl.machinery.resources, kctl.machinery.errors) and kctl.manifests' YAML/JSON writers.
Nothing is imported here, so a command loads only the modules it prints with.
"""
