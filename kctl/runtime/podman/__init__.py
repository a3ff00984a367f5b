"""The Runtime of kctl.runtime.interface on a Podman service, through its REST API.

A node agent (kctl.agent) gets one PodmanRuntime per Node from
kctl.runtime.connect.runtime_for_node and only calls the Runtime methods. The package
reads bottom-up:

- `errors`: podman-py, requests and socket errors as RuntimeError_, ImageNotFound or
  NotFoundInRuntime, one line each;
- `specgen`: kctl's specs to libpod request bodies and inspect documents back (pure);
- `files`: the tar archives written into containers; `execstream`: exec's hijacked stream;
- `connection`: the service's local socket (Podman's own, or an SSH tunnel, kctl.ssh)
  and one podman-py client per thread; `ServiceCalls`, the plain calls over it;
- the runtime's parts, one per idea: `pods`, `containers`, `images`, `volumes`,
  `exec_logs` (with `events`, a container event stream of its own);
- `runtime`: PodmanRuntime, those parts together, with the host's info and reachability.
"""

from kctl.runtime.podman.runtime import PodmanRuntime
from kctl.runtime.podman.specgen import registry_auth_header, saved_name

__all__ = ["PodmanRuntime", "registry_auth_header", "saved_name"]
