"""The loader: typed objects, rendering, the content hash, and safe reading of hostile files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from callbench.bundle import loader
from callbench.bundle.loader import (
    BundleError,
    load_bundle_collect,
    read_data_file,
    sha256_text,
)
from callbench.bundle.render import render_instructions, static_prefix_chars
from callbench.bundle.validate.audits import load_bundle
from callbench.bundle.yaml_data import YAML_LOADER
from waiting import limit

from .conftest import AGENT, BOOKING, MINIMAL, MiniBundle


def _hash(root: Path) -> str:
    b, probs = load_bundle_collect(root)
    assert b is not None, probs
    return b.content_hash


def test_minimal_bundle_loads_typed() -> None:
    b = load_bundle(MINIMAL)
    assert b.meta.name == "minimal-test-bundle"
    agent = b.agents[AGENT]
    names = [t.name for t in agent.config.tools]
    assert names == ["lookup_account", "schedule_pickup", "cancel_pickup", "end_call"]
    assert [s.id for s in agent.scenarios] == ["pickup_cancel_unverified", BOOKING]
    _, scen = b.scenario(BOOKING)
    assert scen.brief.known_facts["account_number"] == "40127788"  # quoted digits stay a string
    assert scen.brief.datetime == "2026-03-14T17:20:00+05:30"
    assert scen.tags == ["booking", "verification"]
    with pytest.raises(KeyError, match="no scenario 'nope'"):
        b.scenario("nope")


def test_render_instructions_uses_scenario_datetime_and_variables() -> None:
    b = load_bundle(MINIMAL)
    agent, scen = b.scenario(BOOKING)
    text = render_instructions(agent, scen)
    assert "GreenCycle in Pune. Today is Saturday, 2026-03-14, and the time is 17:20." in text
    assert text.startswith("# GreenCycle Pickup Desk\n")
    neutral = render_instructions(agent)
    assert "Today is {{weekday}}, {{date}}" in neutral


def test_render_undefined_variable_and_syntax_error() -> None:
    b = load_bundle(MINIMAL)
    agent, scen = b.scenario(BOOKING)
    broken = agent.model_copy(update={"instructions_template": "Hello {{ customer }}"})
    with pytest.raises(ValueError, match="'customer' is undefined"):
        render_instructions(broken, scen)
    bad_syntax = agent.model_copy(update={"instructions_template": "Hello {% if %}"})
    with pytest.raises(ValueError, match="instructions template"):
        render_instructions(bad_syntax, scen)
    # The compiled-template cache keys on the text: two agents never share a template.
    other = agent.model_copy(update={"instructions_template": "Other {{agent_name}}"})
    assert render_instructions(other) == "Other GreenCycle Pickup Desk"


def test_render_sandbox_blocks_attribute_escapes() -> None:
    b = load_bundle(MINIMAL)
    agent, _ = b.scenario(BOOKING)
    evil = agent.model_copy(update={"instructions_template": "{{ agent_name.__class__.__mro__ }}"})
    with pytest.raises(ValueError):
        render_instructions(evil)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("Rules.\n## Context\nToday is {{date}}.", len("Rules.\n## Context\nToday is ")),
        ("Rules.\n{# a comment #}Today {{date}}", len("Rules.\n")),
        ("Rules.  \n{%- if true %}x{% endif %}", len("Rules.")),  # {%- strips the spaces before it
        ("No variables at all.", len("No variables at all.")),
        ("{{agent_name}} rules", 0),
    ],
)
def test_static_prefix_is_the_literal_text_before_the_first_tag(template: str, expected: int) -> None:
    b = load_bundle(MINIMAL)
    agent, scen = b.scenario(BOOKING)
    custom = agent.model_copy(update={"instructions_template": template})
    rendered = render_instructions(custom, scen)
    assert static_prefix_chars(custom, rendered) == expected
    assert rendered[:expected] == template[:expected]


# ------------------------------------------------------------------ the content hash


def test_hash_same_for_yaml_and_json(mb: MiniBundle) -> None:
    before = _hash(mb.root)
    scens = sorted((mb.agent_dir / "scenarios").iterdir())
    for path in [mb.root / "bundle.yaml", mb.agent_dir / "agent.yaml", *scens]:
        data = mb.read(path)
        path.with_suffix(".json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        path.unlink()
    assert _hash(mb.root) == before
    assert load_bundle(mb.root).scenario(BOOKING)[1].brief.known_facts["quantity_kg"] == 30


def test_hash_ignores_key_order_and_formatting(mb: MiniBundle) -> None:
    before = _hash(mb.root)
    path = mb.scenario_file()
    data = mb.read(path)
    reordered = dict(reversed(list(data.items())))
    reordered["brief"] = dict(reversed(list(data["brief"].items())))
    path.write_text(yaml.safe_dump(reordered, allow_unicode=True, sort_keys=False, default_flow_style=True,
                                   width=60), encoding="utf-8")
    assert _hash(mb.root) == before
    path.write_text("# a comment\n" + yaml.safe_dump(data, allow_unicode=False, indent=4), encoding="utf-8")
    assert _hash(mb.root) == before


def test_hash_same_after_nfd_rewrite_of_strings(mb: MiniBundle) -> None:
    import unicodedata

    before = _hash(mb.root)
    path = mb.scenario_file("pickup_cancel_unverified")
    text = path.read_text(encoding="utf-8")
    path.write_text(unicodedata.normalize("NFD", text), encoding="utf-8")
    assert _hash(mb.root) == before


@pytest.mark.parametrize("change", ["scenario", "prompt", "agent", "bundle"])
def test_hash_changes_with_content(mb: MiniBundle, change: str) -> None:
    before = _hash(mb.root)
    if change == "scenario":
        mb.edit_scenario(lambda d: d["brief"].update(persona="Calm."))
    elif change == "prompt":
        p = mb.agent_dir / "prompt.md"
        p.write_text(p.read_text() + "\nOne more rule.\n")
    elif change == "agent":
        mb.edit_agent(lambda d: d.update(description="Changed."))
    else:
        mb.edit(mb.root / "bundle.yaml", lambda d: d.update(version="0.0.2"))
    assert _hash(mb.root) != before


def test_hash_does_not_depend_on_location(mb: MiniBundle, tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere" / "x"
    moved.parent.mkdir()
    mb.root.rename(moved)
    assert _hash(moved) == _hash(MINIMAL)


# ------------------------------------------------------------------ problems instead of exceptions


def test_not_a_folder_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_bundle_collect(tmp_path / "missing")


def test_load_bundle_raises_bundle_error_with_all_problems(mb: MiniBundle) -> None:
    mb.edit_scenario(lambda d: d.update(difficulty="easy", language=5))
    with pytest.raises(BundleError) as ei:
        load_bundle(mb.root)
    paths = {(p.code, p.path) for p in ei.value.problems}
    assert ("schema", "difficulty") in paths and ("schema", "language") in paths
    assert "pickup_evening_booking.yaml:difficulty" in str(ei.value)


def test_a_brief_script_that_names_no_script_is_a_schema_problem(mb: MiniBundle) -> None:
    """The caller's speech is checked against the brief's script, so a name with no Unicode script
    (a language name, a typo) is reported where it stands; an alias or an ISO code is accepted."""
    mb.edit_scenario(lambda d: d["brief"].update(script="Urdu"))
    problems = [p for p in load_bundle_collect(mb.root)[1] if p.code == "schema"]
    assert [p.path for p in problems] == ["brief.script"]
    assert "'Urdu' is not a script name" in problems[0].message
    for name in ("Perso-Arabic", "arab", "Bangla"):
        mb.edit_scenario(lambda d, name=name: d["brief"].update(script=name))
        assert load_bundle_collect(mb.root)[1] == []


def test_missing_bundle_yaml_and_agents(tmp_path: Path) -> None:
    b, probs = load_bundle_collect(tmp_path)
    assert b is None and [(p.file, p.code) for p in probs] == [("bundle.yaml", "missing")]
    (tmp_path / "bundle.yaml").write_text("name: x\nversion: '1'\n")
    b, probs = load_bundle_collect(tmp_path)
    assert b is not None and [(p.file, p.code) for p in probs] == [("agents", "missing")]


def test_broken_agent_still_reports_scenario_schema_errors(mb: MiniBundle) -> None:
    mb.edit_agent(lambda d: d.update(direction="sideways"))
    mb.edit_scenario(lambda d: d.update(difficulty="easy"))
    b, probs = load_bundle_collect(mb.root)
    assert b is not None and AGENT not in b.agents
    where = {(p.file.split("/")[-1], p.path) for p in probs}
    assert ("agent.yaml", "direction") in where
    assert (f"{BOOKING}.yaml", "difficulty") in where


def test_unquoted_yaml_dates_stay_strings(mb: MiniBundle) -> None:
    path = mb.scenario_file()
    text = path.read_text()
    text = text.replace('datetime: "2026-03-14T17:20:00+05:30"', "datetime: 2026-03-14T17:20:00+05:30")
    text = text.replace('dob: "1988-04-12"', "dob: 1988-04-12")
    path.write_text(text)
    b, probs = load_bundle_collect(mb.root)
    assert probs == []
    assert b is not None
    scen = b.scenario(BOOKING)[1]
    assert scen.brief.datetime == "2026-03-14T17:20:00+05:30"
    assert scen.brief.known_facts["dob"] == "1988-04-12"


@pytest.mark.parametrize(
    ("text", "code", "fragment"),
    [
        ("a: [1, 2\n", "parse", "invalid YAML at line"),
        ("a: 2026-02-30\nb: !!timestamp 2026-02-30\n", "parse", "day is out of range"),
        ("a: " + "9" * 5000 + "\n", "parse", "invalid value"),
        ("{1: a}\n", "parse", "key 1 at the top is a int, not a string"),
        ("yes: 1\n", "parse", "key True"),
        ("a: !!binary aGVsbG8=\n", "parse", "value at a is a bytes"),
        ("a: !!set {x}\n", "parse", "value at a is a set"),
        ("a: !!python/object:os.system x\n", "parse", "invalid YAML"),
        ("a: !!timestamp 2026-03-14\n", "parse", "value at a is a date"),
        ("[" * 100 + "]" * 100 + "\n", "size.depth", "nested deeper than 64"),
    ],
)
def test_hostile_yaml_is_a_problem(tmp_path: Path, text: str, code: str, fragment: str) -> None:
    f = tmp_path / "x.yaml"
    f.write_text(text)
    probs: list = []
    assert read_data_file(tmp_path, f, probs) is None
    assert [p.code for p in probs] == [code]
    assert fragment in probs[0].message


def test_billion_laughs_is_stopped(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 9):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    f = tmp_path / "bomb.yaml"
    f.write_text("\n".join(lines) + "\n")
    probs: list = []
    assert read_data_file(tmp_path, f, probs) is None
    assert probs[0].code == "size.expansion"


def test_json_problems(tmp_path: Path) -> None:
    for text, frag in (('{"a": 1,}', "invalid JSON at line 1"), ("9" * 5000, "invalid value"),
                       ("[" * 100_000, "nesting too deep")):
        f = tmp_path / "x.json"
        f.write_text(text)
        probs: list = []
        assert read_data_file(tmp_path, f, probs) is None
        assert frag in probs[0].message, probs


def test_not_utf8(tmp_path: Path) -> None:
    f = tmp_path / "x.yaml"
    f.write_bytes(b"a: \xff\xfe\n")
    probs: list = []
    assert read_data_file(tmp_path, f, probs) is None
    assert probs[0].code == "read" and "not UTF-8" in probs[0].message


def test_file_size_limit(mb: MiniBundle, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "MAX_FILE_BYTES", 1500)
    _, probs = load_bundle_collect(mb.root)
    big = {p.file.split("/")[-1] for p in probs if p.code == "size.file"}
    assert big == {"agent.yaml", f"{BOOKING}.yaml", "pickup_cancel_unverified.yaml"}
    monkeypatch.setattr(loader, "MAX_FILE_BYTES", 2000)
    (mb.agent_dir / "prompt.md").write_text("x" * 2001)
    _, probs = load_bundle_collect(mb.root)
    big = {p.file.split("/")[-1] for p in probs if p.code == "size.file"}
    assert big == {"prompt.md", f"{BOOKING}.yaml", "pickup_cancel_unverified.yaml"}


def test_total_size_limit(mb: MiniBundle, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "MAX_TOTAL_BYTES", 9000)
    _, probs = load_bundle_collect(mb.root)
    assert any(p.code == "size.bundle" for p in probs)


def test_file_count_limit(mb: MiniBundle, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "MAX_FILES", 2)
    _, probs = load_bundle_collect(mb.root)
    assert [p.code for p in probs] == ["size.files"]


def test_symlinked_scenario_outside_the_bundle(mb: MiniBundle, tmp_path: Path) -> None:
    outside = tmp_path / "secret.yaml"
    outside.write_text(mb.scenario_file().read_text())
    link = mb.agent_dir / "scenarios" / "linked.yaml"
    os.symlink(outside, link)
    _, probs = load_bundle_collect(mb.root)
    assert [(p.file, p.code) for p in probs] == [(f"agents/{AGENT}/scenarios/linked.yaml", "path.escape")]


def test_instructions_file_escaping(mb: MiniBundle, tmp_path: Path) -> None:
    (tmp_path / "outside.md").write_text("secret")
    mb.edit_agent(lambda d: d.update(instructions_file="../../../outside.md"))
    _, probs = load_bundle_collect(mb.root)
    assert [(p.path, p.code) for p in probs] == [("instructions_file", "path.escape")]


def test_symlink_loop_is_a_problem(mb: MiniBundle) -> None:
    loop = mb.agent_dir / "scenarios" / "loop.yaml"
    os.symlink(loop, loop)
    _, probs = load_bundle_collect(mb.root)
    assert [p.code for p in probs] == ["read"]


def test_sha256_text() -> None:
    assert sha256_text("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


# ------------------------------------------------------------------ the YAML loader matches safe_load


_TRICKY = """
a: yes
b: No
c: ~
d: ""
e: 0x1F
f: 0o17
g: 1_000
h: .inf
i: -.NaN
j: 1:30
k: 190:20:30.15
l: '123'
m: "true"
n: null
o: [1, 2.5, -3e2, +7]
p: {x: Off, y: on}
q: &anchor {k: v}
r: *anchor
s:
  <<: *anchor
  extra: 1
