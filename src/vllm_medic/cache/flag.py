"""Did ``--enable-prefix-caching`` reach the engine? Compare every layer the user can give (pure).

Layers, in the order a setting travels: the launch (command line / script / ``docker inspect`` /
Kubernetes manifest), the API server's ``non-default args:`` log line, the engine's
``Initializing a V1 LLM engine ... with config: ... enable_prefix_caching=...`` line, and the
``vllm:cache_config_info{enable_prefix_caching=...}`` metric of each engine. The verdict names the
layer where the value was dropped or overridden, with each layer's value as evidence.

Defaults (vLLM ``_set_default_chunked_prefill_and_prefix_caching_args``): on for ordinary
decoder-only models, off for hybrid (mamba / linear-attention / KDA: Kimi K3, Kimi-Linear,
Qwen3-Next) and attention-free models unless passed explicitly.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from vllm_medic.model import Category, Finding, Severity

DOCS = [
    "https://docs.vllm.ai/en/latest/design/prefix_caching.html",
    "https://vllm.ai/blog/2026-07-27-k3",
]

_NON_DEFAULT = re.compile(r"non-default args: (\{.*\})\s*$")
_ENGINE_CONFIG = re.compile(r"Initializing an? (?:V\d )?LLM engine(?: \(v[^)]*\))? with config:")
_EPC = re.compile(r"enable_prefix_caching=(True|False|None)")
_MAMBA_MODE = re.compile(r"Mamba cache mode is set to '(\w+)'")
_HYBRID_LOG = re.compile(
    r"(Mamba cache mode|Hybrid models do not support prefix caching|Hybrid or mamba-based model detected|"
    r"attention page size is >= mamba page size)"
)
_ARCH = re.compile(
    r"(?:Resolved architecture|architectures?)[=:]\s*\[?'?([A-Za-z0-9_]+ForCausalLM|[A-Za-z0-9_]+ForConditionalGeneration)"
)
_HYBRID_NAMES = re.compile(
    r"(kimi[-_]?k3|kimi[-_]?linear|qwen3[-_.]?next|qwen3\.5|nemotron[-_]?h|jamba|mamba|falcon[-_]?h1|granite[-_]?4|minimax)",
    re.I,
)


@dataclass
class LayerValue:
    """One layer's view of ``enable_prefix_caching``: True / False / None (= not set there)."""

    layer: str  # launch | non_default_args | engine_config | metrics
    value: bool | None
    evidence: str
    present: bool = True  # the layer was given and read (value None = read, flag not there)


@dataclass
class LogFacts:
    non_default: LayerValue | None = None
    engine: LayerValue | None = None
    mamba_mode: str | None = None
    hybrid_evidence: str | None = None
    architecture: str | None = None


@dataclass
class FlagInputs:
    launch: LayerValue | None = None
    launch_order: list[str] = field(default_factory=list)  # the flag spellings in argv order
    launch_model: str | None = None
    log: LogFacts | None = None
    metrics: list[LayerValue] = field(default_factory=list)  # one per engine
    hybrid: bool | None = None
    hybrid_basis: str = ""
    # inputs that were given but held no prefix-caching setting, e.g. "log x.log: 0 of 12 lines ..."
    empty_inputs: list[str] = field(default_factory=list)


