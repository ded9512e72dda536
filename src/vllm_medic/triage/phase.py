"""Startup or runtime: decided from evidence the log shows, and said so when it shows none.

Evidence, strongest first: the root's traceback frames (engine start-up functions, or request-serving
functions), the root line itself coming from request handling, the server having started or served
before the root (same run of the same file, any file by time), an engine that only a running server
has (`EngineDeadError`), and start-up lines just above the root (weight loading, profiling, graph
capture). Without any of it the phase is *picked* from weaker cues (runtime words in the line such as
`decode`/`retract`/`swap`, runtime-only frames without served traffic), reported with
`evidenced: false` and the note "phase not evidenced"; the caller lowers its confidence. Those cues and
the phase picked when nothing shows one are data: `data/phase.yaml`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

# Frames that only run while the engine starts (profiling, loading, KV-cache sizing, graph capture).
STARTUP_FRAMES = re.compile(
    r"profile_run|determine_available_memory|determine_num_available_blocks|_dummy_run|_dummy_sampler_run"
    r"|load_model|load_weights|capture_model|initialize_kv_cache|_initialize_kv_caches|init_device"
    r"|compile_or_warm_up_model|initialize_from_config|from_engine_args|_init_executor|init_worker"
    r"|init_memory_pool|load_weights_and_postprocess|ModelRunner\.__init__|capture_cuda_graph|CudaGraphRunner"
    # KV-cache sizing (vLLM V1) and TGI's warmup pass.
    r"|get_kv_cache_configs?|check_enough_kv_cache_memory|:warmup\b"
    # Graph capture and model-runner construction as SGLang names them (frames are `file.py:function`).
    r"|init_cuda_graphs?|cuda_graph_runner\.py:__init__|model_runner\.py:(?:__init__|initialize)\b"
    # round 20: a training framework building its model and optimizer before the first step (Megatron's
    # `setup_model_and_optimizer`, DeepSpeed's `deepspeed.initialize` and ZeRO's optimizer construction,
    # whose `initialize_optimizer_states` runs one `optimizer.step()` on zero gradients to create Adam's
    # states: that `step` is not a training step).
    r"|\bsetup_model_and_optimizer\b|\binitialize_optimizer_states\b|\b_configure_zero_optimizer\b"
    r"|deepspeed/__init__\.py:initialize\b"
    # Loading and building a model before it serves: Transformers' weights into a meta model,
    # `from_pretrained`, DeepSpeed's `init_inference`, PyTorch moving a module to its device
    # (`Module._apply`, under `.to()`/`.cuda()`), LMDeploy's TurboMind model instance, vLLM's KV-cache
    # tensors and its kernel warm-ups (`deep_gemm_warmup.py:_warmup`), TensorRT-LLM's executor creation.
    r"|_load_state_dict_into_meta_model|\bfrom_pretrained\b|\binit_inference\b|module\.py:_apply\b"
    r"|create_model_instance|allocate_kv_cache|:_warmup\b|_warmup\.py:|py_executor_creator\.py:|observe_creation_stage"
    # CUDA graph capture as torch names it (`torch/cuda/graphs.py:capture_end`), tpu-inference compiling
    # the model's programs before serving (`compilation_manager.py`).
    r"|\bcapture_(?:begin|end)\b|compilation_manager\.py:"
)
# Frames of request serving and the runtime's words: data (data/phase.yaml), loaded below with the
# phase picked when nothing shows one.
# Lines that exist only once requests are being served.
RUNTIME_TEXT = re.compile(
    r"serving_chat\.py|serving_completion\.py|serving_engine\.py|Error in model execution"
    r"|err_execute_model_input|Dumping input data"
    # TGI's router: tracing spans of a request batch or a generate call, a request that failed while
    # generating, the shard's Prefill/Decode methods (its warm-up has its own `Warmup`).
    r"|\bbatch\{batch_size=\d|\b(?:prefill|decode)\{id=|\b(?:compat_)?generate(?:_stream)?\{"
    r"|Request failed during generation|\binfer:send_error\b|Method (?:Prefill|Decode) encountered an error"
    # An application's own words for a failure while it served a user's request (InvokeAI's
    # `Error while invoking session …`, blind round 9).
    r"|(?i:\b(?:while|during) (?:invoking|processing|handling|serving) (?:a |the )?(?:session|request|invocation|query)\b)"
    # round 10: an access-log line answering a request with 5xx, an error response that carries its
    # request id (Ray Serve's envelope): the failure is a request's.
    r"|\"(?:GET|POST|PUT|DELETE|PATCH) /\S* HTTP/[\d.]+\" 5\d\d\b|\(Request ID: [0-9a-fA-F-]{8,}\)"
)
# A clause that lists what MIGHT have caused the line ("This can happen when … (OOM, preempted node,
# etc.)", Ray's dead-node message): its words are hypotheses, not evidence of the phase (blind round 9).
HEDGE = re.compile(
    r"(?i)(?:^|[.!]\s+)(?:This (?:can|may|might|could) (?:happen|be caused|occur)|Possible (?:causes|reasons))\b.*$"
)
# Start-up progress lines just above the root.
STARTUP_TEXT = re.compile(
    r"(?i)Loading (?:(?:safetensors|pt) )?checkpoint shards|Loading weights|Starting to load model"
    r"|Memory profiling|Capturing (?:CUDA|cuda) ?graph|Capture cuda graph|Load weight (?:begin|end)"
    r"|init engine \(profile|KV Cache is allocated|Memory pool end|Graph capturing"
    r"|Method Warmup encountered an error|Warming up model"
    # Steps and checks that only run while a server starts, named on the root line or just above it:
    # vLLM's free-memory check `on startup`, its warm-up of the sampler, the weights it failed to create
    # or load, the KV-cache sizing (`# GPU blocks`, `Available KV cache memory`, the `max seq len … larger
    # than … can be stored in KV cache` check, `No available memory for the cache blocks`); TensorRT-LLM's
    # k/v cache allocation and execution-context creation; llama.cpp's model and context load
    # (`load_tensors:`, `llama_kv_cache_init:`, `llama_new_context_with_model:`, `llama_model_load:`),
    # which its servers (Ollama, llama-server) run once per model load (not a `vocab only` load: Ollama
    # reads a model's tokenizer alone while it serves, blind round 16's ollama-8492).
    r"|\bon startup is less than\b|\bwhen warming up\b|\bWarmup failed\b"
    r"|\bFailed to (?:create|load) (?:\w+ ){0,3}weights\b|\bFailed to load model\b|Loading model weights took"
    r"|# GPU blocks: \d|Available KV cache memory:|can be stored in KV cache\b|No available memory for the cache blocks"
    r"|\bAllocate \d+ bytes for k/v cache|\btotal tokens in paged KV cache|allocation in IExecutionContext creation"
    r"|^(?:\S+ )*(?:load_tensors|llama_kv_cache_init|llama_new_context_with_model|llama_model_load\w*):(?! vocab only)"
    # ggml's backend buffers (weights, KV cache, compute graph) are allocated as a model is loaded; Ollama's
    # server waiting for its runner to come up; TensorRT-LLM sizing its paged KV cache; vLLM capturing graphs;
    # TGI's warm-up check of the prefill budget; a KV-cache pool too small for its blocks.
    r"|\bggml_backend_\w+_buffer_type_alloc_buffer\b|waiting for server to become available"
    r"|(?i:\bmax tokens in paged kv cache\b)|Capturing the model for CUDA graphs"
    r"|\bnot enough memory to handle \d+ prefill tokens|\bNot enough memory for \d+ blocks of KV cache"
    # vLLM's profiling of multimodal inputs, Ollama refusing a model larger than the memory it has,
    # TensorRT's engine builder, a warm-up function named in a traceback's text. (XLA's `compile permanent
    # error` is no start-up word: torch_xla compiles lazily inside `generate`, blind round 8's torch-xla-7962.)
    r"|\bused for profiling\b|\bprofiling\.py:\d+\]|\bmodel requires more (?:system )?memory\b"
    r"|\[GraphReduction\]|\bDetected \d+ inputs and \d+ output network tensors|, in _?warm_?up\w*\s*$"
)
# Lines an engine prints just below a root that kept it from starting: the root was start-up's. vLLM's
# `EngineCore failed to start.` / `Engine core initialization failed`, TGI's `ShardCannotStart` / `Shard 0
# failed to start` / `Unable to warmup model`, Triton's model that failed to load and its
# `creating modelInstanceState`, TensorRT-LLM's executor that could not be created, llama.cpp's model or
# compute buffers that could not be set up, an application's "model failed to load".
STARTUP_AFTER = re.compile(
    r"EngineCore failed to start|Engine core initialization failed|\bShardCannotStart\b"
    r"|\bShard \d+ failed to start|Unable to warmup model|(?i:\bmodel failed to load\b)|\berror loading model\b"
    r"|failed to allocate compute buffers|Failed to initialize executor|Executor creation failed"
    r"|when creating modelInstanceState|\bloading failed with error\b|\berror loading (?:llama )?server\b"
    r"|failed to create context with model|\bllama_kv_cache_init\b.* failed|\bllama_init_from_model:|\bmsg=load request="
)
# round 20: lines a training loop prints as it starts its steps, just above the root: Megatron's
# `training ...` (pretrain(), after `done with setup ...`), its per-iteration log, Hugging Face Trainer's
# `***** Running training *****` banner (its `Total optimization steps` / `Number of trainable parameters`
# rows, the banner's last; Unsloth prints the same banner as `Total batch size = 8 | Total steps = 60`).
# Printed in the loop's entry, after the model and optimizer exist: a failure below them is a step's.
TRAINING_TEXT = re.compile(
    r"(?i)(?:^|[\]|]\s*)training \.\.\.\s*$|\biteration +\d+/ *\d+ \| consumed samples"
    r"|\*{5} Running training \*{5}|\bTotal optimization steps = [\d,]+|\bNumber of trainable parameters = [\d,]+"
    r"|\bTotal batch size = [\d,]+ \| Total steps = [\d,]+"
)
RUNTIME_SIGNATURES = frozenset({"engine-dead"})
# A traceback chained after the root (`The above exception was the direct cause …`): its frames and
# code lines say where the root was raised (vLLM V1 prints the OOM first, then the chain through
# `run_busy_loop`, blind round 9).
_CHAINED = re.compile(
    r"The above exception was the direct cause of the following exception"
    r"|During handling of the above exception, another exception occurred"
)
_OWN_TRACEBACK = re.compile(r"Traceback \(most recent call last\):?\s*$")
# Served-traffic lines of other engines, screened with prefilter.SERVED_PATTERNS (scanner.build_screens):
# SGLang's periodic decode log with running requests, TGI's router finishing a request.
SERVED_EXTRA = (
    r"Decode batch[.,] #running-req: [1-9]",
    r"text_generation_router::server: \S+: Success",
    # llama-server: a slot picked for a task, a request's chat format, a prompt saved to the cache.
    r"\bslot +\w+: +id +\d+ \| task -?\d+",
    r"\bsrv +(?:params_from_|prompt_save|update_slots):",
    # round 10: Ollama's runner reports the model loaded, its router answered a chat/generate request.
    r"\bllama runner started in \d",
    r"\[GIN\] [^|]*\| 200 \|[^|]*\|[^|]*\| POST +\"/api/(?:chat|generate|embed\w*)\"",
    # round 11: the older llama.cpp server's slot taking a task (`slot 0 is processing [task id: 812]`).
    r"\bslot \d+ is processing \[task id: \d+\]",
)
# A new run of a server inside one file (appended logs): vLLM's args banner, SGLang's server args.
RUN_BANNERS = (
    r"non-default args: \{",
    r"vLLM API server version \d",
    r"\bargs: Namespace\(",
    r"server_args=ServerArgs\(",
)
RUN_BANNER = re.compile("|".join(RUN_BANNERS))


@dataclass(frozen=True)
class Cues:
    """What picks a phase when the log shows none (data/phase.yaml): a list of patterns each."""

    unevidenced_default: str
    runtime_frames: tuple[re.Pattern[str], ...]
    runtime_words: tuple[re.Pattern[str], ...]

    @staticmethod
    def first(patterns: tuple[re.Pattern[str], ...], text: str) -> re.Match[str] | None:
        """The leftmost match of any pattern (as one alternation would give it)."""
        found = [m for p in patterns if (m := p.search(text))]
        return min(found, key=lambda m: (m.start(), -len(m.group(0)))) if found else None


def parse_cues(doc: object, origin: str = "data/phase.yaml") -> Cues:
    """Pure: the phase data, validated (a bad entry names the file and the key)."""
    if not isinstance(doc, dict):
        raise ValueError(f"{origin}: expected a mapping")
    default = doc.get("unevidenced_default")
    if default not in ("startup", "runtime"):
        raise ValueError(f"{origin}: unevidenced_default must be startup or runtime, not {default!r}")

    def patterns(key: str) -> tuple[re.Pattern[str], ...]:
        items = doc.get(key)
        if not isinstance(items, list) or not all(isinstance(x, str) and x for x in items):
            raise ValueError(f"{origin}: {key} must be a list of regular expressions")
        try:
            return tuple(re.compile(x) for x in items)
        except re.error as exc:
            raise ValueError(f"{origin}: {key}: {exc}") from exc

    return Cues(default, patterns("runtime_frames"), patterns("runtime_words"))


@lru_cache(maxsize=1)
def load_cues() -> Cues:
    """The shipped `data/phase.yaml` (parsed once per process)."""
    from vllm_medic.triage.catalogue import safe_yaml

    text = (resources.files("vllm_medic.triage") / "data" / "phase.yaml").read_text(encoding="utf-8")
    return parse_cues(safe_yaml(text))


@dataclass
class Phase:
    value: str  # "startup" | "runtime"
    evidenced: bool
    evidence: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        head = "; ".join(self.evidence[:3])
        return head if self.evidenced else f"phase not evidenced: {self.value} picked ({head})"

    def to_dict(self) -> dict[str, object]:
        return {"value": self.value, "evidence": list(self.evidence), "evidenced": self.evidenced}


def decide(
    *,
    frames: list[str],
    text: str,
    before: list[str],
    after: list[str],
    served_before: str | None,
    runtime_line: str | None,
    runs_note: str | None = None,
    chained_frames: list[str] | tuple[str, ...] = (),
) -> Phase:
    """Pure: everything the caller found about the root and the server around it."""
    notes = [runs_note] if runs_note else []
    cues = load_cues()
    joined = "\n".join(frames)
    if joined and (m := STARTUP_FRAMES.search(joined)):
        return Phase(
            "startup", True, [f"the traceback runs through `{m.group(0)}` (engine start-up)", *notes]
        )
    if m := STARTUP_TEXT.search(text) or STARTUP_AFTER.search(text):
        # A start-up step named on the line itself: a graph capture that failed, a progress bar the
        # error was glued to, an engine saying it could not start.
        return Phase("startup", True, [f"the line itself names a start-up step (`{m.group(0)}`)", *notes])
    if m := RUNTIME_TEXT.search(text):
        return Phase(
            "runtime", True, [f"the error line itself comes from request handling (`{m.group(0)}`)", *notes]
        )
    if served_before:
        return Phase("runtime", True, [f"the server had started/served before it: {served_before}", *notes])
    if runtime_line:
        return Phase("runtime", True, [f"only a running engine logs {runtime_line}", *notes])
    for line in reversed(before):
        if m := STARTUP_TEXT.search(line):
            return Phase("startup", True, [f"it follows a start-up line (`{m.group(0)}`)", *notes])
        if m := TRAINING_TEXT.search(line):
            return Phase(
                "runtime", True, [f"it follows the training loop's start (`{m.group(0).strip()}`)", *notes]
            )
    for line in after[:3]:
        if (m := re.search(r"while processing method (\w+)", line)) and STARTUP_FRAMES.search(m.group(1)):
            return Phase("startup", True, [f"the next lines say `{m.group(0)}` (engine start-up)", *notes])
        if m := STARTUP_AFTER.search(line) or STARTUP_TEXT.search(line):
            return Phase(
                "startup",
                True,
                [f"the next lines say `{m.group(0)}` (it kept the engine from starting)", *notes],
            )
    chained = next((i for i, line in enumerate(after) if _CHAINED.search(line)), None)
    if chained is None:
        # round 11: the exception logged first, its own traceback right under it (`logger.exception`
        # writing `OutOfMemoryError(...)` then `Traceback ...` through `engine_step`): the same evidence.
        # round 20: also with up to two other lines between them (wandb's `Waiting for W&B process to
        # finish... (failed 1).` printed as the run ends, between the exception and its traceback).
        chained = next((i for i, line in enumerate(after[:3]) if _OWN_TRACEBACK.search(line)), None)
    chain = "\n".join([*after[chained + 1 :], *chained_frames]) if chained is not None else ""
    if chain and (m := STARTUP_FRAMES.search(chain)):
        return Phase(
            "startup",
            True,
            [f"the traceback chained after it runs through `{m.group(0)}` (engine start-up)", *notes],
        )
    if chain and not joined and (m := cues.first(cues.runtime_frames, chain)):
        return Phase(
            "runtime",
            False,
            [
                f"the traceback chained after it runs through `{m.group(0)}`, but no served request is shown",
                *notes,
            ],
        )
    if joined and (m := cues.first(cues.runtime_frames, joined)):
        return Phase(
            "runtime",
            False,
            [f"the traceback runs through `{m.group(0)}`, but no served request is shown", *notes],
        )
    near = "\n".join([HEDGE.sub("", text), *before[-2:], *after[:2]])
    if m := cues.first(cues.runtime_words, near):
        return Phase(
            "runtime", False, [f"the line speaks of `{m.group(0)}` (serving), nothing shows requests", *notes]
        )
    if cues.unevidenced_default == "runtime":
        why = "no start-up or serving frame or line around it; runtime is the more common case"
    else:
        why = "no start-up or serving frame or line around it; start-up is the more common case"
    return Phase(cues.unevidenced_default, False, [why, *notes])
