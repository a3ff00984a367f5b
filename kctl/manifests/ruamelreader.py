"""The ruamel.yaml path: documents the fast reader leaves (anchors and aliases, tags, folded or multi-line
scalars, directives, every document with an error), read by ruamel.yaml with Kubernetes' scalars.

ruamel.yaml composes the nodes with kctl.manifests.yaml11's resolution and an alias budget; the
node graph is measured (depth, nodes after alias expansion) before any data is built, so a YAML
bomb is refused, never expanded; merge keys (`<<`) are applied; errors are condensed to one
line with their line number. ruamel.yaml is imported only when a document comes here. Called by
kctl.manifests.yamlio.
"""

from __future__ import annotations

from typing import Any

from kctl.manifests import bounds
from kctl.manifests.errors import ManifestError
from kctl.manifests.yaml11 import TAG, construct_tagged, json_key, json_value, resolve_plain

__all__ = ["ruamel_documents"]


class _NodeProblem(Exception):
    """A composed document that is not plain data (a bad tag, key, alias, ...)."""

    def __init__(self, message: str, mark: Any) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark


_RUAMEL_CLASSES: tuple | None = None


def _ruamel_classes() -> tuple:
    """(Resolver, Composer) subclasses: our scalar resolution; an alias budget."""
    global _RUAMEL_CLASSES
    if _RUAMEL_CLASSES is None:
        from ruamel.yaml.composer import Composer, ComposerError
        from ruamel.yaml.events import AliasEvent
        from ruamel.yaml.nodes import ScalarNode
        from ruamel.yaml.resolver import VersionedResolver
        from ruamel.yaml.tag import Tag

        class Resolver(VersionedResolver):
            def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
                if kind is ScalarNode and implicit[0]:
                    name = resolve_plain(value)[0]
                    return Tag(suffix=TAG + ("int" if name == "uint" else name))
                return super().resolve(kind, value, implicit)

        class LimitedComposer(Composer):
            aliases = 0

            def compose_node(self, parent: Any, index: Any) -> Any:
                if self.parser.check_event(AliasEvent):
                    self.aliases += 1
                    if self.aliases > bounds.MAX_ALIASES:
                        mark = self.parser.peek_event().start_mark
                        raise ComposerError(None, None, f"more than {bounds.MAX_ALIASES:,} aliases",
                                            mark)
                return super().compose_node(parent, index)

        _RUAMEL_CLASSES = (Resolver, LimitedComposer)
    return _RUAMEL_CLASSES


def _condense(error: Any) -> tuple[str, int | None]:
    """A ruamel.yaml MarkedYAMLError as (one-line message, 1-based line)."""
    problem = getattr(error, "problem", None) or ""
    context = getattr(error, "context", None) or ""
    problem_mark = getattr(error, "problem_mark", None)
    context_mark = getattr(error, "context_mark", None)
    message = problem or context or type(error).__name__
    if problem and context:
        if context_mark is not None and (problem_mark is None
                                         or context_mark.line != problem_mark.line):
            context = f"{context} at line {context_mark.line + 1}"
        message = f"{problem} ({context})"
    mark = problem_mark if problem_mark is not None else context_mark
    return " ".join(message.split()), (mark.line + 1 if mark is not None else None)


def ruamel_documents(text: str, source: str, first_index: int, budget: list[int], *,
                     first_line: int = 0) -> tuple[list[tuple[int, int, object]], int]:
    """Parse with ruamel.yaml: (non-empty documents, number of documents seen).

    `first_line` is the 0-based line of the stream where text starts (marks count from it).
    """
    from ruamel.yaml import YAML
    from ruamel.yaml.composer import MaxDepthExceededError
    from ruamel.yaml.error import MarkedYAMLError
    from ruamel.yaml.nodes import ScalarNode

    resolver, composer_class = _ruamel_classes()
    yaml = YAML(typ="safe", pure=True)
    yaml.Resolver = resolver
    yaml.Composer = composer_class
    yaml.max_depth = bounds.MAX_DEPTH
    documents: list[tuple[int, int, object]] = []
    index = first_index
    try:
        yaml.get_constructor_parser(text)
        yaml.reader.line = first_line
        composer = yaml.composer
        composer.warn_double_anchors = False
        while composer.check_node():
            node = composer.get_node()
            line = node.start_mark.line + 1
            if not (isinstance(node, ScalarNode) and node.value == "" and node.style is None
                    and node.tag == TAG + "null" and node.anchor is None):
                size, _ = _measure_node(node, 1, {}, set())
                if size > budget[0]:
                    raise bounds.too_many_nodes(source, index, line)
                budget[0] -= size
                documents.append((index, line, _node_data(node)))
            index += 1
    except MaxDepthExceededError as error:
        raise bounds.too_deep(source, index, _condense(error)[1]) from None
    except MarkedYAMLError as error:
        message, line = _condense(error)
        raise ManifestError(source, message, index=index, line=line) from None
    except _NodeProblem as problem:
        line = problem.mark.line + 1 if problem.mark is not None else None
        raise ManifestError(source, problem.message, index=index, line=line) from None
    except ManifestError:
        raise
    except Exception as error:  # ruamel.yaml's own failures (e.g. a \U escape past U+10FFFF)
        message = " ".join(str(error).split()) or type(error).__name__
        raise ManifestError(source, f"cannot parse: {message}", index=index) from error
    return documents, index - first_index


