"""Scenario generation from an agent's own prompt and tools (issue 13; DESIGN.md "generate/").

Stages, one module each: :mod:`.tools_import` and :mod:`.new_agent` (bring your own agent),
:mod:`.plan` (what a batch must cover), :mod:`.request` and :mod:`.rules` (what the generator model
is sent), :mod:`.audit` (validate + the run audit on a candidate), :mod:`.duplicates` (near-duplicate
rejection), :mod:`.generator` (the request / audit / repair loop), :mod:`.manifest` (the generation
manifest ``generation.yaml``) and :mod:`.review` (accept / reject). generate/ sits above runs/: it
uses models/ and the audit, and writes bundle files.
"""
