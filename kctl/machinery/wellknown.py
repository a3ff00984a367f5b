"""Well-known labels Kubernetes defines and several parts of kctl read (k8s.io/api's well_known_labels)."""

#: an EndpointSlice's Service (set by the EndpointSlice controller; read by kube-proxy and DNS)
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
