"""The health rules in the checks registry (`vllm-medic check`, `doctor`, `rules`).

The registry's contract is one finding per rule id, so each family (Xid, fabric, limits, in-image)
is one registered rule whose finding folds the family's findings together: the worst severity
wins the title, every sub-finding keeps its own line of evidence (`[HLT-FAB002 fail] …`). The
detailed, one-per-problem view is `vllm-medic health`.
"""

from __future__ import annotations

from typing import Any

from vllm_medic.checks import health_judges as hr
from vllm_medic.checks.registry import Rule, rule
from vllm_medic.model import Finding, Severity


def fold(r: Rule, findings: list[Finding], none_title: str, none_evidence: list[str]) -> list[Finding]:
    """One finding for the registry from a family of health findings."""
    if not findings:
        return [r.not_checked(none_title, none_evidence)]
    # an informational row (the versions inside the image) is context, not the family's verdict
    verdicts = [f for f in findings if f.severity is not Severity.INFO] or findings
    worst = max(verdicts, key=lambda f: f.severity.rank)
    if len(findings) == 1:
        f = findings[0]
        return [
            r.finding(
                f.severity,
                f.title,
                [f"[{f.id}] {e}" for e in f.evidence] or [f"[{f.id}]"],
                f.fix or None,
                f.category,
                f.docs or None,
            )
        ]
    ordered = sorted(findings, key=lambda f: -f.severity.rank)
    evidence: list[str] = []
    fix: list[str] = []
    docs: list[str] = []
    for f in ordered:
        evidence.append(f"[{f.id} {f.severity.value}] {f.title}")
        evidence.extend(f"    {e}" for e in f.evidence[:3])
        if f.severity in (Severity.WARN, Severity.FAIL):
            fix.extend(x for x in f.fix if x not in fix)
        docs.extend(d for d in f.docs if d not in docs)
    others = len(findings) - 1
    title = worst.title + (f" (+{others} more health finding{'s' if others > 1 else ''})" if others else "")
    return [r.finding(worst.severity, title, evidence, fix or None, worst.category, docs or None)]


@rule(
    "HLT-XID",
    "driver_cuda",
    "No NVIDIA Xid (GPU fault) events in the kernel log",
    "A hardware or driver fault (Xid 79 fallen off the bus, 48/94/95 ECC, 74 NVLink, 119/120 GSP) explains a "
    "`CUDA error` or NCCL `unhandled cuda error` in vLLM's log before any software theory.",
    ["Follow the action for each Xid (drain, reset the GPU or reboot, RMA when it repeats), then re-run."],
    ["https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"],
    by_hand="`sudo dmesg -T | grep -E 'NVRM: Xid|fallen off the bus'` (or `journalctl -k`) on every node",
)
def xid_events(facts: Any, recipe: Any, r: Rule) -> list[Finding]:
    return fold(
        r,
        hr.rule_xid(facts.snapshot, facts.health),
        "Kernel log not captured: Xid events not checked",
        ["no dmesg.txt / journalctl-k.txt among the collected outputs"],
    )


@rule(
    "HLT-FAB",
    "driver_cuda",
    "NVLink fabric registered (Fabric Manager / IMEX / MNNVL settings)",
    "On NVSwitch (HGX 8-GPU) and GB200/GB300 NVL systems CUDA cannot start until every GPU is registered "
    "with the fabric: error 802 'system not yet initialized' when Fabric Manager is down or mismatched.",
    [
        "`systemctl enable --now nvidia-fabricmanager` (same version as the driver); on NVL systems nvidia-imex "
        "and NCCL_MNNVL_ENABLE/NCCL_CUMEM_ENABLE/NCCL_NVLS_ENABLE=1."
    ],
    ["https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html"],
    by_hand="`nvidia-smi -q | grep -A 3 Fabric` and `systemctl is-active nvidia-fabricmanager`",
)
def fabric_state(facts: Any, recipe: Any, r: Rule) -> list[Finding]:
    return fold(
        r,
        hr.rule_fabric(facts.snapshot, facts.health),
        "Fabric state not checked",
        ["no nvidia-smi -q output with a Fabric section among the collected outputs"],
    )


@rule(
    "HLT-LIM",
    "nccl_network",
    "Container limits fit multi-GPU vLLM (/dev/shm, memlock, open files, cgroup memory)",
    "Docker's 64 MB /dev/shm breaks NCCL's shared-memory transport, a low memlock breaks RDMA registration "
    "(`ibv_reg_mr … Cannot allocate memory`), and a cgroup limit below weight staging + swap gets workers OOM-killed.",
    [
        "Run with `--ipc=host` (or `--shm-size`), `--ulimit memlock=-1`, `--ulimit nofile=1048576`, and a memory "
        "limit above the estimate."
    ],
    ["https://docs.docker.com/reference/cli/docker/container/run/#ipc"],
    by_hand="inside the container: `df -h /dev/shm; ulimit -l; ulimit -n; cat /sys/fs/cgroup/memory.max`",
)
def container_limits(facts: Any, recipe: Any, r: Rule) -> list[Finding]:
    return fold(
        r,
        hr.rule_limits(facts.snapshot, facts.health),
        "Container limits not checked",
        ["no shm.txt / proc-self-limits.txt / cgroup-memory.txt among the collected outputs"],
    )


@rule(
    "HLT-IMG",
    "image_dependency",
    "Inside the image: the container sees the driver and every GPU, one CUDA line",
    "The method checks inside the image: host driver vs the image's CUDA, host GPU count vs what the container "
    "sees, and CUDA 12.x and 13.x user-space libraries never mixed.",
    [
        "Fix what the in-image probe shows (driver upgrade, --gpus/visible devices, rebuild from one CUDA line), "
        "then re-run the whole launch."
    ],
    ["https://docs.nvidia.com/deploy/cuda-compatibility/"],
    by_hand="`docker run --rm --gpus all --entrypoint nvidia-smi IMAGE` and "
    "`docker run --rm --entrypoint python3 IMAGE -m pip list | grep -E 'nvidia-.*cu1[23]'`",
)
def in_image(facts: Any, recipe: Any, r: Rule) -> list[Finding]:
    return fold(
        r,
        hr.rule_in_image(facts.snapshot, facts.health),
        "In-image probes not run",
        ["collect without --image IMAGE: nothing was run inside the image"],
    )
