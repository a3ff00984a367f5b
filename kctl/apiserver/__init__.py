"""The API server: the API contract, its local form over a store (admission, concurrency, audit)
and its remote form (kctl serve --stdio and its client over SSH)."""
