"""The short human summary `collect` prints: what was gathered, what was not and why, where it is."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from vllm_medic.collect.api import CollectResult

_STYLE = {
    "ok": ("green", "✓"),
    "not_applicable": ("dim", "-"),
    "not_captured": ("dim", "·"),
    "missing": ("yellow", "·"),
    "unparsable": ("yellow", "?"),
    "nonzero": ("yellow", "!"),
    "timeout": ("red", "✗"),
    "permission": ("red", "✗"),
    "error": ("red", "✗"),
    "interrupted": ("red", "✗"),
}


def headline(result: CollectResult) -> str:
    snap = result.snapshot
    parts = []
    d = snap.driver
    if d.version:
        parts.append(f"driver {d.version}" + (f" (CUDA {d.cuda_version})" if d.cuda_version else ""))
    elif d.status != "unknown":
        versions = [
            f"{label} {v}"
            for label, v in (("NVML", d.nvml_library_version), ("kernel module", d.kernel_module_version))
            if v
        ]
        parts.append(f"driver: {d.status}" + (f" ({', '.join(versions)})" if versions else ""))
    if snap.gpus:
        names = sorted({g.name for g in snap.gpus if g.name})
        parts.append(f"{len(snap.gpus)} GPU(s) {', '.join(names)}".strip())
    toolkit = snap.toolkit.cuda_version
    if toolkit:
        parts.append(f"toolkit CUDA {toolkit} (nvcc; not the driver)")
    if snap.vllm.version:
        parts.append(f"vLLM {snap.vllm.raw or snap.vllm.version}")
    pe = snap.python.origin
    if pe is not None and not pe.vllm_installed:
        parts.append(f"packages listed from {pe.interpreter or 'pip-freeze.txt'}: no vLLM there")
    if snap.image.tag:
        parts.append(f"image {snap.image.tag}" + (f"@{snap.image.digest[:19]}" if snap.image.digest else ""))
    if snap.launch.model:
        parts.append(f"launch: {snap.launch.model}")
    return "; ".join(parts) or "no GPU, driver or vLLM facts found"


def print_summary(result: CollectResult, dest: Path | None, console: Console, brief: bool) -> None:
    sources = list(result.sources.values())
    counts: dict[str, int] = {}
    for s in sources:
        status = s.status if s.status is not None else "?"
        counts[status] = counts.get(status, 0) + 1
    if not brief:
        mode = "from " + str(result.manifest.get("from")) if result.manifest.get("mode") == "from" else "live"
        console.print(f"[bold]vllm-medic collect[/] ({escape(mode)})", highlight=False)
        for s in sources:
            status = s.status if s.status is not None else "?"
            style, glyph = _STYLE.get(status, ("white", "?"))
            timing = f"{float(s.duration_s or 0):6.2f}s" if s.started else "       "
            detail = s.file or ""
            if status != "ok" and s.message:
                detail = s.message
            console.print(
                f"  [{style}]{escape(glyph)}[/] {escape(s.name):<28} {status:<15} {timing}  {escape(detail)}",
                highlight=False,
                soft_wrap=True,
            )
            if s.partial:
                console.print(
                    f"      [yellow]partial:[/] {escape(s.partial)} (no absence is concluded from it)",
                    highlight=False,
                    soft_wrap=True,
                )
            for note in s.notes or []:
                console.print(f"      [dim]note: {escape(note)}[/]", highlight=False, soft_wrap=True)
        console.print(f"  {escape(headline(result))}", highlight=False, soft_wrap=True)
    partial = sum(1 for s in sources if s.partial)
    tally = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) + (
        f" ({partial} partial)" if partial else ""
    )
    where = f"bundle written to {dest}" if dest is not None else "no bundle written (use -o to write one)"
    wall = result.manifest.get("wall_s")
    took = f" in {wall:.2f} s" if isinstance(wall, int | float) else ""
    if result.interrupted:
        console.print(
            "[yellow]interrupted:[/] what was collected before Ctrl-C is in the bundle", highlight=False
        )
    console.print(f"{escape(tally)}{took}; {escape(where)}", highlight=False, soft_wrap=True)
