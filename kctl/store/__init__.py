"""The store: objects and their change log in SQLite, watch, compaction, encryption at rest.
Only the API server (kctl/apiserver) and the CLI's store administration open one."""
