"""The object model (Kubernetes' apimachinery): errors, resource types, schemas, selectors,
patches, times, quantities, size limits. The bottom layer: it imports nothing else of kctl."""
