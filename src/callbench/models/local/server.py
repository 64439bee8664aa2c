"""``callbench serve-local``: llama-cpp-python's own OpenAI-compatible server with the embedded weights.

It runs ``llama_cpp.server`` (the ``[server]`` extra: FastAPI and uvicorn; tested with
llama-cpp-python 0.3.36, :data:`~callbench.models.local.safeguards.TESTED_LLAMA_CPP_PYTHON`) in this
process, on loopback only (the server has no key), with:

- the weights of ``local:0.5b`` / ``local:1.5b`` joined and verified as the ``local`` provider does
  (:func:`~callbench.models.local.weights.ensure_weights`), or any GGUF file;
- the same CPU safeguard as the ``local`` provider: llama.cpp's extra buffer types off on AMX CPUs
  (the stock server segfaults on its first decode there;
  :func:`~callbench.models.local.safeguards.install_server_safeguard`);
- ``logits_all`` off (the server's default keeps the logits of every prompt token: 4 bytes times
  the 151,936-token vocabulary per token, which grew the server to 19.5 GB), every core for
  prompt reading and generation, a context of :data:`DEFAULT_N_CTX` tokens and a RAM prompt cache
  of :data:`DEFAULT_CACHE_BYTES` (four roles take turns on one model, so without it every switch
  re-reads the role's whole prompt at 55-90 tokens/s on 2 cores). The cache is
  :class:`~callbench.models.local.server_cache.BoundedRAMCache`: the server's own
  ``LlamaRAMCache`` counts only the KV state of each entry and not the 311 MB of scores each holds,
  so it grew the server to 7.6 GiB; resident memory now stays within the model, its
  context and the cache bound;
- the GGUF's own chat template by default (``--chat-format template``): it puts the tools in the
  prompt and renders tool results, and the model's calls come back as JSON text in ``content``
  (``{"name": ..., "arguments": {...}}``), which the ``openai:`` adapter parses when
  ``parse_content_tool_calls`` is true, as :func:`role_settings` sets for the candidate.
  ``--chat-format chatml-function-calling`` is llama-cpp-python's grammar-driven format; measured
  with 0.3.36 and ``tool_choice: auto``, it answered a call as the text ``functions.<name>:``
  without arguments, and its template drops ``tool`` messages (the model never sees a result).

:func:`role_settings` is what a run needs to use the server (every role on ``openai:<alias>``).
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from callbench.models.local.openmp import import_llama_cpp
from callbench.models.local.safeguards import extra_bufts_enabled, install_server_safeguard, note_native
from callbench.models.local.server_cache import DEFAULT_CACHE_BYTES, install_bounded_cache
from callbench.models.local.weights import VARIANTS, check_gguf, default_variant, ensure_weights

DEFAULT_PORT = 8000
DEFAULT_N_CTX = 16384
"""Tokens of context: the starter bundle's longest judge prompts fit (the model's own limit is 32,768)."""
CLIENT_TIMEOUT_S = 1800.0
"""The request timeout :func:`role_settings` gives: one 9,000-token prompt read took 175-533 s on
2 cores, well over the adapter's default of 120 s."""
CHAT_FORMATS = ("template", "chatml-function-calling")
ROLES = ("candidate", "caller", "task_judge", "conversation_judge")


class ServeError(ValueError):
    """A bad ``serve-local`` option, missing weights or a missing ``[server]`` extra."""


class ServeOptions(BaseModel):
    """The options of ``callbench serve-local``. ``model`` is ``local``, ``local:0.5b``,
    ``local:1.5b`` or a GGUF path; ``threads`` 0 means every core; ``cache_bytes`` 0 turns the
    prompt cache off."""

    host: str = "127.0.0.1"
    port: int = Field(default=DEFAULT_PORT, ge=1, le=65535)
    model: str = "local:0.5b"
    threads: int = Field(default=0, ge=0)
    n_ctx: int = Field(default=DEFAULT_N_CTX, ge=512)
    chat_format: str = "template"
    cache_bytes: int = Field(default=DEFAULT_CACHE_BYTES, ge=0)


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def resolve_model(model: str) -> tuple[Path, str]:
    """The GGUF path and the model alias the server answers to for ``model``.

    ``local`` / ``local:0.5b`` / ``local:1.5b`` are the embedded weights (alias ``local-0.5b``...);
    anything else (with or without a ``local:`` prefix) is a GGUF path (alias: the file's stem).
    Raises ServeError for missing or damaged weights or a file that is not GGUF."""
    from callbench.models.local.weights import WeightsError

    name = model.removeprefix("local:") if model.startswith("local:") else ("" if model == "local" else model)
    try:
        if name in ("", *VARIANTS):
            variant = name or default_variant()
            return ensure_weights(variant), f"local-{variant}"
        if not (name.endswith(".gguf") or "/" in name or Path(name).is_file()):
            raise ServeError(f"--model {model!r}: expected local, local:0.5b, local:1.5b or the path of "
                             "a .gguf file")
        path = check_gguf(Path(name))
    except WeightsError as e:
        raise ServeError(str(e)) from None
    return path, path.stem


