"""Command lines as kubectl takes them, rewritten into the form Click parses. Called by kctl.cli.main.

kubectl (pflag) accepts what Click does not; `normalise` rewrites the arguments first, by looking
at the resolved Click command tree (so it knows every command's own flags):

- boolean flags with a value: `--wait=false`, `--no-headers=true`, `-A=true` become `--wait`,
  `--no-wait` or nothing (a false flag that has no `--no-` form is its default);
- the root's options (`--store`, `--server`, `--identity`) anywhere on the line move before the
  verb, unless the command has an option of that name itself (`kctl daemon --store`);
- `-n/--namespace NS` given before the verb moves after it (`kctl -n demo get pods`).

Nothing after `--` is touched. A line whose verb is not known is returned as it is, for Click
to report.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Click is imported by the tree these functions are given, not by this module
    import click

#: spellings pflag takes for a boolean flag's value (strconv.ParseBool)
TRUE = frozenset({"1", "t", "true", "yes", "y", "on"})
FALSE = frozenset({"0", "f", "false", "no", "n", "off"})

#: values of --dry-run; a bare --dry-run followed by none of them is kubectl's deprecated `--dry-run=client`
DRY_RUN_VALUES = frozenset({"client", "server", "none"})
#: the root's options that take a value (kctl.cli.main.root), as `verb_of` skips them
ROOT_VALUE_OPTIONS = ("--store", "--server", "--identity", "--kubeconfig", "--context", "--etcd-cafile",
                      "--etcd-certfile", "--etcd-keyfile", "--etcd-state-dir")
#: options a user may put before the verb that belong to the command (kubectl's -n)
_COMMAND_OPTIONS_BEFORE_VERB = ("-n", "--namespace")


def normalise(root: click.Group, argv: list[str]) -> list[str]:
    """`argv` (without the program name) rewritten for Click; see the module docstring."""
    path, positions = _command_path(root, argv)
    if not path:
        return list(argv)
    leaf = path[-1]
    root_options = _value_options(root)
    leaf_options = {name: opt for opt in _options(leaf) for name in (*opt.opts, *opt.secondary_opts)}
    first_verb = positions[0]
    head: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            rest.extend(argv[i:])
            break
        if i in positions:
            i += 1
            continue
        name, eq, value = token.partition("=")
        before_verb = i < first_verb
        if name in root_options and (before_verb or name not in leaf_options):
            if eq:
                head.append(token)
                i += 1
            else:
                head.extend(argv[i:i + 2])
                i += 2
            continue
        option = leaf_options.get(name) if token.startswith("-") and token != "-" else None
        if option is None and before_verb and name in _COMMAND_OPTIONS_BEFORE_VERB:
            i += 1 if eq else 2  # kubectl's global -n, ignored by a command without namespaces
            continue
        if option is None:
            rest.append(token)
            i += 1
            continue
        if token == "--dry-run" and (i + 1 >= len(argv) or argv[i + 1] not in DRY_RUN_VALUES):
            # kubectl's deprecated bare --dry-run (pflag's NoOptDefVal) means client
            print("warning: --dry-run is deprecated and can be replaced with --dry-run=client.", file=sys.stderr)
            rest.append("--dry-run=client")
            i += 1
            continue
        if _is_bool_flag(option) and eq:
            rest.extend(_bool_flag(option, name, value, token))
            i += 1
            continue
        takes_value = not option.is_flag and not option.count
        if takes_value and eq and not name.startswith("--"):
            rest.extend([name, value])  # pflag's `-n=demo` is `-n demo`; Click would read "=demo"
            i += 1
            continue
        width = 1 if eq or not takes_value else 1 + max(option.nargs, 1)
        rest.extend(argv[i:i + width])
        i += width
    return head + [argv[p] for p in positions] + rest


def verb_of(argv: list[str]) -> str | None:
    """The verb of a command line, found before any Click tree is built (None if unsure: build them all).

    Only the root's options (`--store`, `--server`, `--identity`, with their values) and kubectl's
    `-n/--namespace NS` may stand before it; any other option there, `--`, or no verb gives None.
    """
    takes_value = (*ROOT_VALUE_OPTIONS, *_COMMAND_OPTIONS_BEFORE_VERB)
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "-" or not token.startswith("-"):
            return token
        name, eq, _ = token.partition("=")
        if token == "--" or name not in takes_value:
            return None
        i += 1 if eq else 2
    return None


#: the spellings of `kctl version`'s only option, each with the one value answered without Click
_VERSION_OUTPUT = {("-o", "json"), ("--output", "json")}
_VERSION_OUTPUT_JOINED = frozenset({"-ojson", "-o=json", "--output=json"})


def plain_version(argv: list[str]) -> tuple[dict[str, str], str | None] | None:
    """For `kctl [ROOT OPTIONS] version [-o json]`: (the root options given, by name; the output).

    The root options (`--store`, `--server`, `--identity`, as `--opt VALUE` or `--opt=VALUE`) may
    stand anywhere on the line, as `normalise` lets them; the last of a name counts, as in Click.
    Any other line (help, another option or value, an argument, `-n`, `--`) gives None: the full
    Click path answers it.
    """
    options: dict[str, str] = {}
    verb_seen = False
    output: str | None = None
    i = 0
    while i < len(argv):
        token = argv[i]
        name, eq, value = token.partition("=")
        if name in ROOT_VALUE_OPTIONS:
            if not eq:
                if i + 1 >= len(argv):
                    return None
                value = argv[i + 1]
                i += 1
            options[name] = value
        elif token == "version" and not verb_seen:
            verb_seen = True
        elif verb_seen and output is None and token in _VERSION_OUTPUT_JOINED:
            output = "json"
        elif verb_seen and output is None and i + 1 < len(argv) and (token, argv[i + 1]) in _VERSION_OUTPUT:
            output = "json"
            i += 1
        else:
            return None
        i += 1
    return (options, output) if verb_seen else None


def _command_path(root: click.Group, argv: list[str]) -> tuple[list[click.Command], list[int]]:
    """The commands named on the line (verb, sub-command) and where their names stand."""
    import click

    value_options = set(_value_options(root)) | set(_COMMAND_OPTIONS_BEFORE_VERB)
    path: list[click.Command] = []
    positions: list[int] = []
    group: click.Command = root
    i = 0
    while i < len(argv) and isinstance(group, click.Group):
        token = argv[i]
        if token == "--":
            break
        if token.startswith("-") and token != "-":
            name, eq, _ = token.partition("=")
            known = value_options | set(_value_options(group))
            i += 2 if name in known and not eq else 1
            continue
        command = group.commands.get(token)
        if command is None:
            break
        path.append(command)
        positions.append(i)
        group = command
        i += 1
    return path, positions


def _options(command: click.Command) -> list[click.Option]:
    import click

    return [p for p in command.params if isinstance(p, click.Option)]


def _value_options(command: click.Command) -> dict[str, click.Option]:
    """The options of `command` that take a value, by every name they have."""
    return {name: opt for opt in _options(command) if not opt.is_flag and not opt.count for name in opt.opts}


def _is_bool_flag(option: click.Option) -> bool:
    return bool(option.is_flag and option.is_bool_flag)


def _bool_flag(option: click.Option, name: str, value: str, token: str) -> list[str]:
    """`--flag=VALUE` as the bare flag, its `--no-` form, or nothing; unchanged if VALUE is no bool."""
    text = value.strip().lower()
    if text in TRUE:
        wanted = True
    elif text in FALSE:
        wanted = False
    else:
        return [token]  # Click says the flag takes no value; the user sees the flag named
    if name in option.secondary_opts:
        wanted = not wanted
    if wanted:
        return [option.opts[0]]
    if option.secondary_opts:
        return [option.secondary_opts[0]]
    return []


__all__ = ["FALSE", "ROOT_VALUE_OPTIONS", "TRUE", "normalise", "plain_version", "verb_of"]