t: |
  literal
u: >-
  folded
  text
v: 0b101
x: 2026-03-14
"""


def _safe(text: str) -> object:
    return yaml.safe_load(text)


def test_yaml_loader_matches_safe_load_on_tricky_scalars() -> None:
    ours = yaml.load(_TRICKY, Loader=YAML_LOADER)
    theirs = _safe(_TRICKY)
    assert theirs["x"] != "2026-03-14" and ours["x"] == "2026-03-14"  # the one intended difference
    del ours["x"], theirs["x"]
    assert repr(ours) == repr(theirs)  # repr: NaN != NaN, but its repr is the same
    for bad in ("w: =\n", "[a, b\n"):  # PyYAML's own quirks and errors are kept, too
        with pytest.raises(yaml.YAMLError):
            _safe(bad)
        with pytest.raises(yaml.YAMLError):
            yaml.load(bad, Loader=YAML_LOADER)


_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
              st.text(), st.sampled_from(["yes", "off", "~", "0x1f", "1:30", "1_0", ".inf", "<<", "="])),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=15,
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(_json, st.booleans(), st.sampled_from([None, '"', "'"]))
def test_yaml_loader_matches_safe_load(data: object, flow: bool, style: str | None) -> None:
    text = yaml.safe_dump(data, default_flow_style=flow, default_style=style, allow_unicode=True)
    assert yaml.load(text, Loader=YAML_LOADER) == _safe(text)


@pytest.mark.parametrize("content", ["", "# only a comment\n", "null\n", "~\n"])
@pytest.mark.parametrize("which", ["scenario", "agent", "bundle"])
def test_a_file_without_data_is_a_problem_not_skipped(mb: MiniBundle, which: str, content: str) -> None:
    """Regression: an empty scenario or agent file was skipped, and validate said "no problems"."""
    path = {
        "scenario": mb.scenario_file(),
        "agent": mb.agent_dir / "agent.yaml",
        "bundle": mb.root / "bundle.yaml",
    }[which]
    path.write_text(content, encoding="utf-8")
    problems = [p for p in mb.problems() if p.code == "empty"]
    assert [p.file for p in problems] == [str(path.relative_to(mb.root))]
    assert "holds no data" in problems[0].message


def test_a_scenarios_file_in_place_of_the_folder_is_a_problem(mb: MiniBundle) -> None:
    import shutil

    scen = mb.agent_dir / "scenarios"
    shutil.rmtree(scen)
    scen.write_text("not a folder", encoding="utf-8")
    assert any(p.code == "read" and p.file.endswith("scenarios") for p in mb.problems())


@pytest.mark.parametrize(
    ("template", "fragment"),
    [
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "range()"),
        ('{{ "x" * 100000000 }}', "repetition"),
        ("{{ 10 ** 100000 }}", "exponent"),
        ("{% for i in range(90000) %}{{ 'y' * 9000 }}{% endfor %}", "rendered text passes"),
    ],
)
def test_runaway_templates_stop_quickly(template: str, fragment: str) -> None:
    """Regression: nested loops over big ranges rendered forever; a huge repetition took 39 s."""
    import time

    b = load_bundle(MINIMAL)
    agent, scen = b.scenario(BOOKING)
    evil = agent.model_copy(update={"instructions_template": template})
    start = time.thread_time()  # CPU time: a loaded machine does not stretch it
    with pytest.raises(ValueError, match="instructions template") as info:
        render_instructions(evil, scen)
    assert fragment in str(info.value)
    assert time.thread_time() - start < limit(5.0)


def test_ordinary_loops_and_repetition_still_render() -> None:
    b = load_bundle(MINIMAL)
    agent, scen = b.scenario(BOOKING)
    template = "{% for i in range(3) %}{{ i }}{% endfor %} {{ '-' * 5 }} {{ 2 ** 10 }}"
    ok = agent.model_copy(update={"instructions_template": template})
    assert render_instructions(ok, scen) == "012 ----- 1024"


def test_two_files_for_one_scenario_name_each_other(mb: MiniBundle) -> None:
    """Regression: X.yaml beside X.json was reported as "also used by X.json" on X.json itself."""
    yaml_file = mb.scenario_file()
    json_file = yaml_file.with_suffix(".json")
    json_file.write_text(json.dumps(mb.read(yaml_file)), encoding="utf-8")
    dup = [p for p in mb.problems() if p.code == "scenario.duplicate_id"]
    assert len(dup) == 1
    assert dup[0].file == str(yaml_file.relative_to(mb.root))  # sorted: .json loads first
    assert json_file.name in dup[0].message and yaml_file.name in dup[0].message


def test_agent_file_in_two_formats_is_reported(mb: MiniBundle) -> None:
    """Regression: agent.json beside agent.yaml was ignored without a word."""
    agent_yaml = mb.agent_dir / "agent.yaml"
    (mb.agent_dir / "agent.json").write_text(json.dumps(mb.read(agent_yaml)), encoding="utf-8")
    [p] = [p for p in mb.problems() if p.file.endswith("agent.json")]
    assert p.code == "read" and "agent.yaml is also here" in p.message


@pytest.mark.parametrize(
    ("template", "fragment"),
    [
        ("{{ 'x'|center(10 ** 9) }}", "size argument"),
        ("{{ 'x'.ljust(10 ** 9) }}", "size argument"),
        ("{{ ('a' * 399999)|replace('a', 'b' * 1000) }}", "replace: a result over"),
        ("{{ ('a' * 399999).replace('a', 'b' * 1000) }}", "replace(): a result over"),
        ("{{ ('\\n' * 399999)|indent('x' * 399999) }}", "indent: a result over"),
        ("{{ ('x' * 100000).join(['a'] * 100) }}", "join(): a result over"),
        ("{{ (['x' * 399999] * 1000)|join }}", "join: a result over"),
        ("{{ '%999999999d' % 1 }}", "format width"),
        ("{{ '%999999999d'|format(1) }}", "format width"),
        ("{{ '{:999999999}'.format(1) }}", "format width"),
        ("{{ lipsum(10 ** 6) }}", "lipsum"),
    ],
)
def test_calls_and_filters_that_would_build_huge_text_stop_quickly(template: str, fragment: str) -> None:
    """As a kind: a call or filter whose arguments would build a huge string
    before the rendered-size check is refused, as a located template problem."""
    import time

    b = load_bundle(MINIMAL)
    agent, scen = b.scenario(BOOKING)
    evil = agent.model_copy(update={"instructions_template": "ok\n" + template})
    start = time.thread_time()  # CPU time: a loaded machine does not stretch it
    with pytest.raises(ValueError, match="instructions template: line 2: ") as info:
        render_instructions(evil, scen)
    assert fragment in str(info.value)
    assert time.thread_time() - start < limit(5.0)


@pytest.mark.parametrize(
    ("template", "error"),
    [
        ("{{ 1 / 0 }}", "ZeroDivisionError"),
        ("{{ 'a' + 1 }}", "TypeError"),
        ("{{ 'abc'|format(1, 2, 3) }}", "TypeError"),
        ("{{ 'a'|truncate(-1) }}", "AssertionError"),
        ("{{ [1, 2]|slice(0)|list }}", "ZeroDivisionError"),
    ],
)
def test_python_errors_in_expressions_are_located_template_errors(template: str, error: str) -> None:
    """A Python error raised inside an expression is a ``prompt.render`` problem with its line, never
    an ``[internal]`` failure of the audit."""
    b = load_bundle(MINIMAL)
    agent, scen = b.scenario(BOOKING)
    evil = agent.model_copy(update={"instructions_template": "one\ntwo\n" + template})
    with pytest.raises(ValueError, match=f"instructions template: line 3: {error}"):
        render_instructions(evil, scen)


def test_ordinary_calls_and_filters_still_render() -> None:
    b = load_bundle(MINIMAL)
    agent, scen = b.scenario(BOOKING)
    template = ("{{ 'x'.center(5) }}|{{ 'a-b'|replace('-', '+') }}|{{ [1, 2]|join(', ') }}|{{ '%05d' % 42 }}|"
                "{{ 'x\\ny'|indent(2) }}|{{ '{:>4}'.format(7) }}|{{ 'Abc'|upper }}")
    ok = agent.model_copy(update={"instructions_template": template})
    assert render_instructions(ok, scen) == "  x  |a+b|1, 2|00042|x\n  y|   7|ABC"
