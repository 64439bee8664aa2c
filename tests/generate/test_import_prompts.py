"""Prompts people actually have: a Vapi-style prompt with Liquid variables and
[Bracketed] sections, a Retell-style one with {{dynamic_variables}} and Markdown headings, and a
Bland-style one with literal braces imported with --template none. The prompts are the project's
own, written in the platforms' styles (docs/generating.md, "Importing a prompt")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from callbench.bundle.coverage import PREAMBLE, document_sections
from callbench.bundle.models import Scenario
from callbench.bundle.render import render_instructions
from callbench.bundle.validate.audits import load_bundle
from callbench.generate.liquid import TemplateImportError, import_template
from callbench.generate.plan import make_plan

from .conftest import DATA, invoke

PROMPTS = DATA / "prompts"


def _new_agent(root: Path, name: str, *extra: str) -> tuple[int, str, str]:
    return invoke("new-agent", str(root), "--prompt", str(PROMPTS / f"{name}.md"), "--tools",
                  str(PROMPTS / f"{name}_tools.json"), "--id", name, "--languages", "en-US",
                  "--call-ending", "end_call", "--success", "end_call:status=ended", *extra)


def _scenario_at(datetime: str) -> Scenario:
    data = yaml.safe_load((DATA / "water_no_supply_tanker.yaml").read_text(encoding="utf-8"))
    data["brief"]["datetime"] = datetime
    return Scenario.model_validate(data)


def test_vapi_prompt_imports_with_declared_variables_and_plans_every_section(tmp_path: Path) -> None:
    code, out, err = _new_agent(tmp_path / "b", "vapi_vet")
    assert code == 0, out + err
    assert "time zone 'America/Los_Angeles' dropped" in out
    agent = load_bundle(tmp_path / "b").agents["vapi_vet"]
    assert agent.config.variables == {"clinic_name": "Cedar Hollow Animal Hospital",
                                      "customer_first_name": "the caller", "customer_is_returning": ""}
    text = render_instructions(agent, _scenario_at("2026-05-12T09:30:00-07:00"))
    assert "receptionist of Cedar Hollow Animal Hospital." in text
    assert "Today is Tuesday, May 12, 2026." in text
    assert "by name" not in text  # customer_is_returning defaults to '' (false)
    titles = [s.title for s in document_sections(render_instructions(agent))]
    # the same step title in two flows is told apart by its flow
    assert titles == ["Identity", "Style", "Response Guidelines", "Booking Flow",
                      "Booking Flow > 1. Identify", "2. Choose a slot", "3. Confirm", "Cancellation Flow",
                      "Cancellation Flow > 1. Identify", "2. Confirm", "Call Closing"]
    # the rules before any Markdown heading are their own sections now, and the plan assigns each
    rendered = render_instructions(agent)
    plan = make_plan(agent, rendered, n=len(titles), seed=1, languages={}, difficulty={})
    planned = {t for i in plan.items for t in i.sections}
    body_sections = {s.title for s in document_sections(rendered) if rendered[s.start:s.end].count("\n") > 1}
    assert planned == body_sections and "Response Guidelines" in planned


def test_vapi_sms_tool_is_refused_with_its_location(tmp_path: Path) -> None:
    tools = json.loads((PROMPTS / "vapi_vet_tools.json").read_text(encoding="utf-8"))
    tools.append({"type": "sms", "metadata": {"from": "+15550100"}})
    bad = tmp_path / "tools.json"
    bad.write_text(json.dumps(tools), encoding="utf-8")
    code, _, err = invoke("new-agent", str(tmp_path / "b"), "--prompt", str(PROMPTS / "vapi_vet.md"),
                          "--tools", str(bad), "--call-ending", "end_call",
                          "--success", "end_call:status=ended")
    assert code == 2 and "tools[5].type: 'sms' is not a function tool" in err


def test_retell_prompt_with_dynamic_variables(tmp_path: Path) -> None:
    code, out, err = _new_agent(tmp_path / "b", "retell_dental")
    assert code == 0, out + err
    agent = load_bundle(tmp_path / "b").agents["retell_dental"]
    assert agent.config.variables == {"current_time": "[current_time]", "user_name": "[user_name]"}
    titles = [s.title for s in document_sections(render_instructions(agent))]
    assert titles == ["Role", "Task", "Rules", "Closing"]


def test_bland_prompt_kept_verbatim_with_template_none(tmp_path: Path) -> None:
    # {{job.id}} is CRM text the agent must not say, not a variable: keep the prompt as written
    code, out, err = _new_agent(tmp_path / "b", "bland_plumbing", "--template", "none")
    assert code == 0, out + err
    agent = load_bundle(tmp_path / "b").agents["bland_plumbing"]
    text = render_instructions(agent)
    assert "look like {{job.id}}; never" in text and agent.config.variables == {}
    assert [s.title for s in document_sections(text)] == [PREAMBLE]


@pytest.mark.parametrize(("snippet", "named"), [
    ("{{ name | truncate: 20 }}", "the Liquid filter 'truncate'"),
    ("{% for p in customer.pets %}{{ p }}{% endfor %}", "the Liquid tag {% for %}"),
    ("{% case kind %}{% when 'dog' %}woof{% endcase %}", "the Liquid tag {% case %}"),
    ("{{ customer.age | plus: 1 }}", "the Liquid filter 'plus'"),
    ("{{ customer.name | default: 'x' }} {{ a + b }}", "{{ a + b }} is not a variable"),
])
def test_untranslatable_syntax_is_named_with_its_line(snippet: str, named: str) -> None:
    with pytest.raises(TemplateImportError) as err:
        import_template(f"[Identity]\n{snippet}\n", "auto", "prompt.md")
    message = str(err.value)
    assert message.startswith("prompt.md line 2: ") and named in message and "--template none" in message
