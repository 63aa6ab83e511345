"""YAML for input files (scenarios, gates, manifests): safe tags only, a key given twice is an
error (PyYAML would keep the last without a word), and the line of every field, so that a problem
names file, line and field. Aliases are bounded: a document they would expand by more than
``MAX_ALIAS_NODES`` nodes (the "billion laughs"), or that contains itself, is refused."""

from __future__ import annotations

import re
from typing import Any

import yaml


class YamlProblem(Exception):
    """Not valid YAML, or a key given twice: ``line`` (1-based, or None) and a one-line message."""

    def __init__(self, line: int | None, message: str):
        super().__init__(message)
        self.line = line
        self.message = message


MAX_ALIAS_NODES = 100_000  # nodes an alias may add by repeating its anchor (a merge base x arms: far less)


class _UniqueKeys:
    """A constructor mixin: a key given twice in one mapping is a YamlProblem naming both lines."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *base` overrides on purpose
            key = self.construct_object(key_node, deep=True)
            try:
                seen = key in first_line
            except TypeError:  # unhashable key: the base constructor reports it
                continue
            line = key_node.start_mark.line + 1
            if seen:
                raise YamlProblem(line, f"duplicate key {key!r} (first given on line {first_line[key]})")
            first_line[key] = line
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc]


class _UniqueKeyLoader(_UniqueKeys, yaml.SafeLoader):
    """PyYAML's own parser: slower, and its messages name the character at fault."""


class _FastLoader(_UniqueKeys, yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader):
    """libyaml's parser (events only: ``compose_events`` builds the nodes) with PyYAML's constructor."""


MAX_DEPTH = 100  # collections inside collections; a scenario needs 4 or 5


def load_yaml(text: str) -> tuple[Any, yaml.Node | None]:
    """The document and its node tree; YamlProblem, never YAMLError. libyaml parses (faster); a document
    it refuses is parsed again by PyYAML, whose messages name the character at fault."""
    if yaml.__with_libyaml__:
        try:
            return _load(text, fast=True)
        except yaml.YAMLError:
            pass
    try:
        return _load(text, fast=False)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or str(err)
        raise YamlProblem(
            mark.line + 1 if mark else None, f"not valid YAML: {' '.join(problem.split())}"
        ) from None
    except RecursionError:
        raise YamlProblem(None, f"nested too deeply (more than {MAX_DEPTH} levels)") from None


def _load(text: str, *, fast: bool) -> tuple[Any, yaml.Node | None]:
    loader = _FastLoader(text) if fast else _UniqueKeyLoader(text)
    try:
        node = compose_events(loader) if fast else loader.get_single_node()
        if node is not None:
            check_aliases(node)
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    return data, node


