"""`kctl wait`: block until objects meet a condition, are deleted, or a JSONPath has a value.

Also home of `watch_object`, the list-then-watch loop that `kctl rollout status` and
`kctl drain` use too: every check runs on a state the store committed, woken by the API
watch (kctl.apiserver.server.APIServer.watch), never by a polling loop of our own.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Annotated, Callable, Optional

import typer

from kctl.machinery.resources import ResourceType
from kctl.cli import connect

#: this module's commands; kctl.cli.main mounts them (main.COMMANDS)
app = typer.Typer()

#: a check sees the object (None while it does not exist) and says whether the wait is over
Check = Callable[[Optional[dict]], bool]

def fail(message: str, *, code: int = 1) -> typer.Exit:
    """kubectl's `error: ...` line on stderr; raise the result."""
    print(f"error: {message}", file=sys.stderr)
    return typer.Exit(code)


def timeout_exit_code() -> int:
    from kctl.machinery.errors import Timeout

    return Timeout.exit_code


def watch_object(rt: ResourceType, name: str, namespace: str | None, check: Check, *,
                 timeout: float | None) -> bool:
    """Run `check` on the object now and after each change to it, until it says True.

    Returns False when `timeout` seconds (None: no limit) pass first. A watch that falls
    behind the compacted change log re-reads the object and goes on.
    """
    from kctl.machinery.errors import Gone
    from kctl.machinery.selectors import parse_field_selector

    server = connect.api()
    ns = (namespace or "default") if rt.namespaced else None
    by_name = parse_field_selector(f"metadata.name={name}")
    deadline = None if timeout is None else time.monotonic() + timeout

    def left() -> float | None:
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    while True:
        items, rev = server.list(rt, namespace=ns, field_selector=by_name)
        if check(items[0] if items else None):
            return True
        try:
            while left() != 0:
                for type_, obj in server.watch(rt, namespace=ns, since=rev, timeout=left()):
                    rev = int(obj["metadata"]["resourceVersion"])
                    if obj["metadata"].get("name") == name and check(None if type_ == "DELETED" else obj):
                        return True
                    if left() == 0:
                        return False
            return False
        except Gone:
            continue


# --- what to wait for -----------------------------------------------------------------

@dataclass(frozen=True)
class Condition:
    """`--for=condition=TYPE[=STATUS]`: the condition has the status (default True)."""

    type: str
    status: str = "True"

    def met(self, obj: dict | None) -> bool:
        if obj is None:
            return False
        generation = (obj.get("metadata") or {}).get("generation")
        status = obj.get("status") or {}
        for cond in status.get("conditions") or ():
            if not isinstance(cond, dict) or str(cond.get("type", "")).lower() != self.type.lower():
                continue
            if "status" not in cond:
                continue
            observed = cond.get("observedGeneration", status.get("observedGeneration"))
            if isinstance(generation, int) and isinstance(observed, int) and observed < generation:
                return False  # the condition speaks of an older spec
            return str(cond["status"]).lower() == self.status.lower()
        return False


@dataclass(frozen=True)
class Deleted:
    """`--for=delete`: the object is gone (or replaced by one with another uid)."""

    uid: str | None = None

    def met(self, obj: dict | None) -> bool:
        return obj is None or (self.uid is not None and obj["metadata"].get("uid") != self.uid)


@dataclass(frozen=True)
class JSONPathValue:
    """`--for=jsonpath={.status.phase}=Running`; without `=VALUE`, that the path exists."""

    expression: str
    value: str | None

    def met(self, obj: dict | None) -> bool:
        from kctl.output.jsonpath import format_value, parse_template

        if obj is None:
            return False
        found = parse_template(self.expression).values(obj)
        if self.value is None:
            return bool(found)
        if len(found) != 1:
            if len(found) > 1:
                raise ValueError("given jsonpath expression matches more than one value")
            return False
        if isinstance(found[0], (dict, list)):
            raise ValueError("jsonpath leads to a nested object or list which is not supported")
        return format_value(found[0]) == self.value


Waiter = Condition | Deleted | JSONPathValue


