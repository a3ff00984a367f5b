"""Running a parsed Go template over decoded JSON: text/template's exec, with Go's execution error messages.

`GoTemplate(source, nodes).execute(data)` walks the tree of kctl.output.gotemplate.nodes with
`.` = data: fields (a missing key is `<no value>`), variables and their scopes, pipelines and
function calls (kctl.output.gotemplate.funcs), `if`/`with`/`range` (maps in key order), `break`
and `continue`. Errors are ExecErrors worded `template: output:LINE:COL: executing "output" at
<NODE>: ...`. Called by kctl.output.gotemplate.parse (which returns a GoTemplate).
"""

from __future__ import annotations

from typing import Any

from kctl.output.gotemplate.errors import NAME, ExecError
from kctl.output.gotemplate.funcs import ARITY, FUNCS, LAZY, FuncError
from kctl.output.gotemplate.nodes import Action, Branch, Command, Field, Ident, Literal, Loop, Node, Pipeline, Text
from kctl.output.gotemplate.values import MISSING, go_sprint_value, truth

__all__ = ["GoTemplate"]


class _Break(Exception):
    """`{{break}}`: leaves the innermost range."""


class _Continue(Exception):
    """`{{continue}}`: goes on with the innermost range's next element."""


class _State:
    """One execution: the source (for error positions), the variables in scope and the output so far."""

    def __init__(self, source: str, root: Any) -> None:
        self.source = source
        self.vars: list[tuple[str, Any]] = [("$", root)]
        self.out: list[str] = []

    def fail(self, node: Any, message: str) -> ExecError:
        pos = node.pos
        line = 1 + self.source.count("\n", 0, pos)
        col = pos - (self.source.rfind("\n", 0, pos) + 1)
        return ExecError(f"template: {NAME}:{line}:{col}: executing \"{NAME}\" at <{node}>: {message}")

    def var(self, name: str) -> Any:
        for key, value in reversed(self.vars):
            if key == name:
                return value
        return MISSING

    def set_var(self, name: str, value: Any) -> None:
        for i in range(len(self.vars) - 1, -1, -1):
            if self.vars[i][0] == name:
                self.vars[i] = (name, value)
                return


def _field_chain(state: _State, node: Any, value: Any, names: tuple[str, ...], has_args: bool) -> Any:
    for i, name in enumerate(names):
        if value is MISSING:
            return MISSING
        if isinstance(value, dict):
            value = value.get(name, MISSING)
            continue
        if value is None:
            raise state.fail(node, f"nil pointer evaluating interface {{}}.{name}")
        raise state.fail(node, f"can't evaluate field {name} in type interface {{}}")
    return value


def _eval_arg(state: _State, dot: Any, arg: Any) -> Any:
    if isinstance(arg, Literal):
        return arg.value
    if isinstance(arg, Field):
        return _eval_field(state, dot, arg, has_args=False)
    if isinstance(arg, Pipeline):
        return _eval_pipeline(state, dot, arg)
    if isinstance(arg, Ident):
        return _call(state, dot, arg, [], MISSING, node=arg)
    raise state.fail(arg, "can't handle argument")


def _eval_field(state: _State, dot: Any, node: Field, *, has_args: bool) -> Any:
    if node.base is not None:
        start = _eval_pipeline(state, dot, node.base)
    elif node.var is not None:
        start = state.var(node.var)
    else:
        start = dot
    return _field_chain(state, node, start, node.names, has_args)


