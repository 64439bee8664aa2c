"""The ``callbench`` command line (typer): thin over the library, one module per command group.

- :mod:`~callbench.cli.app`: the app, global options, ``version``
- :mod:`~callbench.cli.bundle`: ``validate``, ``audit``, ``inspect``, ``schema``, ``provenance``
- :mod:`~callbench.cli.results`: ``grade``, ``report``, ``agreement``, ``labels``
- :mod:`~callbench.cli.run`: ``run``, ``demo`` (both run through :mod:`~callbench.cli.execute`: the lock,
  the progress bar, Ctrl-C and the exit codes)
- :mod:`~callbench.cli.serve`: ``serve-local``, ``serve-backend``
- :mod:`~callbench.cli.generate`: ``new-agent``, ``generate``, ``review``
- :mod:`~callbench.cli.importers`: ``import tau2``
- :mod:`~callbench.cli.gate`: ``gate`` (CI)

Importing this package registers every command on :data:`app` in the order ``--help`` lists them.
"""

from __future__ import annotations

from callbench.cli import bundle, gate, importers, results, run, serve  # noqa: F401  (registers the commands)
from callbench.cli.app import app
from callbench.cli.generate import register as _register_generate
from callbench.cli.results import report

_register_generate(app)

__all__ = ["app", "report"]
