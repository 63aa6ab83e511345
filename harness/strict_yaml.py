"""YAML for input files (scenarios, gates): safe tags only, and a key given twice is an error.

PyYAML keeps the last of two equal keys in a mapping without a word; a typo'd copy of a block
would then silently replace the first. ``load_yaml`` refuses that and names both lines.
"""

from __future__ import annotations

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
