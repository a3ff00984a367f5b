"""Admission hooks: executables that review writes, kctl's admission webhooks.

A hook is a cluster-scoped object of kind MutatingAdmissionHook or
ValidatingAdmissionHook (kctl.io/v1alpha1). Its `spec.command` is run (no shell) with an
`admission.k8s.io/v1` AdmissionReview on stdin and must print one on stdout, so the logic
of a Kubernetes admission webhook ports over unchanged. The API layer (kctl.api) calls
`run_mutating_hooks` after defaulting and `run_validating_hooks` after schema validation
and Pod Security; `matches`, `run_mutating` and `run_validating` are the single-hook steps
those are made of.

Failures (timeout, crash, bad output, missing command) follow the hook's failurePolicy:
Fail refuses the write with Forbidden, Ignore logs a warning on the "kctl.admission"
logger and carries on. Hooks run with a minimal environment, in /, in their own session,
under kctl.admission.hook_supervisor: when the hook exits or times out, every process it
left behind (a grandchild that called setsid() included) is killed. Object contents are
never logged: hooks see Secrets.
"""

from __future__ import annotations

import base64
import binascii
import copy
import errno
import getpass
import json
import logging
import os
import selectors
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Iterable

import jsonpatch
import jsonpointer

from kctl.machinery.errors import Forbidden
from kctl.machinery.resources import KCTL_GROUP, ResourceType

logger = logging.getLogger("kctl.admission")

REVIEW_API_VERSION = "admission.k8s.io/v1"
DEFAULT_TIMEOUT_SECONDS = 10
MAX_TIMEOUT_SECONDS = 30
#: the most a hook may write on stdout; more is a failure (the hook is killed).
MAX_OUTPUT_BYTES = 16 * 1024 * 1024
#: how much of stderr is kept for the failure message; the rest is read and dropped.
MAX_STDERR_BYTES = 64 * 1024
#: the whole environment a hook gets, plus its spec.env.
HOOK_PATH = "/usr/local/bin:/usr/bin:/bin"
HOOK_LANG = "C.UTF-8"
HOOK_KINDS = frozenset({"MutatingAdmissionHook", "ValidatingAdmissionHook"})
_MESSAGE_LIMIT = 300
_WARNING_LIMIT = 1024


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


@dataclass(frozen=True)
class AdmissionRequest:
    """One write under admission, as a hook will see it (`review()` builds what it reads)."""

    uid: str
    operation: str  # CREATE | UPDATE | DELETE
    rt: ResourceType
    namespace: str | None
    name: str
    obj: dict | None  # None for DELETE
    old_obj: dict | None  # None for CREATE
    dry_run: bool = False
    user: str = field(default_factory=_os_user)

    def review(self) -> dict:
        """The `admission.k8s.io/v1` AdmissionReview request, as Kubernetes sends it.

        The objects are the request's own dicts, not copies: serialise, don't mutate.
        """
        rt = self.rt
        kind = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        resource = {"group": rt.group, "version": rt.version, "resource": rt.plural}
        request: dict = {
            "uid": self.uid,
            "kind": kind,
            "resource": resource,
            "requestKind": dict(kind),
            "requestResource": dict(resource),
        }
        if self.name:
            request["name"] = self.name
        if self.namespace:
            request["namespace"] = self.namespace
        options_kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions",
                        "DELETE": "DeleteOptions"}.get(self.operation, "CreateOptions")
        options: dict = {"apiVersion": "meta.k8s.io/v1", "kind": options_kind}
        if self.dry_run:
            options["dryRun"] = ["All"]
        request.update({
            "operation": self.operation,
            "userInfo": {"username": self.user},
            "object": self.obj,
            "oldObject": self.old_obj,
            "dryRun": self.dry_run,
            "options": options,
        })
        return {"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "request": request}


class _HookFailure(Exception):
    """Running a hook went wrong; the message is one line saying what (no object contents)."""


# --------------------------------------------------------------------------- matching


def _name(hook: dict) -> str:
    metadata = hook.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return str(name) if name else "<unnamed>"


def _spec(hook: dict) -> dict:
    spec = hook.get("spec")
    return spec if isinstance(spec, dict) else {}


def _listed(values: object, wanted: str) -> bool:
    return isinstance(values, list) and (wanted in values or "*" in values)


def _rule_matches(rule: dict, request: AdmissionRequest) -> bool:
    rt = request.rt
    if not _listed(rule.get("operations"), request.operation):
        return False
    if not _listed(rule.get("apiGroups"), rt.group):
        return False
    versions = rule.get("apiVersions")
    if versions is not None and not _listed(versions, rt.version):
        return False
    resources = rule.get("resources")
    if not isinstance(resources, list) or not any(r in ("*", "*/*", rt.plural) for r in resources):
        return False
    scope = rule.get("scope", "*")
    return scope == "*" or scope == ("Namespaced" if rt.namespaced else "Cluster")


def _matches_label_selector(selector: dict, labels: dict) -> bool:
    """Whether labels satisfy a LabelSelector (matchLabels AND every matchExpression).

    An empty selector matches everything. Raises ValueError for a malformed selector.
    """
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, dict) or not isinstance(expressions, list):
        raise ValueError("matchLabels must be a map and matchExpressions a list")
    for key, value in match_labels.items():
        if labels.get(key) != value:
            return False
    for expression in expressions:
        if not isinstance(expression, dict) or "key" not in expression:
            raise ValueError("each matchExpression needs a key and an operator")
        key, operator = expression["key"], expression.get("operator")
        values = expression.get("values") or []
        if operator in ("In", "NotIn") and (not isinstance(values, list) or not values):
            raise ValueError(f'operator "{operator}" needs a non-empty values list')
        if operator in ("Exists", "DoesNotExist") and values:
            raise ValueError(f'operator "{operator}" takes no values')
        if operator == "In":
            ok = key in labels and labels[key] in values
        elif operator == "NotIn":
            ok = key not in labels or labels[key] not in values
        elif operator == "Exists":
            ok = key in labels
        elif operator == "DoesNotExist":
            ok = key not in labels
        else:
            raise ValueError(f'unknown operator "{operator}"')
        if not ok:
            return False
    return True


