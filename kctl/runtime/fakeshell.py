"""A tiny shell for MemoryRuntime: what a command line prints, how long it runs, how it exits.

kctl.runtime.memory calls `interpret` when a container starts (its output goes to the log
at the time it is written) and for `exec` without a test rule, and `ignores_sigterm` when
a container is stopped. It knows `echo` (also `-n`, `>&2`), `cat` (stdin, or files the
caller's `read` knows), `pwd`, `true`, `false`, `sleep S`, `exit N` and `trap` (skipped),
in `sh -c` scripts joined by `;`, `&&`, `||`, with `$VAR`/`${VAR}` from the env. Anything
else gives None (or, with `partial`, what ran before it). It is no shell: quoting is
shlex's, single quotes do not stop `$` expansion, and there are no pipes or redirections
to files. The runtime contract suite (tests/integration/contract) keeps it honest against
busybox under Podman.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

TRUE = ("true", "/bin/true", "/usr/bin/true")
FALSE = ("false", "/bin/false", "/usr/bin/false")
_SHELLS = ("sh", "ash", "bash", "dash")
_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
_SEPARATORS = (";", "&&", "||")


@dataclass(frozen=True)
class Script:
    """What a command line does (from `interpret`): output at offsets, then an exit or not."""

    output: tuple[tuple[float, int, bytes], ...]  # (seconds after the start, 1 stdout | 2 stderr, data)
    exit_code: int | None                        # None: still running at the end (`sleep infinity`)
    seconds: float                               # how long it runs before it exits
    complete: bool = True                        # False: stopped at a command it does not know (partial)


def interpret(argv: Sequence[str], *, env: dict[str, str] | None = None, stdin: bytes = b"",
              workdir: str = "/", read: Callable[[str], bytes | None] | None = None,
              partial: bool = False) -> Script | None:
    """Run argv (or its `sh -c` script) as a shell would, if every command in it is one this module
    knows (module docstring); None otherwise, or with `partial` what ran up to the first command it
    does not know (complete=False). `read` gives a file's content (None: unknown)."""
    if not argv:
        return None
    if posixpath.basename(argv[0]) in _SHELLS and len(argv) >= 3 and argv[1] == "-c":
        try:
            lexer = shlex.shlex(argv[2], posix=True, punctuation_chars=";&|>")
            lexer.whitespace_split = True
            tokens = [_expand(token, env or {}) for token in lexer]
        except ValueError:
            return None
    else:
        tokens = list(argv)
    output: list[tuple[float, int, bytes]] = []
    seconds, code, operator = 0.0, 0, ";"
    for words in _statements(tokens):
        if words[0] in _SEPARATORS:
            operator = words[0]
            continue
        if (operator == "&&" and code != 0) or (operator == "||" and code == 0):
            continue
        stream = 1
        if words[-2:] == [">&", "2"]:
            words, stream = words[:-2], 2
        name, args = (posixpath.basename(words[0]), words[1:]) if words else ("", [])
        if not words or any(word in (">", ">&", "&", "|") for word in words):
            name = ""  # a redirection or pipeline it does not follow
        if name == "trap":
            continue
        if name == "echo":
            newline = not (args[:1] == ["-n"])
            text = " ".join(args[1:] if not newline else args) + ("\n" if newline else "")
            output.append((seconds, stream, text.encode()))
            code = 0
        elif name == "pwd":
            output.append((seconds, stream, (workdir or "/").encode() + b"\n"))
            code = 0
        elif name == "cat":
            contents = [read(path) if read is not None else None for path in args] if args else [stdin]
            if any(content is None for content in contents):
                return Script(tuple(output), None, seconds, complete=False) if partial else None
            output.append((seconds, stream, b"".join(content or b"" for content in contents)))
            code = 0
        elif words[0] in TRUE or words[0] in FALSE:
            code = 0 if words[0] in TRUE else 1
        elif name == "exit" and len(args) <= 1 and all(arg.isdigit() for arg in args):
            return Script(output=tuple(output), exit_code=int(args[0]) if args else code, seconds=seconds)
        elif name == "sleep" and args == ["infinity"]:
            return Script(output=tuple(output), exit_code=None, seconds=seconds)
        elif name == "sleep" and len(args) == 1 and re.fullmatch(r"\d+(?:\.\d+)?", args[0]):
            seconds += float(args[0])
            code = 0
        else:
            return Script(tuple(output), None, seconds, complete=False) if partial else None
    return Script(output=tuple(output), exit_code=code, seconds=seconds)


def _expand(token: str, env: dict[str, str]) -> str:
    return _VARIABLE.sub(lambda match: env.get(match[1] or match[2], ""), token)


def _statements(tokens: list[str]) -> Iterator[list[str]]:
    """The commands of a token list, with each separator yielded alone between them."""
    words: list[str] = []
    for token in tokens:
        if token in _SEPARATORS:
            if words:
                yield words
            yield [token]
            words = []
        else:
            words.append(token)
    if words:
        yield words


def ignores_sigterm(argv: Sequence[str]) -> bool:
    """Whether a container's PID 1 running argv dies only by SIGKILL: a shell or `sleep` without a trap."""
    return bool(argv) and posixpath.basename(argv[0]) in (*_SHELLS, "sleep") and not any(
        "trap" in part for part in argv)


__all__ = ["FALSE", "TRUE", "Script", "ignores_sigterm", "interpret"]
