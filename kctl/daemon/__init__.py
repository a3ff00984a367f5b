"""The daemon's composition (kube-controller-manager's place): what one `kctl daemon` runs.

Read bottom-up: `controllers` (the one name -> factory table of controllers and the
`--controllers` list that chooses from it), `settings` (the frozen DaemonSettings built
from the command's flags), `localpodman` (the local Podman this host registers with),
`controlplane` (the controller manager and the scheduler, while this daemon leads) and
`server` (`run`: node agents and control plane from start to a clean stop).

kctl.cli.daemon parses the flags, builds the settings and calls `run`; this package sits
above sync, the controllers, the scheduler and the agents, and never imports kctl.cli.
"""
