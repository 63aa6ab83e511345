"""YAML for input files (scenarios, gates, manifests): safe tags only, a key given twice is an
error, and the line of every field, so that a problem names file, line and field.

PyYAML keeps the last of two equal keys in a mapping without a word; a typo'd copy of a block
would then silently replace the first. ``load_yaml`` refuses that and names both lines.
"""

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


class _UniqueKeyLoader(yaml.SafeLoader):
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
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> tuple[Any, yaml.Node | None]:
    """The document and its node tree (for line numbers); raises YamlProblem, never YAMLError."""
    try:
        loader = _UniqueKeyLoader(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or str(err)
        raise YamlProblem(
            mark.line + 1 if mark else None, f"not valid YAML: {' '.join(problem.split())}"
        ) from None
    except RecursionError:
        raise YamlProblem(None, "not valid YAML: nested too deeply") from None
    return data, node


def line_map(node: yaml.Node, path: tuple = (), out: dict | None = None) -> dict[tuple, int]:
    """Field location (as pydantic gives it: keys and list indices) -> 1-based line in the file."""
    out = {} if out is None else out
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, val in node.value:
            if not isinstance(key, yaml.ScalarNode):
                continue  # a mapping or list as a key: the schema rejects it, without a line of its own
            out[path + (key.value,)] = key.start_mark.line + 1
            line_map(val, path + (key.value,), out)
            out[path + (key.value,)] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            line_map(item, path + (i,), out)
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
