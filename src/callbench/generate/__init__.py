"""Scenario generation from an agent's own prompt and tools (DESIGN.md "generate/").

Stages, one module each: :mod:`.tools_import` and :mod:`.new_agent` (bring your own agent),
:mod:`.plan` (what a batch must cover), :mod:`.request` and :mod:`.rules` (what the generator model
is sent), :mod:`.audit` (validate + the run audit on a candidate), :mod:`.duplicates`
(near-duplicate rejection), :mod:`.repair` (the request / audit / repair loop of one item),
:mod:`.generator` (the batch), :mod:`.manifest` (the generation manifest ``generation.yaml``),
:mod:`.review` (accept / reject) and :mod:`.settings` (the generator's settings file). generate/
sits above runs/: it uses models/ and the audit, and writes bundle files.
"""
