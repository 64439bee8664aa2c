"""The static audits of a bundle (``callbench validate``): every problem at once, before a single
model call is paid for.

:mod:`~callbench.bundle.validate.audits` is the entry point (``validate_path``, ``load_bundle``);
the other modules are its audits (content, references, matchers, tools, reference replay, state
spec, caller isolation) and the result cache of the command (:mod:`~callbench.bundle.validate.cache`,
which imports nothing heavy, hence this file imports nothing).

This room sits above the bundle core and ``state/``: they never import it (the loader loads and
collects problems; it does not audit). Rules in ``tests/bundle/test_rooms.py``.
"""