def _labels(obj: dict | None) -> dict | None:
    if not isinstance(obj, dict):
        return None
    metadata = obj.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    return labels if isinstance(labels, dict) else {}


def matches(hook: dict, request: AdmissionRequest, namespace_labels: dict[str, str] | None) -> bool:
    """Whether `hook` is to be called for `request` (rules, namespaceSelector, objectSelector).

    As in Kubernetes: a hook without rules is never called; writes of hook objects
    themselves never go to hooks (a broken hook could not be removed otherwise); for a
    Namespace the namespaceSelector is matched against the namespace's own labels, for
    other cluster-scoped kinds it always matches; the objectSelector matches if the new
    or the old object matches. `namespace_labels` None means "no labels". A malformed
    selector is a hook failure, handled by its failurePolicy.
    """
    rt = request.rt
    if rt.group == KCTL_GROUP and rt.kind in HOOK_KINDS:
        return False
    spec = _spec(hook)
    rules = spec.get("rules")
    if not isinstance(rules, list) or not any(
            isinstance(rule, dict) and _rule_matches(rule, request) for rule in rules):
        return False
    try:
        namespace_selector = spec.get("namespaceSelector")
        if namespace_selector:
            if rt.group == "" and rt.kind == "Namespace":
                labels = _labels(request.obj)
                if labels is None:
                    labels = _labels(request.old_obj) or {}
            elif rt.namespaced:
                labels = namespace_labels or {}
            else:
                labels = None
            if labels is not None and not _matches_label_selector(_selector(namespace_selector), labels):
                return False
        object_selector = spec.get("objectSelector")
        if object_selector:
            selector = _selector(object_selector)
            candidates = [labels for labels in (_labels(request.obj), _labels(request.old_obj))
                          if labels is not None]
            if not any(_matches_label_selector(selector, labels) for labels in candidates):
                return False
    except ValueError as e:
        _fail(hook, _HookFailure(f"invalid selector: {e}"))
        return False
    return True


def _selector(value: object) -> dict:
    if not isinstance(value, dict):
        raise ValueError("a selector must be a map")
    return value


# --------------------------------------------------------------------------- running


def _argv(spec: dict) -> list[str]:
    command = spec.get("command")
    if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
        raise _HookFailure("spec.command must be a non-empty list of strings")
    if not os.path.isabs(command[0]):
        raise _HookFailure(f"spec.command[0] must be an absolute path, not {command[0]!r}")
    return command


def _timeout(spec: dict) -> float:
    value = spec.get("timeoutSeconds", DEFAULT_TIMEOUT_SECONDS)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        value = DEFAULT_TIMEOUT_SECONDS
    return min(value, MAX_TIMEOUT_SECONDS)


def environment(hook: dict) -> dict[str, str]:
    """The whole environment a hook runs with: PATH, LANG and its spec.env, nothing of kctl's."""
    env = {"PATH": HOOK_PATH, "LANG": HOOK_LANG}
    extra = _spec(hook).get("env")
    if isinstance(extra, list):
        for item in extra:
            if isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"]:
                value = item.get("value")
                env[item["name"]] = "" if value is None else str(value)
    return env