def _call(state: _State, dot: Any, ident: Ident, args: list, final: Any, *, node: Any) -> Any:
    name = ident.name
    if name in LAZY:
        values = list(args) + ([final] if final is not MISSING else [])
        if not values:
            raise state.fail(node, f"wrong number of args for {name}: want at least 1 got 0")
        result: Any = MISSING
        for v in values:
            result = v if not isinstance(v, Node) else _eval_arg(state, dot, v)
            if (name == "and") != truth(result):
                return result
        return result
    evaluated = [_eval_arg(state, dot, a) for a in args]
    if final is not MISSING:
        evaluated.append(final)
    want = ARITY.get(name)
    if want is not None and len(evaluated) != want:
        raise state.fail(node, f"wrong number of args for {name}: want {want} got {len(evaluated)}")
    if name in ("index", "exists", "printf") and not evaluated:
        raise state.fail(node, f"wrong number of args for {name}: want at least 1 got 0")
    try:
        return FUNCS[name](*evaluated)
    except FuncError as exc:
        raise state.fail(node, f"error calling {name}: {exc}") from None


def _eval_command(state: _State, dot: Any, cmd: Command, final: Any) -> Any:
    first, rest = cmd.args[0], cmd.args[1:]
    if isinstance(first, Ident):
        return _call(state, dot, first, rest, final, node=cmd)
    if rest or final is not MISSING:
        if isinstance(first, Field) and first.names:
            raise state.fail(first, f"{first.names[-1]} is not a method but has arguments")
        raise state.fail(first, f"can't give argument to non-function {first}")
    return _eval_arg(state, dot, first)


def _eval_pipeline(state: _State, dot: Any, pipe: Pipeline) -> Any:
    value: Any = MISSING
    for cmd in pipe.cmds:
        value = _eval_command(state, dot, cmd, value)
    for name in pipe.decl:
        if pipe.assign:
            state.set_var(name, value)
        else:
            state.vars.append((name, value))
    return value


def _walk(state: _State, dot: Any, nodes: list) -> None:
    for node in nodes:
        if isinstance(node, Text):
            state.out.append(node.text)
        elif isinstance(node, Action):
            value = _eval_pipeline(state, dot, node.pipe)
            if not node.pipe.decl:
                state.out.append("<no value>" if value is None else go_sprint_value(value))
        elif isinstance(node, Loop):
            raise _Break() if node.kind == "break" else _Continue()
        elif isinstance(node, Branch):
            mark = len(state.vars)
            try:
                _branch(state, dot, node)
            finally:
                del state.vars[mark:]


def _branch(state: _State, dot: Any, node: Branch) -> None:
    if node.kind == "range":
        pipe = Pipeline(node.pipe.pos, [], False, node.pipe.cmds)
        value = _eval_pipeline(state, dot, pipe)
        if isinstance(value, dict):
            pairs = [(k, value[k]) for k in sorted(value)]
        elif isinstance(value, list):
            pairs = list(enumerate(value))
        elif value is None or value is MISSING:
            pairs = []
        else:
            last = node.pipe.cmds[-1]
            raise state.fail(last.args[0] if len(last.args) == 1 else last,
                             f"range can't iterate over {go_sprint_value(value)}")
        if not pairs:
            if node.other is not None:
                _walk(state, dot, node.other)
            return
        for key, elem in pairs:
            mark = len(state.vars)
            if len(node.pipe.decl) == 1:
                state.vars.append((node.pipe.decl[0], elem))
            elif len(node.pipe.decl) == 2:
                state.vars.append((node.pipe.decl[0], key))
                state.vars.append((node.pipe.decl[1], elem))
            try:
                _walk(state, elem, node.body)
            except _Continue:
                pass
            except _Break:
                break
            finally:
                del state.vars[mark:]
        return
    value = _eval_pipeline(state, dot, node.pipe)
    if truth(value):
        _walk(state, value if node.kind == "with" else dot, node.body)
    elif node.other is not None:
        _walk(state, dot, node.other)


class GoTemplate:
    """A parsed template; `execute(data)` renders it (ExecError on failure)."""

    def __init__(self, source: str, nodes: list) -> None:
        self.source = source
        self._nodes = nodes

    def execute(self, data: Any) -> str:
        state = _State(self.source, data)
        try:
            _walk(state, data, self._nodes)
        except RecursionError:
            raise ExecError(f"template: {NAME}: exceeded maximum template depth") from None
        return "".join(state.out)
