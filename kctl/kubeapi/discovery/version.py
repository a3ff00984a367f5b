"""`/version` and the health endpoints `/healthz`, `/livez`, `/readyz` of the HTTPS API, as kube-apiserver answers.

kctl.kubeapi.app's dispatch asks `handle(request, ctx)` for every non-resource path (None: not
one of these). `/version` names Kubernetes 1.32 (the minor version the machine's kubectl speaks,
so it prints no skew warning) with kctl's own version as semver build metadata
(`v1.32.0+kctl.0.1.0`). The health endpoints run their checks (`ping`, `log`, `etcd`: the store
answers, `shutdown` for readyz) and answer `ok` (200) or, when one fails, what kube-apiserver
prints for `?verbose` (500); `?verbose` lists every check, `?exclude=NAME` skips one, and
`/readyz/NAME` runs one alone.
"""

from __future__ import annotations

import platform
import sys
from typing import Any, Callable

from aiohttp import web

__all__ = ["KUBERNETES_VERSION", "git_version", "handle", "version_info"]

#: the Kubernetes release whose API kctl serves (kubectl warns when its minor differs by more than one)
KUBERNETES_VERSION = (1, 32, 0)
_HEALTH_PATHS = ("/healthz", "/livez", "/readyz")
_MACHINES = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "i686": "386"}
#: build time of the served version (kctl has no build step; the date of the Kubernetes release it speaks)
_BUILD_DATE = "2024-12-11T00:00:00Z"


def git_version() -> str:
    """`v1.32.0+kctl.0.1.0`: Kubernetes' version with kctl's as build metadata (semver keeps kubectl's parse)."""
    from kctl import __version__

    major, minor, patch = KUBERNETES_VERSION
    return f"v{major}.{minor}.{patch}+kctl.{__version__}"


def version_info() -> dict[str, str]:
    """The body of /version (apimachinery's version.Info: every field set, as clients require them)."""
    major, minor, _ = KUBERNETES_VERSION
    machine = platform.machine().lower()
    return {
        "major": str(major),
        "minor": str(minor),
        "gitVersion": git_version(),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": _BUILD_DATE,
        "goVersion": f"python{platform.python_version()}",
        "compiler": sys.implementation.name,
        "platform": f"{sys.platform}/{_MACHINES.get(machine, machine)}",
    }


def _checks(ctx: Any, endpoint: str) -> list[tuple[str, Callable[[], None]]]:
    """The named checks of one endpoint; each returns None or raises what makes it fail."""

    def store() -> None:
        ctx.api.revision()

    def shutdown() -> None:
        stopping = getattr(ctx, "stopping", None)
        if stopping is not None and stopping.is_set():
            raise RuntimeError("process is shutting down")

    checks: list[tuple[str, Callable[[], None]]] = [("ping", lambda: None), ("log", lambda: None),
                                                    ("etcd", store)]
    if endpoint == "/readyz":
        checks.append(("shutdown", shutdown))
    return checks


def _run_checks(checks: list[tuple[str, Callable[[], None]]]) -> list[tuple[str, str | None]]:
    """(name, None when it passed, else the reason it failed) for each check."""
    results: list[tuple[str, str | None]] = []
    for name, check in checks:
        try:
            check()
        except Exception as exc:  # noqa: BLE001 - a failed check is a result, never a crash
            results.append((name, type(exc).__name__ if name == "etcd" else str(exc) or type(exc).__name__))
        else:
            results.append((name, None))
    return results


def _text(body: str, *, status: int = 200) -> web.Response:
    return web.Response(status=status, text=body, content_type="text/plain",
                        headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache, private"})


async def _health(request: web.Request, ctx: Any, endpoint: str, single: str | None) -> web.Response:
    checks = _checks(ctx, endpoint)
    if single is not None:
        chosen = [check for check in checks if check[0] == single]
        if not chosen:
            return _text("404 page not found\n", status=404)
        (_, failed), = await ctx.run(_run_checks, chosen)
        if failed is None:
            return _text("ok")
        return _text(f"internal server error: {single} failed: reason withheld\n", status=500)
    excluded = set(request.query.getall("exclude", []))
    results = await ctx.run(_run_checks, [check for check in checks if check[0] not in excluded])
    failed = any(reason is not None for _, reason in results)
    word = endpoint.lstrip("/")
    if not failed and "verbose" not in request.query:
        return _text("ok")
    lines = [f"[+]{name} ok" if reason is None else f"[-]{name} failed: reason withheld" for name, reason in results]
    lines += [f"[+]{name} excluded: ok" for name in sorted(excluded) if any(c[0] == name for c in checks)]
    lines.append(f"{word} check failed" if failed else f"{word} check passed")
    return _text("\n".join(lines) + "\n", status=500 if failed else 200)


async def handle(request: web.Request, ctx: Any) -> web.StreamResponse | None:
    """The response to /version or a health path, or None for any other path."""
    path = request.path
    if request.method not in ("GET", "HEAD"):
        return None
    if path.rstrip("/") == "/version":
        return web.json_response(version_info(), dumps=_dumps)
    for endpoint in _HEALTH_PATHS:
        if path == endpoint or path == endpoint + "/":
            return await _health(request, ctx, endpoint, None)
        if path.startswith(endpoint + "/"):
            return await _health(request, ctx, endpoint, path[len(endpoint) + 1:])
    return None


def _dumps(value: Any) -> str:
    import json

    return json.dumps(value, indent=2)
