"""Carrying a saved judge validation to a later version of its bundle when nothing its judges read
changed (``benchmarks/carry_judge_validation.py``; docs/validity.md "Saved validations")."""

from __future__ import annotations

from pathlib import Path

from callbench.audit.store import JudgeAudit, audited_content_sha256, save_judge_audit
from callbench.bundle.validate.audits import load_bundle
from callbench.grade.prompts import PROMPT_VERSION


def carry(old_dir: Path, new_dir: Path, file: Path) -> str:
    """Add the new bundle's hash to ``file``'s ``carried_to`` and return it; raises ``ValueError``
    naming what differs (the old bundle is not the audited one, an audited scenario or agent changed,
    or the judge prompts changed)."""
    audit = JudgeAudit.model_validate_json(file.read_text(encoding="utf-8"))
    old, new = load_bundle(old_dir), load_bundle(new_dir)
    if old.content_hash != audit.bundle_hash:
        raise ValueError(f"{old_dir} hashes to {old.content_hash[:12]}, the validation was made on "
                         f"{audit.bundle_hash[:12]}")
    if audit.prompt_version != PROMPT_VERSION:
        raise ValueError(f"judge prompts changed: {audit.prompt_version} -> {PROMPT_VERSION}")
    for sid in audit.scenario_ids:
        try:
            same = audited_content_sha256(old, [sid]) == audited_content_sha256(new, [sid])
        except KeyError:
            raise ValueError(f"scenario {sid} is not in {new_dir}") from None
        if not same:
            raise ValueError(f"scenario {sid} or its agent reads differently in {new_dir}")
    if new.content_hash != audit.bundle_hash and new.content_hash not in audit.carried_to:
        audit.carried_to.append(new.content_hash)
        save_judge_audit(audit, file)
    return new.content_hash
