"""kctl's store on etcd (issue 17): the second backend of the store contract (kctl.store.contract).

`address` parses `etcd://host:2379[,host2:2379...][/prefix]` and holds the client's TLS files;
`client` talks to etcd's gRPC JSON gateway (/v3/) over `requests`; `keys` lays objects out as
Kubernetes does (`<prefix>/<resource>/<namespace>/<name>`) and encodes values; `transaction`
is the optimistic transaction (k8s.io/apiserver storage/etcd3 store.go's GuaranteedUpdate);
`watch` reads etcd's watch streams (watcher.go); `compactor` is kube-apiserver's compactor
(compact.go); `backup` moves state to and from kctl's one backup format (a SQLite store file);
`store.EtcdStore` puts them together. Callers: kctl.store.open (the composition point).
"""
