"""The HorizontalPodAutoscaler controller (Kubernetes' pkg/controller/podautoscaler), in four parts.

controller.py is the reconciler the daemon runs ("horizontal-pod-autoscaler"); replicas.py
is the replica calculator (resource metrics against requests or average values);
behavior.py the stabilization windows and scaling policies; status.py the HPA's status and
conditions; metrics.py where pod usage is read (PodMetrics through the API).
"""
