"""Go template text -> parse tree: text/template's lexer and parser, with Go's parse error messages.

`Parser(source).parse()` splits the text into text and `{{actions}}` (trim markers `{{-`/`-}}`,
`{{/* comments */}}`), tokenises each action (fields, variables, literals, `|`, `:=`, parentheses)
and builds the nodes of kctl.output.gotemplate.nodes: pipelines, `if`/`else if`/`else`, `range`
(with `break`, `continue`), `with`; variables must be declared, functions must exist
(kctl.output.gotemplate.funcs). Called by kctl.output.gotemplate.parse.
"""

from __future__ import annotations

import re
from typing import Any

from kctl.output.gotemplate.errors import NAME, ParseError
from kctl.output.gotemplate.funcs import FUNCS, LAZY
from kctl.output.gotemplate.nodes import Action, Branch, Command, Field, Ident, Literal, Loop, Pipeline, Text
from kctl.output.gotemplate.values import Int

__all__ = ["Parser"]

# --- lexing ---------------------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<declare>:=)
  | (?P<assign>=)
  | (?P<pipe>\|)
  | (?P<lparen>\()
  | (?P<rparen>\))
  | (?P<comma>,)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<raw>`[^`]*`)
  | (?P<char>'(?:[^'\\\n]|\\.)+')
  | (?P<number>[+-]?(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|(?:\d[\d_]*)?\.?\d[\d_]*(?:[eE][+-]?\d+)?))
  | (?P<var>\$[A-Za-z0-9_]*)
  | (?P<field>(?:\.[A-Za-z_][A-Za-z0-9_]*)+|\.)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
""", re.VERBOSE)


def _go_unquote(text: str) -> str:
    if text.startswith("`"):
        return text[1:-1]
    body = text[1:-1]
    out = []
    i = 0
    simple = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\",
              '"': '"', "'": "'"}
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1] if i + 1 < len(body) else ""
        if nxt in simple:
            out.append(simple[nxt])
            i += 2
        elif nxt == "x":
            out.append(chr(int(body[i + 2:i + 4], 16)))
            i += 4
        elif nxt == "u":
            out.append(chr(int(body[i + 2:i + 6], 16)))
            i += 6
        elif nxt == "U":
            out.append(chr(int(body[i + 2:i + 10], 16)))
            i += 10
        elif nxt in "01234567":
            out.append(chr(int(body[i + 1:i + 4], 8)))
            i += 4
        else:
            raise ValueError(f"invalid syntax: {text}")
    return "".join(out)


def _go_number(text: str) -> int | float:
    clean = text.replace("_", "")
    try:
        return int(clean, 0)
    except ValueError:
        pass
    if clean.lstrip("+-").isdigit():
        return int(clean)
    return float(clean)


# --- parser ---------------------------------------------------------------------------

