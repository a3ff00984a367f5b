"""The `Examples:` section of every command's `--help`, as kubectl prints it. Called by kctl.cli.main.

One table, command path -> examples (`# what it does` above each `kctl ...` line); `attach` sets
each as its Click command's epilog once the tree is built, so no command module carries them.
tests/cli/test_docs.py checks every command has an entry and every example names a command
that exists.
"""

from __future__ import annotations

import types

import click

EXAMPLES: dict[str, str] = {
    "": """
# Apply a manifest, then list what it made
kctl apply -f web.yaml
kctl get deployments,pods

# Use another store, or a control host's over SSH
kctl --store ./kctl.db get pods
kctl --server ssh://admin@control/var/lib/kctl/kctl.db get nodes
""",
    "apply": """
# Apply the objects in web.yaml
kctl apply -f web.yaml

# Apply every manifest under a folder, recursively, in namespace demo
kctl apply -f manifests/ -R -n demo

# Apply from stdin, writing every document or none
cat web.yaml | kctl apply -f - --atomic

# Apply, and delete what was applied before with app=web that the files no longer hold
kctl apply -f manifests/ --prune -l app=web

# Apply again whenever the files change
kctl apply -f manifests/ --watch
""",
    "create": """
# Create the objects in web.yaml (AlreadyExists if one exists)
kctl create -f web.yaml

# Create a namespace
kctl create namespace demo
""",
    "diff": """
# Show what applying web.yaml would change
kctl diff -f web.yaml

# Show how the live objects differ from a git source's revision
kctl diff --source site
""",
    "daemon": """
# Run agents, controllers and scheduler on this host
kctl daemon

# Only the controllers and the scheduler, with more logging
kctl daemon --no-agents --log-level debug

# Node mode: run this host's agent for a control plane over SSH
kctl daemon --node h2 --server ssh://admin@control/var/lib/kctl/kctl.db --identity ~/.ssh/id_ed25519
""",
    "get": """
# List all pods in the default namespace
kctl get pods

# List pods with more information (node, IP)
kctl get pods -o wide

# List deployments and services in every namespace
kctl get deployments,services -A

# Show one pod as YAML
kctl get pod web-7d4b9 -o yaml

# Print only the phase of a pod
kctl get pod/web-7d4b9 -o jsonpath='{.status.phase}'

# List pods labelled app=web, without headers, and watch for changes
kctl get pods -l app=web --no-headers=true --watch
""",
    "describe": """
# Describe a deployment
kctl describe deployment web

# Describe every pod labelled app=web in namespace demo
kctl describe pods -l app=web -n demo
""",
    "logs": """
# Print the logs of a pod's only container
kctl logs web-7d4b9

# Follow the logs of container nginx, starting 5 minutes back
kctl logs web-7d4b9 -c nginx -f --since 5m

# The last 20 lines of the previous, crashed instance
kctl logs web-7d4b9 --previous --tail 20
""",
    "exec": """
# Run a command in a pod's first container
kctl exec web-7d4b9 -- ls /

# Pass stdin to a command in container nginx
echo hello | kctl exec -i web-7d4b9 -c nginx -- cat
""",
    "init": """
# Create the default store and its key file
kctl init

# Create a store at a path of your choice
kctl --store /var/lib/kctl/kctl.db init
""",
    "encryption": """
# Re-encrypt every stored Secret with a new key
kctl encryption rotate-key
""",
    "encryption rotate-key": """
# Re-encrypt every stored Secret with a new key, dropping the old one
kctl encryption rotate-key

# The same for another store
kctl --store /var/lib/kctl/kctl.db encryption rotate-key
""",
    "backup": """
# Copy the store consistently while it is in use
kctl backup /backups/kctl-2026-12-04.db
""",
    "restore": """
# Replace the store's content with a backup
kctl restore /backups/kctl-2026-12-04.db
""",
    "vacuum": """
# Compact the change log and return space to the disk
kctl vacuum
""",
    "config": """
# Print the admin's kubeconfig and use it with kubectl
kctl config kubeconfig > kctl.yaml
""",
    "config kubeconfig": """
# A kubeconfig for the admin (system:masters), for kubectl on this host
kctl config kubeconfig > ~/.kube/config

# A kubeconfig for user alice in group dev, valid 30 days, for another host
kctl config kubeconfig --user alice --group dev --days 30 --server https://control.example:6443
""",
    "auth": """
# May I list pods in namespace prod?
kctl auth can-i list pods -n prod

# Who does kctl act as?
kctl auth whoami
""",
    "auth can-i": """
# May alice delete deployments in namespace team-a?
kctl auth can-i delete deployments.apps -n team-a --as alice

# What may the ServiceAccount ci/builder do in namespace ci?
kctl auth can-i --list -n ci --as system:serviceaccount:ci:builder

# Only the exit status answers (0 yes, 1 no)
kctl auth can-i get pods/log --as bob --as-group devs -q
""",
    "auth whoami": """
# The user and groups RBAC sees
kctl auth whoami

# As JSON (a SelfSubjectReview)
kctl auth whoami -o json
""",
    "audit": """
# Who wrote what in the last ten minutes
kctl audit --since 10m

# Deletions of Secrets in namespace prod, as JSON
kctl audit --verb delete --kind secrets -n prod -o json
""",
    "delete": """
# Delete the objects named in web.yaml
kctl delete -f web.yaml

# Delete a pod at once, without waiting for its node
kctl delete pod web-7d4b9 --grace-period=0 --force

# Delete deployments labelled app=web, waiting at most 30 seconds
kctl delete deployments -l app=web --timeout 30s

# Delete a config map and do not wait for finalizers
kctl delete configmap settings --wait=false
""",
    "patch": """
# Set a deployment's replicas with a strategic merge patch
kctl patch deployment web -p '{"spec":{"replicas":3}}'

# Remove a label with a JSON patch
kctl patch pod web-7d4b9 --type json -p '[{"op":"remove","path":"/metadata/labels/tier"}]'

# Write a status field through the status subresource
kctl patch deployment web --subresource status --type merge -p '{"status":{"replicas":1}}'
""",
    "label": """
# Add a label to a pod
kctl label pod web-7d4b9 tier=frontend

# Change an existing label
kctl label pod web-7d4b9 tier=backend --overwrite

# Remove the label tier from every pod labelled app=web
kctl label pods -l app=web tier-
""",
    "annotate": """
# Annotate a deployment
kctl annotate deployment web owner=team-a

# Change an existing annotation on every config map in the namespace
kctl annotate configmaps --all owner=team-b --overwrite
""",
    "edit": """
# Edit a deployment in $EDITOR and apply the changes
kctl edit deployment web

# Edit a service as JSON
kctl edit service web -o json
""",
    "explain": """
# The fields of a Deployment
kctl explain deployment

# One field, and everything below it
kctl explain deployment.spec.strategy --recursive
""",
    "api-resources": """
# List every kind kctl serves
kctl api-resources

# Only the namespaced kinds, by name
kctl api-resources --namespaced=true -o name
""",
    "version": """
# Print the version and the store
kctl version

# The same as JSON
kctl version -o json
""",
    "completion": """
# Load completion into the current bash (bash 4.4 or later)
source <(kctl completion bash)

# Install it for every new zsh
kctl completion zsh > "${fpath[1]}/_kctl"

# Install it for fish
kctl completion fish > ~/.config/fish/completions/kctl.fish
""",
    "cordon": """
# Mark node h2 unschedulable
kctl cordon h2
""",
    "uncordon": """
# Mark node h2 schedulable again
kctl uncordon h2
""",
    "drain": """
# Cordon node h2 and evict its pods, leaving DaemonSet pods
kctl drain h2 --ignore-daemonsets

# Give up after 5 minutes, deleting pods that use emptyDir volumes too
kctl drain h2 --ignore-daemonsets --delete-emptydir-data --timeout 5m

# Delete the pods instead of evicting them (PodDisruptionBudgets are not consulted)
kctl drain h2 --ignore-daemonsets --disable-eviction
""",
    "expose": """
# A ClusterIP Service for the web Deployment, port 80 to the pods' 8080
kctl expose deployment web --port 80 --target-port 8080

# A NodePort Service for one pod, printed and not created
kctl expose pod web-1 --port 80 --type NodePort --dry-run=client -o yaml
""",
    "autoscale": """
# Keep the web Deployment between 2 and 5 pods, at 70% of their cpu requests
kctl autoscale deployment web --min 2 --max 5 --cpu-percent 70

# Print the HorizontalPodAutoscaler for a StatefulSet without creating it
kctl autoscale statefulset db --max 3 --dry-run=client -o yaml
""",
    "port-forward": """
# Listen on 8080 here, forward to port 80 of pod web-1
kctl port-forward pod/web-1 8080:80

# Any free local port to the pod behind the web Service's port 80 (its targetPort)
kctl port-forward svc/web :80

# Listen on every address, forward 5000 and 6000 to a pod of the web Deployment
kctl port-forward --address 0.0.0.0 deploy/web 5000 6000
""",
    "scale": """
# Scale a deployment to 3 replicas
kctl scale deployment web --replicas 3

# Scale only if it has 2 replicas now
kctl scale deployment/web --current-replicas 2 --replicas 5

# Scale a statefulset to 5 pods (web-3 and web-4 are added, in order)
kctl scale statefulset web --replicas 5
""",
    "serve": """
# Serve the store's API over stdin/stdout (what --server runs over SSH)
kctl serve --stdio --store /var/lib/kctl/kctl.db
""",
    "wait": """
# Wait until a deployment is Available
kctl wait deployment/web --for condition=Available --timeout 60s

# Wait for a pod to be deleted, for as long as it takes
kctl wait pod/web-7d4b9 --for delete --timeout=-1s

# Wait until a pod's phase is Running
kctl wait pod/web-7d4b9 --for 'jsonpath={.status.phase}=Running'
""",
    "image": """
# List the images of the control host's Podman
kctl image ls

# Copy an image to every node
kctl image push localhost/web:1.2 --all
""",
    "image ls": """
# List the images of the control host's Podman
kctl image ls
""",
    "image push": """
# Copy an image to node h2
kctl image push localhost/web:1.2 --node h2

# Copy it to every node
kctl image push localhost/web:1.2 --all
""",
    "node": """
# Add a host reached over SSH as node h2
kctl node add h2 --ssh root@10.77.0.12 --identity ~/.ssh/id_ed25519

# Remove it, draining its pods first
kctl node remove h2
""",
    "node add": """
# Add a host reached over SSH as node h2, labelled and tainted
kctl node add h2 --ssh root@10.77.0.12 --identity ~/.ssh/id_ed25519 -l zone=b --taint gpu=yes:NoSchedule

# A rootless Podman: name its socket
kctl node add h3 --ssh podman@10.77.0.13 --socket /run/user/1000/podman/podman.sock
""",
    "node trust": """
# Record the host key node h2 presents now, after checking its fingerprint
kctl node trust h2

# Without asking
kctl node trust h2 --yes
""",
    "node remove": """
# Drain node h2 and remove it
kctl node remove h2 --timeout 2m

# Remove it at once, without draining
kctl node remove h2 --force
""",
    "top": """
# Show the CPU and memory of the pods in the default namespace, busiest first
kctl top pod --sort-by cpu

# Show the usage of each node
kctl top node
""",
    "top pod": """
# Show the CPU and memory of the pods in every namespace
kctl top pod -A

# Show one pod's containers
kctl top pod web-7d4b9c-x2x9q --containers

# Show the pods labelled app=web, by memory
kctl top pod -l app=web --sort-by memory
""",
    "top node": """
# Show the usage of each node, as a share of its allocatable too
kctl top node

# Show one node
kctl top node h1
""",
    "rollout": """
# Watch a deployment's rollout until it completes
kctl rollout status deployment/web

# Go back to the previous revision
kctl rollout undo deployment/web
""",
    "rollout status": """
# Watch a deployment's rollout until it completes
kctl rollout status deployment/web

# Give up after 2 minutes
kctl rollout status deployment/web --timeout 2m
""",
    "rollout history": """
# List a deployment's revisions
kctl rollout history deployment/web

# The pod template of revision 3
kctl rollout history deployment/web --revision 3

# A statefulset's revisions (its ControllerRevisions)
kctl rollout history statefulset/web
""",
    "rollout undo": """
# Go back to the previous revision
kctl rollout undo deployment/web

# Go back to revision 3
kctl rollout undo deployment/web --to-revision 3

# Put a statefulset's previous pod template back
kctl rollout undo statefulset/web
""",
    "rollout restart": """
# Replace every pod of a deployment, as a rolling update
kctl rollout restart deployment/web
""",
    "rollout pause": """
# Stop rolling out changes to a deployment's template
kctl rollout pause deployment/web
""",
    "rollout resume": """
# Roll out the changes made while it was paused
kctl rollout resume deployment/web
""",
    "set": """
# Set the image of container nginx of a deployment
kctl set image deployment/web nginx=nginx:1.27
""",
    "set image": """
# Set the image of container nginx of a deployment
kctl set image deployment/web nginx=nginx:1.27

# Set the image of every container of every deployment labelled app=web
kctl set image deployments -l app=web '*=localhost/web:1.3'
""",
    "sync": """
# Keep namespace demo in step with a git repository's manifests
kctl sync run https://git.example.com/site.git --path deploy --prune -n demo

# Show what was applied last
kctl sync status -A
""",
    "sync run": """
# Sync a repository's folder deploy/ every minute, pruning what it no longer holds
kctl sync run https://git.example.com/site.git --name site --path deploy --prune --interval 1m

# Apply a local folder once
kctl sync run ./manifests --once
""",
    "sync status": """
# The revision each git source applied, and its errors
kctl sync status -A

# One source, as YAML
kctl sync status site -o yaml
""",
    "sync delete": """
# Stop syncing a source and delete what it applied
kctl sync delete site

# Stop syncing but keep the objects
kctl sync delete site --keep
""",
}