def compose_events(loader: Any) -> yaml.Node | None:
    """The document's node tree from ``loader``'s events, as PyYAML's Composer builds it, on an explicit
    stack (libyaml's composer recurses in C: a deep document crashes it)."""
    loader.get_event()  # stream start
    if loader.check_event(yaml.StreamEndEvent):
        loader.get_event()
        return None
    loader.get_event()  # document start
    anchors: dict[str, yaml.Node] = {}
    stack: list[list[Any]] = []  # [collection node, mapping key waiting for its value]
    root: yaml.Node | None = None

    def attach(node: yaml.Node) -> None:
        nonlocal root
        if not stack:
            root = node
        elif isinstance(stack[-1][0], yaml.SequenceNode):
            stack[-1][0].value.append(node)
        elif stack[-1][1] is None:
            stack[-1][1] = node
        else:
            stack[-1][0].value.append((stack[-1][1], node))
            stack[-1][1] = None

    def anchored(event: Any, node: yaml.Node) -> yaml.Node:
        if event.anchor is not None:
            if event.anchor in anchors:
                raise yaml.composer.ComposerError(
                    f"found duplicate anchor {event.anchor!r}; first occurrence",
                    anchors[event.anchor].start_mark, "second occurrence", event.start_mark,
                )  # fmt: skip
            anchors[event.anchor] = node
        return node

    def resolved(kind: type, event: Any, value: str | None) -> str:
        return loader.resolve(kind, value, event.implicit) if event.tag in (None, "!") else event.tag

    while True:
        event = loader.get_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor not in anchors:
                raise yaml.composer.ComposerError(
                    None, None, f"found undefined alias {event.anchor!r}", event.start_mark
                )
            attach(anchors[event.anchor])
        elif isinstance(event, yaml.ScalarEvent):
            tag = resolved(yaml.ScalarNode, event, event.value)
            attach(anchored(event, yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark,
                                                   style=event.style)))  # fmt: skip
        elif isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
            if len(stack) >= MAX_DEPTH:
                raise YamlProblem(
                    event.start_mark.line + 1, f"nested too deeply (more than {MAX_DEPTH} levels)"
                )
            kind = yaml.SequenceNode if isinstance(event, yaml.SequenceStartEvent) else yaml.MappingNode
            tag = resolved(kind, event, None)
            node = anchored(event, kind(tag, [], event.start_mark, None, flow_style=event.flow_style))
            attach(node)
            stack.append([node, None])
        elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
            stack.pop()[0].end_mark = event.end_mark
        if not stack and root is not None:
            break
    loader.get_event()  # document end
    if not loader.check_event(yaml.StreamEndEvent):
        event = loader.get_event()
        raise yaml.composer.ComposerError(
            "expected a single document in the stream", root.start_mark, "but found another document",
            event.start_mark,
        )  # fmt: skip
    loader.get_event()
    return root


def check_aliases(root: yaml.Node) -> None:
    """YamlProblem when aliases add more than ``MAX_ALIAS_NODES`` nodes or a node contains itself."""
    size: dict[int, int] = {}  # id(node) -> nodes under it, aliases expanded
    open_nodes: set[int] = set()

    def expanded(node: yaml.Node) -> int:
        key = id(node)
        if key in size:
            return size[key]
        if key in open_nodes:
            raise YamlProblem(
                node.start_mark.line + 1, "not valid YAML: an alias refers to a node that contains it"
            )
        open_nodes.add(key)
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = node.value if isinstance(node, yaml.SequenceNode) else []
        total = 1
        for child in children:  # a loop, not sum(): one frame per level of the document
            total += expanded(child)
        open_nodes.discard(key)
        size[key] = total
        return total

    extra = expanded(root) - len(size)
    if extra > MAX_ALIAS_NODES:
        raise YamlProblem(
            None,
            f"aliases expand the document by {extra:,} nodes (at most {MAX_ALIAS_NODES:,}): refused "
            "(nested aliases, a 'billion laughs'?)",
        )


def line_map(node: yaml.Node) -> dict[tuple, int]:
    """Field location (as pydantic gives it) -> 1-based line; a node reached again by alias is not walked."""
    out: dict[tuple, int] = {}
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, tuple]] = [(node, ())]
    while stack:  # iterative: a deep document cannot exhaust the interpreter's stack here
        node, path = stack.pop()
        out.setdefault(path, node.start_mark.line + 1)
        if not isinstance(node, yaml.MappingNode | yaml.SequenceNode) or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack += [(item, path + (i,)) for i, item in enumerate(node.value)]
            continue
        # a mapping or list as a key: the schema rejects it, without a line of its own
        for key, val in (kv for kv in node.value if isinstance(kv[0], yaml.ScalarNode)):
            out[path + (key.value,)] = key.start_mark.line + 1
            stack.append((val, path + (key.value,)))
    return out


def line_for(lines: dict[tuple, int], loc: tuple) -> int:
    """The line of ``loc``, or of the nearest field above it that has one."""
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return 1


def format_loc(loc: tuple) -> str:
    """A field location as a reader writes it: ``arms[2].attn_type``, ``profiles['../x']``."""
    s = ""
    for part in loc:
        if part == "[key]":  # pydantic's marker for a mapping key: the key itself is the field
            continue
        if isinstance(part, int):
            s += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(part)):
            s += f".{part}" if s else str(part)
        else:
            s += f"[{str(part)!r}]"
    return s or "(top level)"
