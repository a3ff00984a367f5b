"""The store: objects and their change log, watch, compaction, encryption at rest.
kctl.store.contract is the contract every backend keeps (the Store and Transaction Protocols);
kctl.store.sqlite is the default backend. Only the API server (kctl/apiserver) and the CLI's
store administration open one."""
