"""driver_cuda: is each GPU's memory healthy enough to serve - no row remap waiting for a reset, no remap
that failed, no uncorrectable ECC errors since the driver loaded (`nvidia-smi -q`)."""

from __future__ import annotations

from vllm_medic.checks.facts import Facts
from vllm_medic.checks.registry import Rule, rule
from vllm_medic.model import Finding
from vllm_medic.recipes.model import Recipe
from vllm_medic.snapshot import Gpu

ROW_REMAP_DOCS = "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html"
XID_DOCS = "https://docs.nvidia.com/deploy/xid-errors/index.html"
Q_SOURCES = ("nvidia-smi-q", "nvidia-smi-query-gpu", "nvml")  # where ECC / remap counters are read
HEALTH_FIELDS = (
    "ecc_volatile_uncorrectable",
    "ecc_aggregate_uncorrectable",
    "remapped_rows_pending",
    "remapped_rows_failure",
    "retired_pages_pending",
)  # the snapshot.Gpu fields this rule reads (None = not captured)


def _name(g: Gpu) -> str:
    return f"GPU {g.index}" + (f" ({g.bus_id})" if g.bus_id else "")


def _lines(facts: Facts, pattern: str) -> list[str]:
    for source in Q_SOURCES:
        hits = facts.find_all(source, pattern)
        if hits:
            return [f"{loc} {text}" for loc, text in hits[:4]]
    return []


def _drain_reset(gpus: list[Gpu]) -> list[str]:
    idx = ",".join(str(g.index) for g in gpus)
    return [
        "Drain the node first (cordon it / take it out of the scheduler) and stop every process on the GPU "
        f"(`nvidia-smi --query-compute-apps=pid --format=csv -i {idx}`).",
        f"Reset the GPU so the pending remap takes effect: `sudo nvidia-smi -r -i {idx}` (or reboot the node when "
        "the GPUs share an NVSwitch fabric and cannot be reset one by one).",
        f"Re-check before serving: `nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT -i {idx}` must show "
        "'Pending : No'; if it returns after the next error, open an RMA.",
    ]


