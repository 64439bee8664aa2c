"""Carry a saved judge validation to a later version of its bundle when nothing its judges read
changed.

A validation (``audit/validations/*.json``, written by ``judge_validation_bench.py`` in about an
hour of CPU) names the bundle hash it was measured on; any edit anywhere in the bundle changes that
hash, and the report then says "judges not validated" although the audited scenarios, their agents
and the judge prompts are the same. This script checks exactly that: the old bundle (the one the
file names, e.g. from ``git archive COMMIT src/callbench/examples/starter``) must hash to the
file's ``bundle_hash``; the audited scenarios and their agents must read the same in both
(:func:`callbench.audit.store.audited_content_sha256`); the judge prompts must be the current
ones. Then the new bundle's hash is added to the file's ``carried_to`` (atomically); otherwise it
exits 1 naming what differs and leaves the file alone.

Run: ``python benchmarks/carry_judge_validation.py --old OLD_BUNDLE --new NEW_BUNDLE --file FILE``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from callbench.audit.carry import carry


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--new", type=Path, required=True)
    ap.add_argument("--file", type=Path, required=True)
    a = ap.parse_args()
    try:
        h = carry(a.old, a.new, a.file)
    except ValueError as e:
        sys.exit(f"not carried: {e}")
    print(f"carried: the validation in {a.file} now also holds for bundle {h[:12]}")


if __name__ == "__main__":
    main()
