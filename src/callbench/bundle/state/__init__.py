"""Stateful backends: the typed spec of an agent's state (:mod:`~callbench.bundle.state.models`,
part of the bundle model), the tables' records and hash (:mod:`~callbench.bundle.state.store`), the
engine that answers a stateful tool call (:mod:`~callbench.bundle.state.engine`), the reviewed
built-in operations (:mod:`~callbench.bundle.state.builtin_ops`) and the grader's state checks
(:mod:`~callbench.bundle.state.check`).

The core imports only ``state.models`` and ``state.store``; the engine, the built-ins and the
state checks sit above the core (rules in ``tests/bundle/test_rooms.py``). This file imports
nothing, so importing the spec does not load the engine.
"""
