"""The safe YAML loading of bundle files: JSON data from YAML, with libyaml's C parser.

:data:`YAML_LOADER` is a ``SafeLoader`` subclass (``CSafeLoader`` when PyYAML has libyaml), so
``yaml.load(text, Loader=YAML_LOADER)`` is ``yaml.safe_load``, except that timestamps stay strings
(``2026-03-14`` stays ``"2026-03-14"``): YAML and JSON files of the same text give the same data.

:func:`load_yaml` gives the same data faster: libyaml parses and composes the node tree, then a
document of plain data (string keys, merge keys included; maps, lists and the core schema's
scalars) is built by :func:`build_plain`, a loop without PyYAML's per-node generators and
bookkeeping (building the starter bundle's objects took a quarter of
``callbench validate``). Anything else (a non-string key, ``!!set``, ``!!omap``, an unknown tag)
and any error while building load the text again with PyYAML's own constructor, so the result
and every error message, with its line and column marks, are PyYAML's own. Parse errors come
from the parser, with their marks, before anything is built.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_SCALARS = frozenset({_STR, *(f"tag:yaml.org,2002:{t}" for t in ("null", "bool", "int", "float", "binary",
                                                                  "timestamp"))})
"""Tags whose constructor builds a value from a scalar node alone (no generator, no children)."""
_SPECIAL_KEYS = frozenset({"tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"})
"""Keys ``SafeConstructor.flatten_mapping`` rewrites: ``<<`` (merge) and ``=`` (value)."""


class _NotPlain(Exception):
    """The document needs PyYAML's own constructor (see :func:`build_plain`)."""


def build_plain(loader: Any, root: Node) -> Any:
    """The data of the node tree ``root`` as ``SafeConstructor.construct_document`` builds it, for
    a tree of plain data; raises :class:`_NotPlain` for anything else.

    Plain: mapping nodes tagged ``map`` whose keys are scalars tagged ``str``, sequence nodes tagged
    ``seq``, and scalars tagged ``str`` (taken as they are) or ``null``, ``bool``, ``int``,
    ``float``, ``binary``, ``timestamp`` (built by ``loader``'s own constructor of the tag). Like PyYAML, each
    mapping or sequence node is built once: an alias to it gives the same object (so aliases never
    multiply work or memory; the loader counts each use afterwards), a node that holds itself gives
    a recursive object, and a later duplicate key wins. Iterative: any depth, no recursion.
    """
    ctors = loader.yaml_constructors
    made: dict[int, Any] = {}
    todo: list[tuple[Node, Any]] = []

    def make(node: Node) -> Any:
        cls, tag = node.__class__, node.tag
        if cls is ScalarNode:
            if tag == _STR:
                return node.value
            if tag not in _SCALARS:
                raise _NotPlain
            return ctors[tag](loader, node)
        obj = made.get(id(node))
        if obj is not None:
            return obj
        if cls is MappingNode and tag == _MAP:
            obj = {}
        elif cls is SequenceNode and tag == _SEQ:
            obj = []
        else:
            raise _NotPlain
        made[id(node)] = obj
        todo.append((node, obj))
        return obj

    top = make(root)
    while todo:
        node, obj = todo.pop()
        if obj.__class__ is list:
            obj.extend([make(child) for child in node.value])
            continue
        if not _fill_mapping(node, obj, make):
            # merge keys (<<) or value keys (=): flattened as SafeConstructor.construct_mapping does
            obj.clear()
            loader.flatten_mapping(node)
            if not _fill_mapping(node, obj, make):
                raise _NotPlain
    return top


def _fill_mapping(node: Node, obj: dict[str, Any], make: Any) -> bool:
    """Put ``node``'s pairs in ``obj``; False at the first key that is not a string scalar."""
    for key, value in node.value:
        if key.__class__ is not ScalarNode or key.tag != _STR:
            if key.__class__ is ScalarNode and key.tag in _SPECIAL_KEYS:
                return False
            raise _NotPlain
        obj[key.value] = make(value)
    return True


def load_yaml(text: str) -> Any:
    """The data of one YAML document, as ``yaml.load(text, Loader=YAML_LOADER)`` gives it (None for
    no document), built by :func:`build_plain` when the document is plain data. Otherwise, and on
    any error while building, the text is loaded again by PyYAML's own constructor, so what is not
    plain and every error (with its line and column marks) is PyYAML's own. Raises what
    ``yaml.load`` raises (``yaml.YAMLError`` with ``problem_mark``, ``ValueError``,
    ``RecursionError``)."""
    loader = YAML_LOADER(text)
    try:
        node = loader.get_single_node()  # parse errors are raised here, as by yaml.load
        if node is None:
            return None
        try:
            return build_plain(loader, node)
        except Exception:  # _NotPlain, or an error PyYAML raises in its own order from a fresh tree
            pass
    finally:
        loader.dispose()
    return yaml.load(text, Loader=YAML_LOADER)  # YAML_LOADER is a SafeLoader subclass: a safe load


def _json_yaml_loader() -> Any:
    """A safe YAML loader (libyaml when available) that keeps timestamps as strings and builds
    plain data fast (module docstring).

    Its ``resolve`` is PyYAML's ``BaseResolver.resolve`` without path resolvers (the safe loader has
    none): the same tags, ~12% less parsing time, as the C parser calls it for every node.
    """
    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    resolvers = {
        k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
        for k, v in base.yaml_implicit_resolvers.items()
    }
    if None in resolvers or base.yaml_path_resolvers:  # pragma: no cover - PyYAML changed; stay exact
        loader: Any = type("JsonSafeLoader", (base,), {})
        loader.yaml_implicit_resolvers = resolvers
        return loader

    def resolve(self: Any, kind: Any, value: Any, implicit: Any) -> str:
        if kind is ScalarNode:
            if implicit[0]:
                for tag, regexp in resolvers.get(value[0] if value else "", ()):
                    if regexp.match(value):
                        return str(tag)
            return _STR
        return _SEQ if kind is SequenceNode else _MAP

    def no_path(self: Any, *args: Any) -> None:
        return None

    loader = type("JsonSafeLoader", (base,), {"resolve": resolve, "descend_resolver": no_path,
                                             "ascend_resolver": no_path})
    loader.yaml_implicit_resolvers = resolvers
    return loader


YAML_LOADER = _json_yaml_loader()
"""The loader of bundle files (module docstring); ``yaml.load`` with it is a safe load."""
