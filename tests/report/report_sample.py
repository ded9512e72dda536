"""SYNTHETIC acceptance runs written through the public store API, for the report/diff/sheet tests.

The values are made up (shaped like an 8xH200 K3 deployment) — they are not measurements. The hostile
bits are deliberate: a log line with ``<script>``, an API key in the launch args, an HF token in env.
"""

from __future__ import annotations

import json
from typing import Any

from vllm_medic.model import Finding
from vllm_medic.snapshot import Driver, Gpu, Host, Image, Launch, Snapshot, Topology, Vllm
from vllm_medic.store.api import Store
from vllm_medic.store.step_row import StepRow

XSS_LINE = "ERROR 11-30 02:11:09 [engine.py:1] bad request body <script>alert(1)</script> from client"
SECRET_KEY = "sk-proj-abcdefghijklmnopqrstuvwx123456"
PLAIN_SECRET = "plainsecretvalue42"  # no token shape: only the flag name says it is a secret
ARGS_LINE = (
    "INFO 11-30 02:09:58 [api_server.py:1] non-default args: --max-num-batched-tokens 8192 "
    f"--enable-prompt-tokens-details --api-key {PLAIN_SECRET}"
)


def snapshot(driver: str = "580.65.06", digest: str = "sha256:" + "ab" * 32, gpus: int = 8) -> dict[str, Any]:
    devices = [f"GPU{i}" for i in range(gpus)]
    matrix = {r: {c: ("X" if r == c else "NV18") for c in devices} for r in devices}
    snap = Snapshot(
        collected_at="2026-11-30T02:00:00Z",
        host=Host(hostname="gpu-node-01", kernel="6.8.0", os="Ubuntu 24.04", arch="x86_64"),
        driver=Driver(version=driver, cuda_version="13.0", status="ok"),
        gpus=[Gpu(index=i, name="NVIDIA H200", memory_total_mib=143771) for i in range(gpus)],
        topology=Topology(devices=devices, matrix=matrix),
        image=Image(tag="vllm/vllm-openai:v0.27.1", digest=digest),
        vllm=Vllm(version="0.27.1", raw="0.27.1"),
        env={"HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz", "NCCL_DEBUG": "INFO"},
        launch=Launch(
            source="argv",
            argv=[
                "vllm",
                "serve",
                "moonshotai/Kimi-K3",
                "--tensor-parallel-size",
                str(gpus),
                "--api-key",
                SECRET_KEY,
            ],
        ),
    )
    return snap.to_dict()


def _level(c: int, scale: float, status: str = "ok") -> dict[str, Any]:
    return {
        "concurrency": c,
        "status": status,
        "requests": 32,
        "errors": {"http_5xx": 0 if status == "ok" else 5},
        "timeouts": 0,
        "ttft_ms": {
            "p50": 80.0 * scale * (1 + c / 8),
            "p90": 120.0 * scale * (1 + c / 8),
            "p99": 200.0 * scale * (1 + c / 4),
        },
        "tpot_ms": {"p50": 12.0 * scale, "p99": 18.0 * scale * (1 + c / 16)},
        "itl_ms": {"p50": 11.0 * scale, "p99": 25.0 * scale},
        "e2e_ms": {"p50": 900.0 * scale * (1 + c / 8), "p99": 1500.0 * scale * (1 + c / 8)},
        "throughput": {"requests_per_s": 1.1 * c / scale, "output_tokens_per_s": 70.0 * c / scale},
        "kv_cache_usage_max": min(0.95, 0.1 * c),
        "preemptions": 0 if status == "ok" else 14,
        "queue_max": max(0, c - 8),
        "gpu_memory_peak_mib": 130000 + 500 * c,
        "engine_restarts": 0,
    }


def write_run(
    store: Store,
    *,
    verdict: str = "pass",
    scale: float = 1.0,
    driver: str = "580.65.06",
    digest: str = "sha256:" + "ab" * 32,
    gpus: int = 8,
    extra_arg: str | None = None,
    hit_ratio: float = 0.82,
) -> str:
    rid = store.start_run(
        "accept", "http://gpu-node-01:8000", {"quick": False, "argv": ["accept", "--api-key-env", "VLLM_KEY"]}
    )
    store.record_step(
        rid,
        StepRow.of(
            "start",
            "pass",
            [
                Finding(
                    "ACC-START-OK",
                    "pass",
                    "other",
                    "server ready, 8 ranks registered",
                    ["GET /health → 200 after 41.2 s"],
                )
            ],
            {"ready_s": 41.2},
        ),
    )
    basic_findings = [
        Finding(
            "ACC-BASIC-STREAM",
            "pass",
            "other",
            "streaming conforms",
            ["12 content deltas, usage chunk, [DONE]"],
        )
    ]
    if verdict == "fail":
        basic_findings.append(
            Finding(
                "ACC-BASIC-TOOL-PARSER",
                "fail",
                "other",
                "tool call rejected: server has no tool-call parser",
                [
                    'HTTP 400: "auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
                ],
                ["Restart vLLM with --enable-auto-tool-choice --tool-call-parser kimi_k2"],
                ["https://docs.vllm.ai/en/latest/features/tool_calling.html"],
            )
        )
    store.record_step(
        rid,
        StepRow.of("basic", "fail" if verdict == "fail" else "pass", basic_findings, {}),
    )
    store.record_step(
        rid,
        StepRow("prefix_reuse", "pass", data={"hits_delta": hit_ratio * 1000, "queries_delta": 1000}),
    )
    levels = [_level(c, scale) for c in (1, 2, 4, 8)] + [_level(16, scale, "broken")]
    for lv in levels:
        store.record_event(rid, "ramp_level", lv)
    store.record_step(
        rid,
        StepRow.of(
            "ramp",
            "warn",
            [
                Finding(
                    "ACC-RAMP-KV-FULL",
                    "warn",
                    "oom_runtime",
                    "KV cache full at concurrency 16",
                    ["vllm:kv_cache_usage_perc 0.99", "vllm:num_preemptions_total +14"],
                    ["Lower --max-num-seqs to 8 or add GPUs"],
                )
            ],
            {
                "max_sustainable_concurrency": 8,
                "stop_reason": "KV cache full at concurrency 16 (preemptions +14)",
            },
        ),
    )
    samples = [
        {"t_s": float(t), "kv_cache_usage": 0.30 + 0.002 * t, "e2e_p99_ms": 1400.0 + t}
        for t in range(0, 300, 30)
    ]
    store.record_events(rid, "soak_sample", samples)
    store.record_step(rid, StepRow("soak", "pass", data={"duration_s": 300}))
    argv = [
        "vllm",
        "serve",
        "moonshotai/Kimi-K3",
        "--tensor-parallel-size",
        str(gpus),
        "--api-key",
        SECRET_KEY,
    ]
    if extra_arg:
        argv.append(extra_arg)
    store.attach(rid, "snapshot.json", json.dumps(snapshot(driver, digest, gpus)), "application/json")
    store.record_step(
        rid,
        StepRow(
            "archive",
            "pass",
            data={
                "vllm_version": "0.27.1",
                "launch_args": argv,
                "key_log_lines": [
                    ARGS_LINE,
                    "INFO 11-30 02:10:01 [gpu_worker.py:1] Available KV cache memory: 61.2 GiB",
                    XSS_LINE,
                ],
            },
        ),
    )
    store.finish_run(rid, verdict)
    return rid