def parse_for(text: str) -> Waiter:
    """kubectl's `--for` forms: delete, condition=C[=V], jsonpath=EXPR[=V]; ValueError otherwise."""

    if text.lower() == "delete":
        return Deleted()
    if text.lower().startswith("condition="):
        body = text[len("condition="):]
        ctype, sep, status = body.partition("=")
        if not ctype:
            raise ValueError(f'unrecognized condition: "{text}"')
        return Condition(ctype, status if sep else "True")
    if text.lower().startswith("jsonpath="):
        return _parse_jsonpath(text[len("jsonpath="):], text)
    raise ValueError(f'unrecognized condition: "{text}"')


def _parse_jsonpath(body: str, whole: str) -> JSONPathValue:
    from kctl.machinery.errors import BadRequest
    from kctl.output.jsonpath import parse_template
    from kctl.output.formats import relaxed_jsonpath

    if body.startswith("{"):
        depth, end, quote = 0, -1, ""
        for i, ch in enumerate(body):
            if quote:
                quote = "" if ch == quote else quote
            elif ch in "'\"":
                quote = ch
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    end = i
                    break
        if end < 0:
            raise ValueError(f'unrecognized condition: "{whole}": unclosed brace')
        expr, rest = body[:end + 1], body[end + 1:]
        if rest and not rest.startswith("="):
            raise ValueError(f'unrecognized condition: "{whole}"')
        value = rest[1:] if rest else None
    else:
        expr, sep, value_ = body.partition("=")
        value = value_ if sep else None
    if not expr.strip("{} "):
        raise ValueError(f'jsonpath expression cannot be empty: "{whole}"')
    try:
        relaxed = relaxed_jsonpath(expr)
        parse_template(relaxed)  # a bad expression fails now, not after the first change
    except BadRequest as exc:
        raise ValueError(exc.message) from None
    return JSONPathValue(relaxed, value)


# --- the command ------------------------------------------------------------------------

@app.command()
def wait(
    resources: Annotated[Optional[list[str]], typer.Argument(help="TYPE NAME... or TYPE/NAME...")] = None,
    for_: Annotated[str, typer.Option(
        "--for", help="delete | condition=TYPE[=STATUS] | jsonpath={.path}[=VALUE]")] = "",
    filename: Annotated[list[str], typer.Option("--filename", "-f", help="Wait for what these manifests name.")] = [],
    recursive: Annotated[bool, typer.Option("--recursive", "-R", help="Process directories recursively.")] = False,
    namespace: Annotated[Optional[str], typer.Option("--namespace", "-n",
                                                     help="Namespace (default: default).")] = None,
    selector: Annotated[Optional[str], typer.Option("--selector", "-l", help="Label selector.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every object of the type in the namespace.")] = False,
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A",
                                                 help="With -l/--all: every namespace.")] = False,
    timeout: Annotated[str, typer.Option(
        help="How long to wait for each object (Go duration; 0: check once).")] = "30s",
) -> None:
    """Wait for objects to meet a condition, to be deleted, or for a JSONPath to have a value."""
    from kctl.cli.modify import named_objects

    if not for_:
        raise fail("--for must be set: delete, condition=TYPE[=STATUS] or jsonpath={.path}[=VALUE]")
    try:
        waiter = parse_for(for_)
    except ValueError as exc:
        raise fail(str(exc)) from None
    from kctl.cli.durations import parse_timeout

    seconds = parse_timeout(timeout)
    deleting = isinstance(waiter, Deleted)
    targets = named_objects(resources, filename, recursive, namespace, selector, all_, all_namespaces,
                       ignore_not_found=deleting)
    if not targets:
        if deleting:
            return
        raise fail("no matching resources found")
    for rt, obj in targets:
        meta = obj["metadata"]
        check = Deleted(meta.get("uid")) if deleting else waiter
        try:
            met = watch_object(rt, meta["name"], meta.get("namespace"), check.met, timeout=seconds)
        except ValueError as exc:
            raise fail(str(exc)) from None
        if not met:
            raise fail(f"timed out waiting for the condition on {rt.plural}/{meta['name']}",
                       code=timeout_exit_code())
        print(f"{connect.ref(rt, meta['name'])} condition met")
        sys.stdout.flush()