def _bool(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        if v.lower() in ("true", "1", "yes"):
            return True
        if v.lower() in ("false", "0", "no"):
            return False
    return None


def read_log(lines: list[str], name: str) -> LogFacts:
    """Find the relevant lines in an engine log (the first occurrence of each wins: the startup)."""
    facts = LogFacts()
    for no, raw in enumerate(lines, 1):
        line = raw.rstrip("\n")
        if facts.non_default is None and "non-default args:" in line:
            m = _NON_DEFAULT.search(line)
            value: bool | None = None
            if m:
                try:
                    args = ast.literal_eval(m.group(1))
                    value = _bool(args.get("enable_prefix_caching")) if isinstance(args, dict) else None
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    mm = re.search(r"'enable_prefix_caching': (True|False)", line)
                    value = _bool(mm.group(1)) if mm else None
            shown = (
                f"'enable_prefix_caching': {value}" if value is not None else "no 'enable_prefix_caching' key"
            )
            facts.non_default = LayerValue(
                "non_default_args", value, f"{name}:{no}: non-default args: {shown}"
            )
        if facts.engine is None and _ENGINE_CONFIG.search(line):
            m = _EPC.search(line)
            value = _bool(m.group(1)) if m else None
            shown = f"enable_prefix_caching={m.group(1)}" if m else "no enable_prefix_caching field"
            facts.engine = LayerValue("engine_config", value, f"{name}:{no}: engine config: {shown}")
        if facts.mamba_mode is None:
            m = _MAMBA_MODE.search(line)
            if m:
                facts.mamba_mode = m.group(1)
        if facts.hybrid_evidence is None and _HYBRID_LOG.search(line):
            facts.hybrid_evidence = f"{name}:{no}: {line.strip()[-160:]}"
        if facts.architecture is None:
            m = _ARCH.search(line)
            if m:
                facts.architecture = m.group(1)
    return facts


def launch_layer(
    args: dict[str, Any], argv: list[str], source_name: str, text: str
) -> tuple[LayerValue, list[str]]:
    """The launch's value, with the line of the file that sets it (or that it is absent)."""
    order = [a for a in argv if a in ("--enable-prefix-caching", "--no-enable-prefix-caching")]
    value = _bool(args.get("enable_prefix_caching"))
    where = source_name
    for no, line in enumerate(text.splitlines(), 1):
        if "enable-prefix-caching" in line or "enable_prefix_caching" in line:
            where = f"{source_name}:{no}"
            break
    if value is None:
        shown = "not passed"
    else:
        shown = "--enable-prefix-caching" if value else "--no-enable-prefix-caching"
    if len(order) > 1:
        shown += f" (argv has {' then '.join(order)}: the last one wins)"
    return LayerValue("launch", value, f"launch {where}: {shown}"), order


def metrics_layers(rows: list[dict[str, str]], source: str) -> list[LayerValue]:
    out = []
    for row in rows:
        engine = row.get("engine", "0")
        raw = row.get("enable_prefix_caching")
        out.append(
            LayerValue(
                "metrics",
                _bool(raw),
                f'{source} vllm:cache_config_info{{engine="{engine}", enable_prefix_caching="{raw}"'
                + (f', mamba_cache_mode="{row["mamba_cache_mode"]}"' if row.get("mamba_cache_mode") else "")
                + "}",
            )
        )
    return out


def guess_hybrid(
    model: str | None, log: LogFacts | None, rows: list[dict[str, str]]
) -> tuple[bool | None, str]:
    for row in rows:
        mode = row.get("mamba_cache_mode")
        if mode and mode.lower() not in ("none", ""):
            return True, f'vllm:cache_config_info mamba_cache_mode="{mode}"'
    if log and log.hybrid_evidence:
        return True, log.hybrid_evidence
    name = " ".join(x for x in (model, log.architecture if log else None) if x)
    if name and _HYBRID_NAMES.search(name):
        return True, f"model {name!r} is a hybrid (linear-attention / KDA / mamba) model"
    if name:
        return False, f"model {name!r}: no hybrid layers known"
    return None, ""


def verdict(inp: FlagInputs) -> list[Finding]:
    """One finding naming which layer dropped or overrode the flag (or that it is on everywhere)."""
    layers = _layers(inp)
    if not layers:
        return [_nothing_to_compare(inp)]
    seen = _seen(inp, layers)
    if len({lv.value for lv in inp.metrics if lv.value is not None}) > 1:
        return [_engines_disagree(seen)]
    effective = seen.engine_values[-1].value if seen.engine_values else None
    if effective is True:
        return [_reached_engine(seen)]
    if effective is False:
        for judge in _WHY_OFF_IN_ENGINE:
            finding = judge(seen)
            if finding is not None:
                return [finding]
        return [_never_passed(seen)]
    return [_engine_side_unknown(seen)]


@dataclass(frozen=True)
class _Seen:
    """What the layers say about the flag, read once for the judges below."""

    inp: FlagInputs
    evidence: list[str]
    engine_values: list[LayerValue]  # engine config and metrics layers that carry a value, in order
    launch_v: bool | None
    nd: LayerValue | None  # the log's non-default args
    default_txt: str
    default: bool | None  # vLLM's default for this model kind; None when the kind is unknown


_FIX_RESTART = "Re-launch and confirm `enable_prefix_caching=True` in the engine config line and in /metrics."


def _layers(inp: FlagInputs) -> list[LayerValue]:
    """The layers given, from the launch to the engines: launch, non-default args, engine config, metrics."""
    layers: list[LayerValue] = []
    if inp.launch:
        layers.append(inp.launch)
    if inp.log and inp.log.non_default:
        layers.append(inp.log.non_default)
    if inp.log and inp.log.engine:
        layers.append(inp.log.engine)
    layers.extend(inp.metrics)
    return layers


def _seen(inp: FlagInputs, layers: list[LayerValue]) -> _Seen:
    evidence = [lv.evidence for lv in layers]
    if inp.hybrid is not None:
        evidence.append(f"model kind: {'hybrid' if inp.hybrid else 'ordinary decoder'} ({inp.hybrid_basis})")
    if inp.log and inp.log.mamba_mode:
        evidence.append(f"log: Mamba cache mode '{inp.log.mamba_mode}'")
    default = None if inp.hybrid is None else not inp.hybrid
    default_txt = (
        "unknown default (say --hybrid or give --model-config)"
        if default is None
        else ("off by default for hybrid models" if not default else "on by default for ordinary models")
    )
    return _Seen(
        inp=inp,
        evidence=evidence,
        engine_values=[
            lv for lv in layers if lv.layer in ("engine_config", "metrics") and lv.value is not None
        ],
        launch_v=inp.launch.value if inp.launch else None,
        nd=inp.log.non_default if inp.log else None,
        default_txt=default_txt,
        default=default,
    )


def _nothing_to_compare(inp: FlagInputs) -> Finding:
    given = bool(inp.empty_inputs)
    return Finding(
        "CACHE-FLAG000",
        Severity.WARN,
        Category.PREFIX_CACHE,
        "Nothing to compare: the inputs given hold no prefix-caching setting"
        if given
        else "Nothing to compare: give the launch, the engine log or the server",
        list(inp.empty_inputs),
        [
            "Pass --launch (command, script, docker inspect JSON or manifest), --log (the engine log "
            "from startup) and/or --server URL (reads vllm:cache_config_info)."
        ],
    )


def _engines_disagree(seen: _Seen) -> Finding:
    off = [lv.evidence for lv in seen.inp.metrics if lv.value is False]
    return Finding(
        "CACHE-FLAG005",
        Severity.FAIL,
        Category.PREFIX_CACHE,
        "Engines disagree: prefix caching is off on some DP engines",
        seen.evidence,
        [
            "Every DP rank / node must get the same arguments: compare the launch of the engines that report "
            "False (" + "; ".join(off) + ") with the others.",
            "Restart those engines with --enable-prefix-caching and re-check /metrics.",
        ],
        DOCS,
    )


def _reached_engine(seen: _Seen) -> Finding:
    return Finding(
        "CACHE-FLAG001",
        Severity.PASS,
        Category.PREFIX_CACHE,
        f"Prefix caching reached the engine (enable_prefix_caching=True in {seen.engine_values[-1].layer.replace('_', ' ')})",
        seen.evidence,
    )


# ---- the engine runs with it off: which layer lost it (first judge that answers)


def _dropped_by_wrapper(seen: _Seen) -> Finding | None:
    if not (seen.launch_v is True and seen.nd is not None and seen.nd.value is None):
        return None
    return Finding(
        "CACHE-FLAG002",
        Severity.FAIL,
        Category.PREFIX_CACHE,
        "Dropped between the launch and the engine: in the launch, absent from the engine's non-default args",
        seen.evidence,
        [
            "The wrapper (entrypoint script, Helm template, operator) does not pass the arguments through: "
            'make it exec `vllm serve ... "$@"` (quoted $@) or put the flag in the container command itself.',
            "Check for an args/command override in the manifest that replaces the image's CMD.",
            _FIX_RESTART,
        ],
        DOCS,
    )


def _overridden_before_engine(seen: _Seen) -> Finding | None:
    if not (seen.launch_v is True and seen.nd is not None and seen.nd.value is False):
        return None
    return Finding(
        "CACHE-FLAG003",
        Severity.FAIL,
        Category.PREFIX_CACHE,
        "Overridden before the engine: the launch passes the flag, the server received --no-enable-prefix-caching",
        seen.evidence,
        [
            "Something appends --no-enable-prefix-caching after your flag (a wrapper default, an operator, a "
            "profile such as a PD decode pool); with argparse the last flag wins. Remove it.",
            _FIX_RESTART,
        ],
        DOCS,
    )


def _overridden_inside_vllm(seen: _Seen) -> Finding | None:
    if not (seen.launch_v is True or (seen.nd is not None and seen.nd.value is True)):
        return None
    return Finding(
        "CACHE-FLAG004",
        Severity.FAIL,
        Category.PREFIX_CACHE,
        "Overridden inside vLLM: the flag was received but the engine runs with enable_prefix_caching=False",
        seen.evidence,
        [
            "vLLM turned it off for this model or platform: look in the log around the engine config for the "
            "reason (attention backend or layer without prefix-caching support, RISC-V CPU, a pooling model).",
            "For hybrid models, check the vLLM version supports prefix caching for this architecture "
            "(Kimi K3 needs the K3-enabled build) and that chunked prefill is on (mamba 'align' mode needs it).",
        ],
        DOCS,
    )


def _turned_off_explicitly(seen: _Seen) -> Finding | None:
    if not (seen.launch_v is False or (seen.nd is not None and seen.nd.value is False)):
        return None
    return Finding(
        "CACHE-FLAG006",
        Severity.FAIL,
        Category.PREFIX_CACHE,
        "Prefix caching is turned off explicitly (--no-enable-prefix-caching)",
        seen.evidence,
        ["Replace --no-enable-prefix-caching with --enable-prefix-caching.", _FIX_RESTART],
        DOCS,
    )


_WHY_OFF_IN_ENGINE = (
    _dropped_by_wrapper,
    _overridden_before_engine,
    _overridden_inside_vllm,
    _turned_off_explicitly,
)


def _never_passed(seen: _Seen) -> Finding:
    """Off in the engine and no layer shows the flag: never passed (or, without launch and log, unknown)."""
    hybrid = seen.inp.hybrid
    saw_args = seen.inp.launch is not None or seen.nd is not None  # a layer that shows what was passed
    off_where = seen.engine_values[-1].layer.replace("_", " ")
    title = (
        "Prefix caching is off: the flag was never passed"
        + (" and this hybrid model has it off by default" if hybrid else "")
        if saw_args
        else f"The engine runs with prefix caching off ({off_where}); whether the flag was passed is not "
        "known without the launch or the startup log"
    )
    return Finding(
        "CACHE-FLAG007",
        Severity.FAIL,
        Category.PREFIX_CACHE,
        title,
        seen.evidence + [f"default: {seen.default_txt}"],
        [
            "Pass --enable-prefix-caching explicitly"
            + (" (hybrid models such as Kimi K3 need it: 'Pass the flag explicitly')." if hybrid else "."),
            _FIX_RESTART,
            *(
                []
                if saw_args
                else [
                    "To see where it was lost, add --launch (the command, manifest or docker inspect) and "
                    "--log (the startup log): `vllm-medic cache flag --launch ... --log ... --server URL`."
                ]
            ),
        ],
        DOCS,
    )


def _engine_side_unknown(seen: _Seen) -> Finding:
    """No engine-side value: judge from the launch and the default, and ask for the engine side."""
    launch_v, nd = seen.launch_v, seen.nd
    expected = (
        launch_v if launch_v is not None else (nd.value if nd and nd.value is not None else seen.default)
    )
    ask = (
        "Confirm on the engine: the `Initializing a V1 LLM engine ... with config:` log line "
        "(enable_prefix_caching=) or `vllm-medic cache flag --server URL` (vllm:cache_config_info)."
    )
    if expected is False:
        reason = "turned off in the launch" if launch_v is False else f"not passed, and {seen.default_txt}"
        return Finding(
            "CACHE-FLAG007" if launch_v is None else "CACHE-FLAG006",
            Severity.FAIL,
            Category.PREFIX_CACHE,
            f"Prefix caching will be off: {reason}",
            seen.evidence,
            ["Pass --enable-prefix-caching explicitly.", ask],
            DOCS,
        )
    if expected is True:
        return Finding(
            "CACHE-FLAG008",
            Severity.INFO,
            Category.PREFIX_CACHE,
            "The launch asks for prefix caching; the engine side was not checked",
            seen.evidence,
            [ask],
        )
    return Finding(
        "CACHE-FLAG008",
        Severity.WARN,
        Category.PREFIX_CACHE,
        "Cannot tell whether prefix caching is on: the flag is not passed and the model kind is unknown",
        seen.evidence,
        ["Pass --enable-prefix-caching explicitly (it is harmless on ordinary models).", ask],
    )


def retention_note(
    hybrid: bool | None,
    rows: list[dict[str, str]],
    env: dict[str, str],
    *,
    metrics_source: str | None = None,
    log_mode: str | None = None,
) -> Finding | None:
    """For hybrid models: which prefix lengths can hit, from cache_config_info and the launch env.

    Each value says where it came from: the server's metric, the startup log, the launch env, or vLLM's
    default (then it was not read, and the evidence says so)."""
    if not hybrid:
        return None
    from vllm_medic.cache.retention import policy_from

    row = dict(rows[0]) if rows else {}
    where = metrics_source or "/metrics"
    evidence: list[str] = []
    if row.get("block_size"):
        evidence.append(f'{where} vllm:cache_config_info block_size="{row["block_size"]}"')
    else:
        evidence.append("block_size 16: vLLM's default, not read from the server (give --server URL)")
    mode = row.get("mamba_cache_mode")
    if mode not in (None, "", "None"):
        evidence.append(f'{where} vllm:cache_config_info mamba_cache_mode="{mode}"')
    elif log_mode:
        row["mamba_cache_mode"] = log_mode
        evidence.append(f"startup log: Mamba cache mode is set to '{log_mode}'")
    else:
        row["mamba_cache_mode"] = "align"
        evidence.append(
            "mamba_cache_mode align: assumed (vLLM's mode for hybrid prefix caching), not read from the "
            "server or the log"
        )
    p = policy_from(row, env=env)
    evidence += [s for s in p.sources if not s.startswith("mamba_cache_mode=")]
    if p.interval is None:
        what = "every block (no retention interval set: the dense default)"
    elif p.interval == 0:
        what = "prompt ends only (retention interval 0): a new prompt can only resume where an earlier prompt ended"
    else:
        what = f"earlier prompt ends and every {p.interval} tokens (rounded up to {p.unit}-token alignment)"
    return Finding(
        "CACHE-FLAG009",
        Severity.INFO,
        Category.PREFIX_CACHE,
        f"Hybrid retention: prefixes can hit only at checkpoints: {what}",
        evidence,
        [
            "A miss on a prefix that ends between checkpoints is by design, not a broken cache (see `cache probe`).",
            *_retention_guidance(),
        ],
    )


def _retention_guidance() -> list[str]:
    """How to choose the interval: one source, the K3 recipe data (`prefix_cache_retention.choose`)."""
    from vllm_medic.recipes import load_recipe

    return list((load_recipe("kimi-k3").prefix_cache_retention or {}).get("choose") or [])