def threads_for(options: ServeOptions) -> int:
    """``options.threads``, or every core this process may use when 0."""
    if options.threads:
        return options.threads
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def llama_model_settings(options: ServeOptions, path: Path, alias: str) -> dict[str, Any]:
    """The keyword arguments of ``llama_cpp.server.settings.ModelSettings`` (see the module
    docstring for each choice)."""
    threads = threads_for(options)
    chat_format = None if options.chat_format == "template" else options.chat_format
    return {
        "model": str(path), "model_alias": alias, "n_ctx": options.n_ctx, "n_batch": 512,
        "n_threads": threads, "n_threads_batch": threads, "logits_all": False,
        "chat_format": chat_format, "cache": options.cache_bytes > 0, "cache_type": "ram",
        "cache_size": options.cache_bytes or DEFAULT_CACHE_BYTES, "verbose": False,
    }


def llama_server_settings(options: ServeOptions) -> dict[str, Any]:
    """The keyword arguments of ``llama_cpp.server.settings.ServerSettings``: the address, and
    ``interrupt_requests`` off. llama-cpp-python's default (on) ends a streamed reply early, with
    a plain ``data: [DONE]`` and no finish reason, as soon as another request waits for the model
    (``llama_cpp/server/app.py``, ``get_event_publisher``): at a concurrency above 1, or with a
    judge's request arriving while a candidate streams, a reply would be cut where the server chose
    and recorded as the model's. Requests wait their turn instead."""
    return {"host": options.host, "port": options.port, "interrupt_requests": False}


def base_url(options: ServeOptions) -> str:
    """``http://HOST:PORT/v1`` (IPv6 hosts bracketed)."""
    host = f"[{options.host}]" if ":" in options.host and not options.host.startswith("[") else options.host
    return f"http://{host}:{options.port}/v1"


def role_settings(options: ServeOptions, alias: str) -> dict[str, dict[str, Any]]:
    """A ``--settings`` file's content putting every role on this server: spec ``openai:<alias>``,
    its ``base_url``, a ``timeout_s`` of :data:`CLIENT_TIMEOUT_S`, and for the candidate
    ``parse_content_tool_calls`` when the chat format returns tool calls as text."""
    common: dict[str, Any] = {"spec": f"openai:{alias}", "base_url": base_url(options),
                              "timeout_s": CLIENT_TIMEOUT_S}
    out = {role: dict(common) for role in ROLES}
    if options.chat_format == "template":
        out["candidate"]["parse_content_tool_calls"] = True  # the template returns calls as text
    return out


def usage_text(options: ServeOptions, alias: str, settings_path: Path | None) -> str:
    """What ``serve-local`` prints once the model is loaded: the base URL, the spec and the settings
    a run needs, and a ``callbench run`` line."""
    spec = f"openai:{alias}"
    where = str(settings_path) if settings_path else "SETTINGS.yaml"
    lines = [
        f"serving {alias} at {base_url(options)} (llama-cpp-python's server; Ctrl-C stops it)",
        f"model spec for every role: {spec}",
        f"run settings ({'written to ' + str(settings_path) if settings_path else 'save as ' + where}):",
        yaml.safe_dump(role_settings(options, alias), sort_keys=False).rstrip(),
        f"e.g.: callbench run BUNDLE --candidate {spec} --caller {spec} --task-judge {spec} "
        f"--conversation-judge {spec} --settings {where} --concurrency 1 --out RUN_DIR",
    ]
    return "\n".join(lines)


def write_settings(path: Path, options: ServeOptions, alias: str) -> None:
    """Write :func:`role_settings` as YAML to ``path`` (atomically)."""
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        yaml.safe_dump(role_settings(options, alias), f, sort_keys=False)
    os.replace(tmp, path)


def check_options(options: ServeOptions) -> None:
    """Raise ServeError for a host that is not loopback or an unknown chat format."""
    if not is_loopback(options.host):
        raise ServeError(f"--host {options.host}: serve-local listens on loopback only (127.0.0.1, ::1, "
                         "localhost): the server has no key")
    if options.chat_format not in CHAT_FORMATS:
        raise ServeError(f"--chat-format {options.chat_format!r}: expected one of {', '.join(CHAT_FORMATS)}")


def serve(options: ServeOptions, *, settings_path: Path | None = None, echo: Any = print) -> None:
    """Load the model, print :func:`usage_text` through ``echo`` and serve until interrupted.

    Raises ServeError for bad options, missing weights or a missing ``[server]`` extra."""
    check_options(options)
    try:
        # before llama.cpp loads: how its threads wait, for the load seen at start (models/local/openmp.py)
        import_llama_cpp(threads_for(options))
        import uvicorn
        from llama_cpp.server.app import create_app
        from llama_cpp.server.settings import ModelSettings, ServerSettings
    except ImportError as e:
        raise ServeError(f"serve-local needs llama-cpp-python's server: pip install 'callbench[server]' "
                         f"({e})") from None
    path, alias = resolve_model(options.model)
    try:
        extra = extra_bufts_enabled()
    except ValueError as e:
        raise ServeError(str(e)) from None
    install_server_safeguard(extra)
    import llama_cpp

    install_bounded_cache(llama_cpp)
    model_settings = ModelSettings(**llama_model_settings(options, path, alias))
    server_settings = ServerSettings(**llama_server_settings(options))
    note_native(f"llama.cpp serving {alias} on {base_url(options)} (extra buffer types "
                f"{'on' if extra else 'off'})")
    app = create_app(server_settings=server_settings, model_settings=[model_settings])  # loads the model
    if settings_path is not None:
        write_settings(settings_path, options, alias)
    echo(usage_text(options, alias, settings_path))
    uvicorn.run(app, host=options.host, port=options.port, log_level="warning")
