"""The ``callbench`` command (console script) and ``python -m callbench``.

:func:`main` runs the command in a supervised child process (:mod:`callbench.runs.supervisor`), so
a native crash (llama.cpp) ends with a one-line cause and remedy instead of a bare ``Segmentation
fault``; the parent imports only what supervising needs. ``CALLBENCH_NO_SUPERVISOR=1`` runs the
command in this process.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Entry point: supervise, or (in the child) run the typer app in :mod:`callbench.cli`.
    Exits with the command's status, or 128 + N when the child died from signal N."""
    from callbench.runs.supervisor import child_command, child_setup, run_supervised, should_supervise

    if should_supervise():
        try:
            code = run_supervised(child_command(sys.argv[1:]))
        except OSError as e:
            print(f"error: cannot start callbench's worker process: {e}", file=sys.stderr)
            code = 2
        raise SystemExit(code)
    child_setup()
    from callbench.cli import app

    app(prog_name="callbench")


if __name__ == "__main__":
    main()
