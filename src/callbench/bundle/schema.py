"""JSON Schemas of the bundle's file types, for editors and for authors in other languages.

DESIGN.md "Bundle on disk": "Publish a JSON Schema of every file type". One schema per file type,
generated from the pydantic models (``model_json_schema``, mode ``validation``) and marked as
JSON Schema draft 2020-12:

* ``bundle.schema.json`` -- ``bundle.yaml`` (:class:`~callbench.bundle.models.BundleMeta`)
* ``agent.schema.json`` -- ``agents/<id>/agent.yaml`` (:class:`~callbench.bundle.models.AgentConfig`)
* ``scenario.schema.json`` -- ``agents/<id>/scenarios/<id>.yaml`` (:class:`~callbench.bundle.models.Scenario`)
* ``provenance.schema.json`` -- ``provenance.yaml`` (:class:`~callbench.bundle.provenance.Provenance`)

Matchers are parsed by a custom discriminator in :mod:`callbench.bundle.matchers` (a bare value is
shorthand for ``eq``), which pydantic cannot describe; the generated union is replaced by one
``$defs/Matcher`` that accepts exactly the on-disk forms. The schemas check structure only: the
validator (``callbench validate``) runs the cross-file audits.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from callbench.bundle.models import AgentConfig, BundleMeta, Scenario
from callbench.bundle.provenance import Provenance

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_BASE = "urn:callbench:schema:"  # an id, not a host
FILE_TYPES: dict[str, type[BaseModel]] = {
    "bundle.schema.json": BundleMeta,
    "agent.schema.json": AgentConfig,
    "scenario.schema.json": Scenario,
    "provenance.schema.json": Provenance,
}
_MATCHER_KEYS = {"Eq": "eq", "Present": "present", "OneOf": "one_of", "Range": "range", "Regex": "regex",
                 "Contains": "contains", "Subset": "subset", "AllOf": "all", "AnyOf": "any", "Not": "not"}
_MATCHER_MEMBERS = tuple(_MATCHER_KEYS)
_MATCHER_REF = {"$ref": "#/$defs/Matcher"}


def _is_matcher_union(node: Any) -> bool:
    if not isinstance(node, dict):
        return False
    alts = node.get("oneOf") or node.get("anyOf")
    if not isinstance(alts, list):
        return False
    refs = {a.get("$ref") for a in alts if isinstance(a, dict)}
    return "#/$defs/_Invalid" in refs and "#/$defs/Eq" in refs


def _replace_unions(node: Any) -> Any:
    if _is_matcher_union(node):
        return dict(_MATCHER_REF)
    if isinstance(node, dict):
        return {k: _replace_unions(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_replace_unions(v) for v in node]
    return node


def _matcher_def() -> dict[str, Any]:
    return {
        "title": "Matcher",
        "description": (
            "A bare value (string, number, boolean, null or list) means eq; otherwise an object naming "
            "exactly one matcher kind: eq, present, one_of, range, regex (RE2, full match unless "
            "full: false; ignore_case), contains (exactly: true for the same items in any order), "
            "subset, all, any, not. An object value for eq must be wrapped: {eq: {...}}. Strings compare "
            "after Unicode NFC; 25 equals 25.0."
        ),
        "anyOf": [
            {"type": ["string", "number", "boolean", "null", "array"]},
            *({"$ref": f"#/$defs/{m}"} for m in _MATCHER_MEMBERS),
        ],
    }


def file_schema(model: type[BaseModel], name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one bundle file type; ``name`` becomes part of ``$id``."""
    schema = _replace_unions(model.model_json_schema(mode="validation"))
    defs = schema.setdefault("$defs", {})
    if any(m in defs for m in _MATCHER_MEMBERS):
        defs.pop("_Invalid", None)
        defs["Matcher"] = _matcher_def()
        for member, key in _MATCHER_KEYS.items():
            # On disk a matcher names its kind by its key ({present: true}); {} is no matcher.
            if member in defs and key not in defs[member].get("required", []):
                defs[member]["required"] = [*defs[member].get("required", []), key]
    return {"$schema": DRAFT_2020_12, "$id": SCHEMA_BASE + name, **schema}


def bundle_schemas() -> dict[str, dict[str, Any]]:
    """File name -> JSON Schema for every bundle file type (see the module docstring)."""
    return {name: file_schema(model, name) for name, model in FILE_TYPES.items()}


def write_schemas(out_dir: str | Path) -> list[Path]:
    """Write every schema into ``out_dir`` (created if needed), each atomically (temporary file in
    the same folder, fsync, rename); returns the written paths. Raises ``OSError`` when the folder
    cannot be written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in bundle_schemas().items():
        target = out / name
        _atomic_write(target, json.dumps(schema, indent=2, ensure_ascii=False, sort_keys=False) + "\n")
        written.append(target)
    return written


def _atomic_write(path: Path, text: str) -> None:
    # Same recipe as callbench.trace.atomic_write_text; the bundle stage imports nothing above it.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