def text(path: str) -> str | None:
    """The Examples section for a command path (`"rollout status"`), indented as kubectl's; None if none."""
    body = EXAMPLES.get(path)
    if body is None:
        return None
    lines = ["  " + line if line else "" for line in body.strip("\n").splitlines()]
    return "Examples:\n" + "\n".join(lines)


def attach(root: click.Group) -> None:
    """Give every command of the tree (groups included) its Examples as epilog, printed as written."""
    for path, command in walk(root):
        section = text(path)
        if section is not None:
            command.epilog = section
            command.format_epilog = types.MethodType(_format_epilog, command)  # type: ignore[method-assign]


def _format_epilog(self: click.Command, ctx: click.Context, formatter: click.HelpFormatter) -> None:
    """Click re-wraps and indents an epilog; kubectl's examples are printed line for line."""
    if self.epilog:
        formatter.write_paragraph()
        formatter.write(self.epilog + "\n")


def walk(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    """Every command below `group` with its path (`""` for the group itself), depth first."""
    found: list[tuple[str, click.Command]] = [(prefix, group)]
    for name, command in group.commands.items():
        path = f"{prefix} {name}".strip()
        if isinstance(command, click.Group):
            found.extend(walk(command, path))
        else:
            found.append((path, command))
    return found


__all__ = ["EXAMPLES", "attach", "text", "walk"]