class Parser:
    """One template's parser: `parse()` returns its nodes or raises ParseError; `vars` holds the declared
    variables, one list per scope."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.vars: list[list[str]] = [["$"]]

    def fail(self, pos: int, message: str) -> ParseError:
        line = 1 + self.source.count("\n", 0, pos)
        return ParseError(f"template: {NAME}:{line}: {message}")

    # Split into text and action items, applying trim markers.
    def items(self) -> list[tuple[str, int, str]]:
        src = self.source
        out: list[tuple[str, int, str]] = []
        pos = 0
        trim_next = False
        while True:
            start = src.find("{{", pos)
            text = src[pos:] if start < 0 else src[pos:start]
            left_trim = start >= 0 and src[start + 2:start + 3] == "-" and src[start + 3:start + 4] in (
                " ", "\t", "\r", "\n")
            if trim_next:
                text = text.lstrip(" \t\r\n")
            if left_trim:
                text = text.rstrip(" \t\r\n")
            if text:
                out.append(("text", pos, text))
            if start < 0:
                return out
            inner_start = start + (4 if left_trim else 2)
            # find the closing }} outside quotes
            i = inner_start
            end = -1
            comment = src.startswith("/*", inner_start)
            if comment:
                close = src.find("*/", inner_start)
                if close < 0:
                    raise self.fail(start, "unclosed comment")
                i = close + 2
            while i < len(src):
                ch = src[i]
                if ch in "\"'`":
                    j = i + 1
                    while j < len(src) and src[j] != ch:
                        if src[j] == "\\" and ch != "`":
                            j += 1
                        if src[j] == "\n" and ch != "`":
                            raise self.fail(i, "unterminated quoted string" if ch == '"'
                                            else "unterminated character constant")
                        j += 1
                    if j >= len(src):
                        raise self.fail(i, "unterminated quoted string" if ch == '"' else
                                        "unterminated raw quoted string" if ch == "`"
                                        else "unterminated character constant")
                    i = j + 1
                    continue
                if src.startswith(" -}}", i) or src.startswith("\t-}}", i) or src.startswith("\n-}}", i):
                    end, trim_next, close_len = i, True, 4
                    break
                if src.startswith("}}", i):
                    end, trim_next, close_len = i, False, 2
                    break
                i += 1
            if end < 0:
                raise self.fail(start, "unclosed action")
            body = src[inner_start:end]
            if comment:
                stripped = body.strip()
                if not (stripped.startswith("/*") and stripped.endswith("*/")):
                    raise self.fail(start, "comment ends before closing delimiter")
            else:
                out.append(("action", inner_start, body))
            pos = end + close_len

    def parse(self) -> list:
        self.stream = self.items()
        self.index = 0
        nodes, end = self.parse_list(top=True)
        return nodes

    def parse_list(self, *, top: bool = False, in_range: bool = False) -> tuple[list, tuple[str, int, str] | None]:
        nodes: list = []
        while self.index < len(self.stream):
            kind, pos, body = self.stream[self.index]
            self.index += 1
            if kind == "text":
                nodes.append(Text(pos, body))
                continue
            words = body.strip()
            keyword = re.match(r"[A-Za-z]+", words)
            word = keyword.group(0) if keyword else ""
            rest = words[len(word):] if word else words
            if word in ("end", "else") and (not rest or not rest[0].isalnum()):
                if top:
                    raise self.fail(pos, f"unexpected {{{{{word}}}}}")
                return nodes, (word, pos, rest.strip())
            if word in ("if", "range", "with") and (not rest or not rest[0].isalnum()):
                rest_pos = pos + len(body) - len(body.lstrip()) + len(word)
                nodes.append(self.parse_branch(word, rest_pos, rest, in_range=in_range))
                continue
            if word in ("break", "continue") and (not rest or not rest[0].isalnum()):
                if not in_range:
                    raise self.fail(pos, f"{{{{{word}}}}} outside {{{{range}}}}")
                if rest.strip():
                    raise self.fail(pos, f"unexpected {rest.strip()!r} in {word}")
                nodes.append(Loop(pos, word))
                continue
            if word in ("define", "template", "block") and (not rest or not rest[0].isalnum()):
                raise self.fail(pos, f"{{{{{word}}}}} is not supported by kctl's go-template")
            pipe = self.parse_pipeline(body, pos, context="command")
            nodes.append(Action(pos, pipe))
        if not top:
            raise self.fail(len(self.source), "unexpected EOF")
        return nodes, None

    def parse_branch(self, kind: str, pos: int, rest: str, *, in_range: bool) -> Branch:
        self.vars.append([])
        pipe = self.parse_pipeline(rest, pos, context=kind, allow_range_decl=kind == "range")
        body, end = self.parse_list(in_range=in_range or kind == "range")
        other = None
        word, epos, erest = end
        if word == "else":
            if erest:
                m = re.match(r"(if|with)\b", erest)
                if m is None or (m.group(1) != kind and not (kind == "if" and m.group(1) == "if")):
                    if m is not None and m.group(1) == "with" and kind == "with":
                        pass
                    else:
                        raise self.fail(epos, f"unexpected {erest!r} in else")
                # `else if` / `else with`: a nested branch that shares our {{end}}
                self.vars.append([])
                inner_pipe = self.parse_pipeline(erest[len(m.group(1)):], epos, context=m.group(1))
                inner_body, inner_end = self.parse_list(in_range=in_range)
                nested = self._finish_chain(m.group(1), epos, inner_pipe, inner_body, inner_end, in_range=in_range)
                self.vars.pop()
                other = [nested]
            else:
                other, end2 = self.parse_list(in_range=in_range)
                if end2[0] != "end":
                    raise self.fail(end2[1], "expected end; found {{else}}")
        self.vars.pop()
        return Branch(pos, kind, pipe, body, other)

    def _finish_chain(self, kind: str, pos: int, pipe: Pipeline, body: list, end, *, in_range: bool) -> Branch:
        word, epos, erest = end
        other = None
        if word == "else":
            if erest:
                m = re.match(r"(if|with)\b", erest)
                if m is None:
                    raise self.fail(epos, f"unexpected {erest!r} in else")
                self.vars.append([])
                inner_pipe = self.parse_pipeline(erest[len(m.group(1)):], epos, context=m.group(1))
                inner_body, inner_end = self.parse_list(in_range=in_range)
                other = [self._finish_chain(m.group(1), epos, inner_pipe, inner_body, inner_end,
                                            in_range=in_range)]
                self.vars.pop()
            else:
                other, end2 = self.parse_list(in_range=in_range)
                if end2[0] != "end":
                    raise self.fail(end2[1], "expected end; found {{else}}")
        return Branch(pos, kind, pipe, body, other)

    def declared(self, name: str) -> bool:
        return any(name in scope for scope in self.vars)

    def tokens(self, body: str, pos: int) -> list[tuple[str, str, int]]:
        out = []
        i = 0
        while i < len(body):
            m = _TOKEN.match(body, i)
            if m is None:
                ch = body[i]
                raise self.fail(pos, f"unexpected {ch!r} in command" if ch != "}" else
                                "unexpected \"}\" in operand")
            kind = m.lastgroup
            if kind != "space":
                text = m.group(0)
                # a field directly after a closing paren or a variable belongs to it
                out.append((kind, text, pos + i))
            i = m.end()
        return out

    def parse_pipeline(self, body: str, pos: int, *, context: str, allow_range_decl: bool = False) -> Pipeline:
        toks = self.tokens(body, pos)
        pipe = Pipeline(pos)
        # declarations: $x := / $x = / $i, $e :=
        if toks and toks[0][0] == "var":
            if len(toks) > 1 and toks[1][0] in ("declare", "assign"):
                pipe.decl = [toks[0][1]]
                pipe.assign = toks[1][0] == "assign"
                toks = toks[2:]
            elif allow_range_decl and len(toks) > 3 and toks[1][0] == "comma" and toks[2][0] == "var" \
                    and toks[3][0] in ("declare", "assign"):
                pipe.decl = [toks[0][1], toks[2][1]]
                pipe.assign = toks[3][0] == "assign"
                toks = toks[4:]
        if pipe.assign:
            for name in pipe.decl:
                if not self.declared(name):
                    raise self.fail(pos, f"undefined variable \"{name}\"")
        elif pipe.decl:
            self.vars[-1].extend(pipe.decl)
        self.toks, self.tpos = toks, 0
        pipe.cmds = self.parse_commands(context, pos)
        if not pipe.cmds:
            raise self.fail(pos, f"missing value for {context}")
        return pipe

    def parse_commands(self, context: str, pos: int, *, until_paren: bool = False) -> list[Command]:
        cmds: list[Command] = []
        args: list = []
        while self.tpos < len(self.toks):
            kind, text, tpos = self.toks[self.tpos]
            if kind == "rparen":
                if until_paren:
                    break
                raise self.fail(pos, "unexpected right paren")
            self.tpos += 1
            if kind == "pipe":
                if not args:
                    raise self.fail(pos, 'unexpected "|" in command' if not cmds else "missing command")
                cmds.append(Command(args[0].pos, args))
                args = []
                continue
            if kind in ("declare", "assign", "comma"):
                raise self.fail(pos, f"unexpected {text!r} in {'operand' if args else 'command'}")
            args.append(self.operand(kind, text, tpos, pos))
        if args:
            cmds.append(Command(args[0].pos, args))
        return cmds

    def operand(self, kind: str, text: str, tpos: int, pos: int) -> Any:
        if kind == "lparen":
            inner = Pipeline(tpos)
            inner.cmds = self.parse_commands(context="parenthesized pipeline", pos=pos, until_paren=True)
            if self.tpos >= len(self.toks) or self.toks[self.tpos][0] != "rparen":
                raise self.fail(pos, "unclosed left paren")
            self.tpos += 1
            if not inner.cmds:
                raise self.fail(pos, "missing value for parenthesized pipeline")
            node: Any = inner
            names = self.trailing_fields()
            if names:
                node = Field(tpos, names, base=inner)
            return node
        if kind == "string" or kind == "raw":
            try:
                return Literal(tpos, _go_unquote(text), text)
            except (ValueError, IndexError):
                raise self.fail(pos, f"invalid syntax: {text}") from None
        if kind == "char":
            try:
                return Literal(tpos, ord(_go_unquote('"' + text[1:-1] + '"')), text)
            except (ValueError, TypeError):
                raise self.fail(pos, f"malformed character constant: {text}") from None
        if kind == "number":
            try:
                number = _go_number(text)
                return Literal(tpos, Int(number) if isinstance(number, int) else number, text)
            except ValueError:
                raise self.fail(pos, f"bad number syntax: \"{text}\"") from None
        if kind == "var":
            if not self.declared(text):
                raise self.fail(pos, f"undefined variable \"{text}\"")
            return Field(tpos, self.trailing_fields(), var=text)
        if kind == "field":
            names = tuple(n for n in text.split(".") if n)
            # Go reports a chain of fields at its second `.name`
            second = text.find(".", 1) if len(names) > 1 else 0
            return Field(tpos + second, names)
        if kind == "ident":
            if text in ("true", "false"):
                return Literal(tpos, text == "true", text)
            if text == "nil":
                return Literal(tpos, None, "nil")
            if text not in FUNCS and text not in LAZY:
                raise self.fail(pos, f"function \"{text}\" not defined")
            return Ident(tpos, text)
        raise self.fail(pos, f"unexpected {text!r} in operand")

    def trailing_fields(self) -> tuple[str, ...]:
        if self.tpos < len(self.toks) and self.toks[self.tpos][0] == "field" and self.toks[self.tpos][1] != ".":
            text = self.toks[self.tpos][1]
            self.tpos += 1
            return tuple(n for n in text.split(".") if n)
        return ()