def _measure_node(node: Any, depth: int, memo: dict, active: set) -> tuple[int, int]:
    """(nodes, height) of a composed node with aliases expanded, without expanding them.

    Raises _NodeProblem past bounds.MAX_DEPTH or bounds.MAX_NODES, or for an alias inside its own anchor.
    """
    known = memo.get(id(node))
    if known is not None:
        if depth + known[1] - 1 > bounds.MAX_DEPTH:
            raise _NodeProblem(f"nested deeper than {bounds.MAX_DEPTH} levels (through an alias)",
                               node.start_mark)
        return known
    if depth > bounds.MAX_DEPTH:
        raise _NodeProblem(f"nested deeper than {bounds.MAX_DEPTH} levels", node.start_mark)
    if isinstance(node.value, str):
        result = (1, 1)
    else:
        if id(node) in active:
            raise _NodeProblem("an alias refers to a node that contains it (a recursive "
                               "structure)", node.start_mark)
        active.add(id(node))
        size, height = 1, 0
        children = node.value
        for child in children:
            for part in (child if isinstance(child, tuple) else (child,)):
                part_size, part_height = _measure_node(part, depth + 1, memo, active)
                size += part_size
                height = max(height, part_height)
            if size > bounds.MAX_NODES:
                raise _NodeProblem(f"more than {bounds.MAX_NODES:,} nodes after expanding aliases: "
                                   f"refusing it (a YAML bomb?)", node.start_mark)
        active.discard(id(node))
        result = (size, height + 1)
    memo[id(node)] = result
    return result


def _node_data(node: Any) -> Any:
    """Plain data from a composed node (checked by _measure_node, so recursion is bounded)."""
    tag = node.tag
    value = node.value
    if isinstance(value, str):
        try:
            return json_value(*construct_tagged(tag, value))
        except ValueError as error:
            raise _NodeProblem(str(error), node.start_mark) from None
    if tag == TAG + "seq":
        return [_node_data(child) for child in value]
    if tag != TAG + "map":
        raise _NodeProblem(f"unsupported tag {tag!r}: kctl reads plain data (maps, lists, "
                           f"strings, numbers, booleans, null)", node.start_mark)
    result: dict[str, Any] = {}
    lines: dict[str, int] = {}
    merged: dict[str, Any] | None = None
    for key_node, value_node in value:
        if key_node.tag == TAG + "merge" and isinstance(key_node.value, str):
            if merged is not None:
                raise _NodeProblem('duplicate merge key "<<"', key_node.start_mark)
            merged = {}
            sources = value_node.value if value_node.tag == TAG + "seq" else [value_node]
            for source in sources:
                if source.tag != TAG + "map":
                    raise _NodeProblem("a merge key (<<) needs a mapping or a list of mappings",
                                       source.start_mark)
                for merged_key, merged_value in _node_data(source).items():
                    merged.setdefault(merged_key, merged_value)
            continue
        if not isinstance(key_node.value, str):
            raise _NodeProblem("a mapping key must be a string, not a collection",
                               key_node.start_mark)
        try:  # `on:` is "true", `0644:` "420": as sigs.k8s.io/yaml makes JSON keys
            key = json_key(*construct_tagged(key_node.tag, key_node.value), key_node.value)
        except ValueError as error:
            raise _NodeProblem(str(error), key_node.start_mark) from None
        if key in result:
            raise _NodeProblem(f'duplicate key "{key}" (first at line {lines[key]})',
                               key_node.start_mark)
        lines[key] = key_node.start_mark.line + 1
        result[key] = _node_data(value_node)
    if merged:
        merged.update(result)
        return merged
    return result
