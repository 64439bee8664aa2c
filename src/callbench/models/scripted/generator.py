"""``scripted:generator:<path>``: a deterministic scenario generator for tests and offline demos
of ``callbench generate``.

The file (YAML or JSON) lists, per plan item, the answers to that item's successive requests::

    items:
      - [valid.yaml]                         # item 1: one answer
      - - {file: valid.yaml, set: {id: water_b, brief.datetime: "not a date"}}   # attempt 1: invalid
        - {file: valid.yaml, set: {id: water_b}}                                 # attempt 2: fixed
      - - {file: valid.yaml, set: {id: water_copy, title: Same call again}}      # a near-duplicate

An answer is a string ending in ``.yaml``/``.yml``/``.json`` (a scenario file, relative to the
script, sent as its JSON), a mapping ``{file, set, delete}`` (that file with dotted paths set to
values or deleted; list indices are numbers), ``{raw: "text"}`` (sent verbatim, e.g. broken JSON),
or any other mapping (sent as JSON). Item k of the batch is ``request.context.turn``; attempt n is
``request.context.attempt``; past the end of a list the last entry repeats (items and attempts).
Usage counts one call and no tokens.

With a top-level ``follow_plan`` mapping, every JSON-object answer is made to fit the request's plan
item (the contract line the request carries, ``callbench.generate.request.PLAN_ITEM_MARK``):
``language``, ``brief.language`` and ``difficulty`` are set from it, and ``channel`` is built from
``follow_plan.channel``, one fragment per asked kind (``asr_substitute``, ``asr_drop``,
``asr_double``: an ASR event; ``vad_split``: a VAD split; ``seeded_noise``: ``true``), or emptied
for a clean channel. ``follow_plan.sections`` maps a section title to a criterion (or a list of
them): each criterion of a section the plan item asks to test is appended to ``criteria`` (unless
one with its id is there), the way a model writes a criterion quoting the section it was asked to
test (:mod:`callbench.bundle.section_tests`). That is the offline generator that writes a valid
scenario for any plan.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from callbench.models.base import ModelOutputError, ModelRequest, ModelResponse, ModelSettings, Usage


def _set_path(data: Any, dotted: str, value: Any, delete: bool = False) -> None:
    parts = dotted.split(".")
    node = data
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    last = parts[-1]
    if isinstance(node, list):
        if delete:
            del node[int(last)]
        else:
            node[int(last)] = value
    elif delete:
        node.pop(last, None)
    else:
        node[last] = value


class ScriptedGenerator:
    """The ``scripted:generator:<path>`` model (see the module docstring)."""

    embedded_smoke_test_model = False

    def __init__(self, spec: str, settings: ModelSettings | None, path: Path) -> None:
        self.spec = spec
        self.settings = settings or ModelSettings()
        self.path = path
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
            raise ValueError(f"{spec}: cannot read {path}: {e}") from None
        items = raw.get("items") if isinstance(raw, dict) else None
        if not isinstance(items, list) or not items:
            raise ValueError(
                f"{spec}: {path}: expected 'items', a non-empty list (one list of answers per item)"
            )
        follow = raw.get("follow_plan")
        self.follow_plan: dict[str, Any] | None = follow if isinstance(follow, dict) else None
        self.items: list[list[Any]] = []
        for i, entry in enumerate(items):
            answers = entry if isinstance(entry, list) else [entry]
            if not answers:
                raise ValueError(f"{spec}: {path}: items[{i}] is an empty list")
            self.items.append([self._answer(a, f"items[{i}]") for a in answers])

    def _load(self, name: str, where: str) -> Any:
        file = self.path.parent / name
        try:
            return yaml.safe_load(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
            raise ValueError(f"{self.spec}: {self.path}: {where}: cannot read {file}: {e}") from None

    def _answer(self, answer: Any, where: str) -> str:
        if isinstance(answer, str) and answer.endswith((".yaml", ".yml", ".json")):
            return json.dumps(self._load(answer, where), ensure_ascii=False)
        if isinstance(answer, dict) and "raw" in answer:
            return str(answer["raw"])
        if isinstance(answer, dict) and "file" in answer:
            data = copy.deepcopy(self._load(str(answer["file"]), where))
            try:
                for dotted, value in (answer.get("set") or {}).items():
                    _set_path(data, str(dotted), value)
                for dotted in answer.get("delete") or []:
                    _set_path(data, str(dotted), None, delete=True)
            except (KeyError, IndexError, ValueError, TypeError) as e:
                raise ValueError(
                    f"{self.spec}: {self.path}: {where}: cannot apply set/delete: {e!r}"
                ) from None
            return json.dumps(data, ensure_ascii=False)
        return json.dumps(answer, ensure_ascii=False)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The scripted answer for (item, attempt) of ``request.context``."""
        if request.response_schema is None:
            raise ModelOutputError(f"{self.spec}: expected a scenario request (with a response schema)")
        answers = self.items[min(request.context.turn, len(self.items) - 1)]
        text = answers[min(request.context.attempt, len(answers) - 1)]
        if self.follow_plan is not None:
            text = self._fit_plan(text, request)
        return ModelResponse(content=text, usage=Usage(calls=1), model=self.spec, finish_reason="stop")

    def _fit_plan(self, text: str, request: ModelRequest) -> str:
        """``text`` made to fit the request's plan item (module docstring); unchanged when it is
        not a JSON object or the request carries no plan item."""
        mark = "The plan item is a contract; the scenario must match it exactly: "
        item: Any = None
        for m in request.messages:
            for line in (m.content or "").splitlines():
                if m.role == "user" and line.startswith(mark):
                    item = json.loads(line[len(mark):])
        try:
            data = json.loads(text)
        except ValueError:
            return text
        if not isinstance(item, dict) or not isinstance(data, dict):
            return text
        assert self.follow_plan is not None
        data["language"] = item["language"]
        data["difficulty"] = item["difficulty"]
        if isinstance(data.get("brief"), dict):
            data["brief"]["language"] = item["language"]
        fragments = self.follow_plan.get("channel") or {}
        channel: dict[str, Any] = {}
        for kind in item.get("channel_kinds") or []:
            if kind == "seeded_noise":
                channel["seeded_noise"] = True
            elif kind == "vad_split":
                channel.setdefault("vad_splits", []).append(copy.deepcopy(fragments[kind]))
            else:
                channel.setdefault("asr_events", []).append(copy.deepcopy(fragments[kind]))
        data["channel"] = channel
        by_section = self.follow_plan.get("sections") or {}
        criteria = data.setdefault("criteria", [])
        if isinstance(by_section, dict) and isinstance(criteria, list):
            have = {c.get("id") for c in criteria if isinstance(c, dict)}
            for title in item.get("sections") or []:
                entry = by_section.get(title) or []
                for crit in entry if isinstance(entry, list) else [entry]:
                    if isinstance(crit, dict) and crit.get("id") not in have:
                        criteria.append(copy.deepcopy(crit))
                        have.add(crit.get("id"))
        return json.dumps(data, ensure_ascii=False)

    async def aclose(self) -> None:
        return None
