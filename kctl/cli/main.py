"""The `kctl` command's entry point: the line to its command, and the error edge.

`main` reads the verb from the line (kctl.cli.argv) and builds the Click command of that verb
alone from the root Typer app (kctl.cli.root, imported only here, on first use), gives it its
Examples and completers, answers shell completion requests, rewrites kubectl-style arguments
(kctl.cli.argv), and runs the command. `kctl version` (with `-o json` and the root options) is
answered without importing Click or Typer at all, by the function the `version` command itself
calls (kctl.cli.version), so its output is the same and its start-up is the interpreter's, the
API's import and one store read. Errors from the API layer (kctl.machinery.errors) and from
reading manifests become one line on stderr and a distinct exit status: `error: ...` for what
the client found itself, `Error from server (Reason): ...` for what the API refused; no
traceback reaches a user (KCTL_DEBUG=1 shows one).

`app`, `COMMANDS`, `command` and `root` are kctl.cli.root's, reachable from here as before
(imported when first asked for).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from kctl import __version__

#: the environment variable of a shell completion request (kctl.cli.completion.COMPLETE_VAR; a test keeps both equal)
COMPLETE_VAR = "_KCTL_COMPLETE"

EXIT_INTERNAL = 1
EXIT_INVALID = 6  # bad input, as the API's Invalid

#: kctl.cli.root's names this module hands out (imported on first use: it imports Click and Typer)
_ROOT_NAMES = {"app": "app", "COMMANDS": "COMMANDS", "command": "command", "root": "root", "_register": "register"}

#: the root options of a line answered without Click -> (their CLIContext field, their environment variable)
_ROOT_OPTIONS = {"--store": ("store_path", "KCTL_STORE"), "--server": ("server_url", "KCTL_SERVER"),
                 "--identity": ("identity", "KCTL_SSH_IDENTITY"), "--kubeconfig": ("kubeconfig", "KCTL_KUBECONFIG"),
                 "--context": ("context", ""),  # "": no environment variable
                 "--etcd-cafile": ("etcd_cafile", "KCTL_ETCD_CAFILE"),
                 "--etcd-certfile": ("etcd_certfile", "KCTL_ETCD_CERTFILE"),
                 "--etcd-keyfile": ("etcd_keyfile", "KCTL_ETCD_KEYFILE"),
                 "--etcd-state-dir": ("etcd_state_dir", "KCTL_ETCD_STATE_DIR")}


def __getattr__(name: str) -> Any:
    """kctl.cli.root's app, command table and tree builder, and kctl.cli.connect's error_line, imported when
    first asked for."""
    if name == "error_line":
        from kctl.cli.connect import error_line

        return error_line
    if name in _ROOT_NAMES:
        from kctl.cli import root

        return getattr(root, _ROOT_NAMES[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    if os.environ.get(COMPLETE_VAR):
        from kctl.cli.completion import respond
        from kctl.cli.root import command

        sys.exit(respond(command(), os.environ[COMPLETE_VAR], complete_var=COMPLETE_VAR))
    program = argv is None  # the program itself, not a caller in a longer-lived process (such as a test)
    args = list(sys.argv[1:] if argv is None else argv)
    if program:
        _collect_less_often()
    try:
        _answer(args)
    finally:
        if program:
            _skip_final_collection()


def _answer(args: list[str]) -> None:
    """Run one command line; what goes wrong becomes one line on stderr and an exit status."""
    from kctl.machinery.errors import APIError

    try:
        if not _answer_without_click(args):
            _run(args)
    except APIError as exc:
        from kctl.cli.connect import error_line

        print(error_line(exc), file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(0)
    except Exception as exc:  # the edge: never a traceback for the user
        errors = sys.modules.get("kctl.manifests.errors")  # only loaded when manifests were read
        if errors is not None and isinstance(exc, errors.ManifestError):
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(EXIT_INVALID)
        if os.environ.get("KCTL_DEBUG"):
            raise
        print(f"error: internal error: {type(exc).__name__}: {exc} (set KCTL_DEBUG=1 for a traceback)",
              file=sys.stderr)
        sys.exit(EXIT_INTERNAL)


#: the young generation's allocation threshold of a kctl process (CPython's default: 700)
GC_THRESHOLD = 10_000


def _collect_less_often() -> None:
    """Collect the young generation every GC_THRESHOLD allocations instead of every 700.

    A command decodes and prints thousands of small dicts and lists, none of them garbage
    until it ends: the default threshold scans them again and again (about 5% of a `kctl get`
    of 1,000 objects). The older generations keep their ratios (10, 10), so a long-running
    `kctl daemon` still collects its cycles, only in larger steps. Collection is paused for the
    start-up (`_pause_collection`) and resumed before the command runs (`_resume_collection`).
    """
    import gc

    gc.set_threshold(GC_THRESHOLD, 10, 10)
    _pause_collection()


#: verbs that run with collection paused to the end: they make no garbage cycles (`get -w` resumes it for its watch)
_NO_COLLECTION_VERBS = frozenset({"get", "describe"})
#: whether this program paused garbage collection for its start-up (`_pause_collection`)
_paused = {"collection": False}


def _pause_collection() -> None:
    """No garbage collection during start-up: importing Click, Typer and the API makes modules, classes and
    functions that live as long as the process, and collecting over them took 5-6 ms of a `kctl get`."""
    import gc

    gc.disable()
    _paused["collection"] = True


def _resume_collection() -> None:
    """Before the command runs: what start-up made is frozen (never scanned again) and collection resumes."""
    if _paused["collection"]:
        import gc

        _paused["collection"] = False
        gc.freeze()
        gc.enable()


def _skip_final_collection() -> None:
    """Spare the exiting interpreter its last full garbage collection over every object the command made.

    Teardown is otherwise as usual (atexit handlers, threads joined, files flushed); the objects
    are freed all the same. This saves `kctl apply` and `kctl get` of many objects 20-40 ms of CPU.
    """
    import gc

    gc.freeze()


def _run(args: list[str]) -> None:
    """Build the Click command the line names and run it (Click's usage errors exit with one line)."""
    from kctl.apiserver.audit import name_command
    from kctl.cli.argv import normalise, verb_of
    from kctl.cli.root import command
    from kctl.cli.usage import one_line_usage_errors

    verb = verb_of(args)
    root = command(verb=verb)
    one_line_usage_errors(command_path=" ".join(["kctl", *filter(None, [verb])]))
    args = normalise(root, args)
    name_command(args)  # the audit log names this command as the client of its writes
    if verb not in _NO_COLLECTION_VERBS:
        _resume_collection()
    root.main(args=args, prog_name="kctl", standalone_mode=True)


def _answer_without_click(args: list[str]) -> bool:
    """Answer `kctl [--store S] [--server U] [--identity K] version [-o json]` without Click; False for any other line.

    The root options resolve as Click resolves them for the root callback (the last one given on
    the line, else its environment variable; empty is unset), and the store is opened as the
    `version` command opens it (an explicitly named store must exist).
    """
    from kctl.cli.argv import plain_version

    line = plain_version(args)
    if line is None:
        return False
    given, output = line
    from kctl.apiserver.audit import name_command
    from kctl.cli.connect import CLIContext, connect
    from kctl.cli.version import print_version

    fields = {field: (given[name] if name in given else os.environ.get(env)) or None
              for name, (field, env) in _ROOT_OPTIONS.items()}
    name_command(args)
    print_version(connect(CLIContext(**fields), creating=False), output=output)
    return True


__all__ = ["COMPLETE_VAR", "main", "__version__"]  # and, on first use, kctl.cli.root's names and error_line
