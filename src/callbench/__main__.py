"""The ``callbench`` command (console script) and ``python -m callbench``.

:func:`main` runs the command in a supervised child process (:mod:`callbench.runs.supervisor`), so
a native crash (llama.cpp) ends with a one-line cause and remedy instead of a bare ``Segmentation
fault``; the parent imports only what supervising needs. ``CALLBENCH_NO_SUPERVISOR=1`` runs the
command in this process.
"""

from __future__ import annotations

import sys
from typing import Any


def main() -> None:
    """Entry point: supervise, or (in the child) run the typer app in :mod:`callbench.cli`.
    Exits with the command's status, or 128 + N when the child died from signal N or stopped
    because signal N asked it to (130 for Ctrl-C, 143 for SIGTERM)."""
    from callbench.runs.supervisor import (
        child_command,
        child_setup,
        note_command,
        run_supervised,
        should_supervise,
    )

    note_command(sys.argv[1:])  # the line of a stop is worded for the command (runs/supervisor.py)
    if should_supervise():
        try:
            code = run_supervised(child_command(sys.argv[1:]))
        except OSError as e:
            print(f"error: cannot start callbench's worker process: {e}", file=sys.stderr)
            code = 2
        raise SystemExit(code)
    from callbench.runs.supervisor import requested_stop, stop_message, stop_reported, stop_status

    try:
        child_setup()
        import callbench

        callbench.RUNNING_AS_COMMAND = True  # validate's result cache serves the command only
        app = _import_cli()
        app(prog_name="callbench")
    except OSError as e:
        # the last net of "one line for every bad input": a file-system error no
        # command caught is one line, exit 4 for a machine fault (disk full, read-only, permission)
        # and 2 otherwise, never a traceback
        from callbench.runs.machine import EXIT_MACHINE_FAULT, machine_fault_message

        line = machine_fault_message(e, e.filename or ".", option="output")
        where = f"{e.filename}: " if e.filename else ""
        print(f"error: {line or where + (e.strerror or str(e))}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_MACHINE_FAULT if line else 2) from None
    except KeyboardInterrupt:  # a stop before the command could handle it (while importing)
        print(stop_message(requested_stop()), file=sys.stderr, flush=True)
        raise SystemExit(stop_status()) from None
    except SystemExit as e:
        # A command that does not handle the stop itself ends in typer's silent exit 130: a stop
        # asked for by a signal exits 128 + that signal, with the line of a stop.
        signum = requested_stop()
        if signum is not None and e.code != 0:
            if not stop_reported():
                print(stop_message(signum), file=sys.stderr, flush=True)
            raise SystemExit(stop_status()) from None
        raise


def _import_cli() -> Any:
    """The typer app, imported with the cyclic garbage collector paused: importing the CLI builds
    many objects (pydantic models, typer commands) and no garbage cycles worth a collection, and
    the collections it would run cost about 0.02 s of every command's start-up.
    Afterwards the collector runs as before. (Not ``gc.freeze()``: frozen module objects change the
    order of destruction at exit, and llama-cpp-python's ``Llama.__del__`` then ran after its own
    module was torn down, printing "Exception ignored ... 'NoneType' object is not callable" at
    the end of ``callbench demo``.)"""
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        from callbench.cli import app
    finally:
        if enabled:
            gc.enable()
    return app


if __name__ == "__main__":
    main()