@rule(
    "DRV008",
    "driver_cuda",
    "GPU memory is healthy: no pending or failed row remap, no uncorrectable ECC errors",
    "An uncorrectable memory error makes the driver remap the bad row at the next GPU reset; until then the "
    "row is still in use ('Remapped Rows Pending: Yes') and the next hit kills the CUDA context (Xid 48/94/95). "
    "A remap that failed ('Remapping Failure Occurred: Yes') means the GPU is out of spare rows: it needs service.",
    [
        "Pending remap: drain the node, reset the GPU (`sudo nvidia-smi -r -i N`) or reboot, and re-check before "
        "serving.",
        "Remapping failure: take the GPU out of service and open an RMA (serial from `nvidia-smi -q`).",
    ],
    [ROW_REMAP_DOCS, XID_DOCS],
    by_hand="`nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT` (every GPU)",
)
def gpu_memory_health(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    gpus = facts.snapshot.gpus
    if not gpus:
        return [
            r.not_checked(
                "GPU memory health not checked: no GPU seen", [facts.unread("nvidia-smi") or "no GPUs listed"]
            )
        ]
    for judge in _MEMORY_JUDGES:
        finding = judge(facts, r, gpus)
        if finding is not None:
            return [finding]
    return [_memory_healthy(facts, r, gpus)]


def _pending(gpus: list[Gpu]) -> list[Gpu]:
    return [g for g in gpus if g.remapped_rows_pending or g.retired_pages_pending]


def _remap_failed(facts: Facts, r: Rule, gpus: list[Gpu]) -> Finding | None:
    failed = [g for g in gpus if g.remapped_rows_failure]
    if not failed:
        return None
    ev = _lines(facts, r"(Remapping Failure Occurred|remapped_row_failure)\W+Yes") or []
    ev += [f"{_name(g)}: row remapping failure" for g in failed]
    return r.finding(
        "fail",
        f"Row remapping failed on {', '.join(_name(g) for g in failed)}: the GPU needs service (RMA)",
        ev,
        [
            "Take the GPU out of service: drain the node, and do not serve on it (a reset does not clear a "
            "remapping failure).",
            "Open an RMA with the GPU's serial (`nvidia-smi -q -i N | grep -i serial`) and the "
            "`nvidia-smi -q -d ROW_REMAPPER` output.",
            *[f"Also pending a reset: {_name(g)}" for g in _pending(gpus) if g not in failed],
        ],
    )


def _what_is_pending(g: Gpu) -> str:
    return ", ".join(
        x
        for x in (
            "remapped rows pending" if g.remapped_rows_pending else "",
            "retired pages pending" if g.retired_pages_pending else "",
            f"{g.ecc_volatile_uncorrectable} volatile uncorrectable ECC errors"
            if g.ecc_volatile_uncorrectable
            else "",
        )
        if x
    )


def _remap_pending(facts: Facts, r: Rule, gpus: list[Gpu]) -> Finding | None:
    pending = _pending(gpus)
    if not pending:
        return None
    ev = _lines(facts, r"(Pending( Page Blacklist)?\s*:|remapped_row_pending>|retired_pages_pending>)\W*Yes")
    ev += [f"{_name(g)}: {_what_is_pending(g)}" for g in pending]
    return r.finding(
        "fail",
        f"{', '.join(_name(g) for g in pending)}: a memory row remap waits for a GPU reset: reset before "
        "serving",
        ev,
        _drain_reset(pending),
    )


def _volatile_ecc(facts: Facts, r: Rule, gpus: list[Gpu]) -> Finding | None:
    volatile = [g for g in gpus if (g.ecc_volatile_uncorrectable or 0) > 0]
    if not volatile:
        return None
    ev = [
        f"{_name(g)}: {g.ecc_volatile_uncorrectable} uncorrectable ECC errors since the driver loaded"
        for g in volatile
    ]
    return r.finding(
        "warn",
        f"Uncorrectable ECC errors since the driver loaded on {', '.join(_name(g) for g in volatile)}",
        ev,
        [
            "Find the events: `sudo dmesg -T | grep -i xid` (Xid 48 DBE, 94 contained, 95 uncontained ECC).",
            *_drain_reset(volatile)[:2],
        ],
    )


def _counters_read(gpus: list[Gpu]) -> list[Gpu]:
    return [g for g in gpus if g.remapped_rows_pending is not None or g.retired_pages_pending is not None]


def _counters_missing(facts: Facts, r: Rule, gpus: list[Gpu]) -> Finding | None:
    """Nothing bad seen: but were the counters read for every GPU, from a whole `nvidia-smi -q`?"""
    read = _counters_read(gpus)
    why = next((w for w in (facts.incomplete(s) for s in Q_SOURCES) if w and "partial" in w), None)
    if not read:
        return r.not_checked(
            "GPU memory health not checked: no ECC / remapped-rows counters were captured",
            [facts.unread("nvidia-smi-q") or "nvidia-smi -q: no ECC or Remapped Rows section"],
        )
    if len(read) < len(gpus) or why:
        unread = [g for g in gpus if g not in read]
        return r.not_checked(
            f"GPU memory health read for {len(read)} of {len(gpus)} GPUs",
            [why or f"no ECC / remapped-rows counters for {', '.join(_name(g) for g in unread[:8])}"],
        )
    return None


def _memory_healthy(facts: Facts, r: Rule, gpus: list[Gpu]) -> Finding:
    read = _counters_read(gpus)
    lifetime = [g for g in gpus if (g.ecc_aggregate_uncorrectable or 0) > 0]
    ev = _lines(facts, r"(Pending\s*:|remapped_row_pending>)\W*No")[:2]
    ecc_known = [g for g in gpus if g.ecc_volatile_uncorrectable is not None]
    where = ", ".join(facts._file_of(s) for s in Q_SOURCES if facts.captured(s)) or "GPU counters"
    ev.append(
        f"{where}: {len(read)} GPUs: no remap or page retirement pending, no remapping failure"
        + (f"; volatile uncorrectable ECC 0 on {len(ecc_known)}" if ecc_known else "; ECC counters not shown")
        + (
            f"; lifetime uncorrectable ECC on {', '.join(_name(g) for g in lifetime)} (remapped)"
            if lifetime
            else ""
        )
    )
    return r.finding("pass", f"No pending or failed memory row remap on the {len(read)} GPUs", ev)


# In order: the first judge with something to say gives the verdict; none does: the memory is healthy.
_MEMORY_JUDGES = (_remap_failed, _remap_pending, _volatile_ecc, _counters_missing)
