"""Kubernetes' PersistentVolume controller for kctl: binding, phases and the built-in provisioner.

- matching.py: which volume fits a claim (findBestMatchForClaim), pure;
- provisioner.py: the `kctl.io/local-volume` provisioner (a PV on the claim's selected node);
- binder.py: the "persistentvolume-binder" controller that binds claims and volumes, keeps
  their phases (Pending/Bound/Lost, Available/Bound/Released/Failed), provisions, and
  applies the reclaim policy.

The protection controllers are kctl.controllers.pvcprotection and pvprotection; the
default class is kept by kctl.controllers.storageclass. docs/storage.md tells the story.
"""