def _one_line(text: str, limit: int = _MESSAGE_LIMIT) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


SUPERVISOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hook_supervisor.py")
#: how long kctl waits for the supervisor to kill the hook's processes after asking it to.
STOP_GRACE_SECONDS = 15.0


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the supervisor's process group (the last resort; it leads its own session)."""
    if proc.returncode is not None:  # reaped: its pid may belong to someone else by now
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _stop(proc: subprocess.Popen) -> None:
    """Have the supervisor kill every process of the hook and wait for it (bounded)."""
    if proc.returncode is None:
        try:
            proc.send_signal(signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.wait()


def _read_outcome(fd: int) -> str:
    """The supervisor's one status line ("exit 0", "signal 9", "spawn-error 2", ...), or ""."""
    chunks = []
    try:
        while True:
            chunk = os.read(fd, 256)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:
        pass
    return b"".join(chunks).decode("ascii", "replace").strip()


def _spawn_failure(argv0: str, code: int) -> _HookFailure:
    if code == errno.ENOENT:
        return _HookFailure(f"cannot run {argv0}: no such file (or its #! interpreter is missing)")
    if code in (errno.EACCES, errno.EPERM):
        return _HookFailure(f"cannot run {argv0}: permission denied (is it executable?)")
    return _HookFailure(f"cannot run {argv0}: {os.strerror(code)}")


def _execute(argv: list[str], payload: bytes, timeout: float, env: dict[str, str]) -> tuple[bytes, bytes, int]:
    """Run argv with payload on stdin; (stdout, head of stderr, exit status). Raises _HookFailure.

    The hook runs under kctl.admission.hook_supervisor, which kills every process the hook
    left behind (daemonised grandchildren included) when it exits or times out.
    """
    status_read, status_write = os.pipe()
    try:
        proc = subprocess.Popen([sys.executable, "-I", "-S", SUPERVISOR, str(status_write),
                                 str(os.getpid()), "--", *argv],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, cwd="/", shell=False,
                                start_new_session=True, close_fds=True, pass_fds=(status_write,))
    except OSError as e:
        os.close(status_read)
        raise _HookFailure(f"cannot start the hook supervisor: {e.strerror or e}") from None
    finally:
        os.close(status_write)
    deadline = time.monotonic() + timeout
    stdout, stderr = bytearray(), bytearray()
    try:
        assert proc.stdin and proc.stdout and proc.stderr
        with selectors.DefaultSelector() as selector:
            pending = memoryview(payload)
            stdin_fd = proc.stdin.fileno()
            os.set_blocking(stdin_fd, False)
            selector.register(stdin_fd, selectors.EVENT_WRITE)
            selector.register(proc.stdout.fileno(), selectors.EVENT_READ, stdout)
            selector.register(proc.stderr.fileno(), selectors.EVENT_READ, stderr)
            while selector.get_map():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _HookFailure(f"timed out after {timeout:g}s")
                for key, _ in selector.select(remaining):
                    if key.fd == stdin_fd:
                        try:
                            pending = pending[os.write(stdin_fd, pending[:65536]):]
                        except BlockingIOError:
                            continue
                        except BrokenPipeError:  # the hook exited or closed stdin: fine
                            pending = pending[:0]
                        if not pending:
                            selector.unregister(stdin_fd)
                            proc.stdin.close()
                        continue
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        selector.unregister(key.fd)
                        continue
                    if key.data is stdout:
                        stdout += chunk
                        if len(stdout) > MAX_OUTPUT_BYTES:
                            raise _HookFailure(f"wrote more than {MAX_OUTPUT_BYTES // (1024 * 1024)} MiB on stdout")
                    elif len(stderr) < MAX_STDERR_BYTES:
                        stderr += chunk[: MAX_STDERR_BYTES - len(stderr)]
        try:
            proc.wait(max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            raise _HookFailure(f"timed out after {timeout:g}s") from None
        outcome = _read_outcome(status_read)
        what, _, number = outcome.partition(" ")
        if what == "spawn-error" and number.isdigit():
            raise _spawn_failure(argv[0], int(number))
        if what == "exit" and number.lstrip("-").isdigit():
            return bytes(stdout), bytes(stderr), int(number)
        if what == "signal" and number.isdigit():
            return bytes(stdout), bytes(stderr), -int(number)
        raise _HookFailure(f"its supervisor ended without a result (exit status {proc.returncode})")
    finally:
        _stop(proc)
        os.close(status_read)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass


def _describe_status(status: int, stderr: bytes) -> str:
    if status < 0:
        try:
            what = f"was killed by signal {signal.Signals(-status).name}"
        except ValueError:
            what = f"was killed by signal {-status}"
    else:
        what = f"exited with status {status}"
    first = next((line for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()), "")
    return f"{what}: {_one_line(first)}" if first else what


def _parse_response(stdout: bytes, uid: str) -> dict:
    """The `response` of the AdmissionReview a hook printed, checked for shape and uid."""
    if not stdout.strip():
        raise _HookFailure("wrote invalid output: nothing on stdout")
    try:
        review = json.loads(stdout)
    except (ValueError, UnicodeDecodeError) as e:
        detail = f"{e.msg} at line {e.lineno} column {e.colno}" if isinstance(e, json.JSONDecodeError) else str(e)
        raise _HookFailure(f"wrote invalid output: not JSON ({detail})") from None
    if (not isinstance(review, dict) or review.get("apiVersion") != REVIEW_API_VERSION
            or review.get("kind") != "AdmissionReview"):
        raise _HookFailure(f"wrote invalid output: not an {REVIEW_API_VERSION} AdmissionReview")
    response = review.get("response")
    if not isinstance(response, dict):
        raise _HookFailure("wrote invalid output: the AdmissionReview has no response")
    if response.get("uid") != uid:
        raise _HookFailure(f"wrote invalid output: response.uid {_one_line(str(response.get('uid')), 80)!r} "
                           f"does not match the request's {uid!r}")
    if not isinstance(response.get("allowed"), bool):
        raise _HookFailure("wrote invalid output: response.allowed must be true or false")
    return response


def _call(hook: dict, request: AdmissionRequest) -> dict:
    """Run the hook on the request; its checked response. Raises _HookFailure."""
    spec = _spec(hook)
    argv = _argv(spec)
    timeout = _timeout(spec)
    payload = json.dumps(request.review(), separators=(",", ":")).encode()
    started = time.monotonic()
    try:
        stdout, stderr, status = _execute(argv, payload, timeout, environment(hook))
    except OSError as e:  # talking to the hook's pipes failed
        raise _HookFailure(f"could not talk to the hook: {e.strerror or e}") from None
    logger.debug('admission hook "%s" ran in %.3fs for %s %s', _name(hook),
                 time.monotonic() - started, request.operation, request.rt.group_resource)
    if status != 0:
        raise _HookFailure(_describe_status(status, stderr))
    return _parse_response(stdout, request.uid)


def _fail(hook: dict, failure: _HookFailure) -> None:
    """Apply the failurePolicy: raise Forbidden (Fail, the default) or log and return (Ignore)."""
    message = f'admission hook "{_name(hook)}" failed: {failure}'
    if _spec(hook).get("failurePolicy") == "Ignore":
        logger.warning("%s (failurePolicy Ignore: continuing)", message)
        return
    raise Forbidden(message)


def _collect_warnings(hook: dict, response: dict, warnings: list[str] | None) -> None:
    found = response.get("warnings")
    if not isinstance(found, list):
        return
    for text in found:
        if not isinstance(text, str) or not text.strip():
            continue
        text = _one_line(text, _WARNING_LIMIT)
        if warnings is not None:
            warnings.append(text)
        else:
            logger.warning('admission hook "%s": %s', _name(hook), text)


def _denied(hook: dict, response: dict) -> Forbidden:
    status = response.get("status")
    message = status.get("message") if isinstance(status, dict) else None
    if isinstance(message, str) and message.strip():
        return Forbidden(f'admission hook "{_name(hook)}" denied the request: {_one_line(message, 4096)}')
    return Forbidden(f'admission hook "{_name(hook)}" denied the request without explanation')


_PATCH_ERRORS = (
    (jsonpatch.JsonPatchTestFailed, "a test operation failed"),
    (jsonpatch.JsonPatchConflict, "conflicts with the object"),
    (jsonpointer.JsonPointerException, "its path does not exist"),
    (jsonpatch.InvalidJsonPatch, "is not a valid operation"),
)


def _decode_patch(response: dict) -> list | None:
    patch = response.get("patch")
    if patch in (None, ""):
        return None
    if response.get("patchType") != "JSONPatch":
        raise _HookFailure('wrote invalid output: response.patchType must be "JSONPatch" with a patch')
    try:
        ops = json.loads(base64.b64decode(patch, validate=True)) if isinstance(patch, str) else None
    except (binascii.Error, ValueError):
        ops = None
    if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
        raise _HookFailure("wrote invalid output: response.patch is not base64 of a JSON Patch array")
    return ops


def _apply_patch(obj: dict, ops: list) -> dict:
    """obj patched by ops (a copy); the failure names the op but never the object's content."""
    doc = copy.deepcopy(obj)
    for i, op in enumerate(ops):
        try:
            doc = jsonpatch.apply_patch(doc, [op], in_place=True)
        except Exception as e:  # noqa: BLE001 - any error in untrusted patch is the hook's fault
            why = next((text for cls, text in _PATCH_ERRORS if isinstance(e, cls)), type(e).__name__)
            where = f'{_one_line(str(op.get("op")), 20)} {_one_line(str(op.get("path")), 200)}'
            raise _HookFailure(f"wrote a patch that cannot be applied: operation {i} ({where}): {why}") from None
    if not isinstance(doc, dict):
        raise _HookFailure("wrote a patch that replaces the object with a non-object")
    for key in ("apiVersion", "kind"):
        if doc.get(key) != obj.get(key):
            raise _HookFailure(f"wrote a patch that changes {key}")
    old_meta, new_meta = obj.get("metadata") or {}, doc.get("metadata") or {}
    for key in ("name", "namespace"):
        if isinstance(old_meta, dict) and isinstance(new_meta, dict) and old_meta.get(key) != new_meta.get(key):
            raise _HookFailure(f"wrote a patch that changes metadata.{key}")
    return doc


def run_mutating(hook: dict, request: AdmissionRequest, *, warnings: list[str] | None = None) -> dict | None:
    """Run a MutatingAdmissionHook; the patched object, or None if it changed nothing.

    Raises Forbidden when the hook denies the request, or fails with failurePolicy Fail.
    Warnings the hook returns are appended to `warnings` (logged when it is None).
    """
    try:
        response = _call(hook, request)
        _collect_warnings(hook, response, warnings)
        if not response["allowed"]:
            raise _denied(hook, response)
        ops = _decode_patch(response)
        if not ops or request.obj is None:
            return None
        patched = _apply_patch(request.obj, ops)
        return None if patched == request.obj else patched
    except _HookFailure as failure:
        _fail(hook, failure)
        return None


def run_validating(hook: dict, request: AdmissionRequest, *, warnings: list[str] | None = None) -> None:
    """Run a ValidatingAdmissionHook; raises Forbidden when it denies (or fails, policy Fail).

    A patch in a validating hook's response is ignored.
    """
    try:
        response = _call(hook, request)
    except _HookFailure as failure:
        _fail(hook, failure)
        return
    _collect_warnings(hook, response, warnings)
    if not response["allowed"]:
        raise _denied(hook, response)


def _in_order(hooks: Iterable[dict], kind: str) -> list[dict]:
    return sorted((h for h in hooks if isinstance(h, dict) and h.get("kind") == kind), key=_name)


def run_mutating_hooks(hooks: Iterable[dict], request: AdmissionRequest, *,
                       namespace_labels: dict[str, str] | None,
                       warnings: list[str] | None = None) -> dict | None:
    """Run every matching MutatingAdmissionHook in name order, each on the previous one's output.

    Returns the final object, or None if no hook changed it. Raises Forbidden as run_mutating.
    """
    changed: dict | None = None
    for hook in _in_order(hooks, "MutatingAdmissionHook"):
        if not matches(hook, request, namespace_labels):
            continue
        patched = run_mutating(hook, request, warnings=warnings)
        if patched is not None:
            changed = patched
            request = replace(request, obj=patched)
    return changed


def run_validating_hooks(hooks: Iterable[dict], request: AdmissionRequest, *,
                         namespace_labels: dict[str, str] | None,
                         warnings: list[str] | None = None) -> None:
    """Run every matching ValidatingAdmissionHook, in parallel as Kubernetes does.

    Raises the Forbidden of the first refusing hook in name order.
    """
    chosen = [h for h in _in_order(hooks, "ValidatingAdmissionHook") if matches(h, request, namespace_labels)]
    if not chosen:
        return
    if len(chosen) == 1:
        run_validating(chosen[0], request, warnings=warnings)
        return

    def one(hook: dict) -> tuple[list[str], Forbidden | None]:
        found: list[str] = []
        try:
            run_validating(hook, request, warnings=found)
        except Forbidden as e:
            return found, e
        return found, None

    with ThreadPoolExecutor(max_workers=min(len(chosen), 8), thread_name_prefix="kctl-hook") as pool:
        results = list(pool.map(one, chosen))
    refusal: Forbidden | None = None
    for found, error in results:
        if warnings is not None:
            warnings.extend(found)
        else:
            for text in found:
                logger.warning("admission hook: %s", text)
        refusal = refusal or error
    if refusal is not None:
        raise refusal
