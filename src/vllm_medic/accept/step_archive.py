"""Step 6, archive: what this sheet was measured on — the environment snapshot (``collect`` here, or a
``--bundle`` from the server's host), the server's own view (version, model, cache config), the launch
arguments and the key log lines — attached to the run."""

from __future__ import annotations

import ast
import asyncio
import json
import re
from pathlib import Path
from typing import Any

from vllm_medic.accept import environment
from vllm_medic.accept.context import RunContext
from vllm_medic.accept.logs import LogSource, read_sources
from vllm_medic.accept.outcome import StepOutcome
from vllm_medic.model import Category, Finding, Severity
from vllm_medic.snapshot import Snapshot

KEY_LINE = re.compile(
    r"Initializing a V\d LLM engine|non-default args|KV cache size|Maximum concurrency for|"
    r"Starting vLLM (?:API )?server|Application startup complete|Available KV cache memory|"
    r"EngineDeadError|out of memory|OutOfMemoryError|NCCL (?:error|WARN)|Traceback|\bERROR\b"
)
_NON_DEFAULT = re.compile(r"non-default args: (\{.*\})\s*$")
MAX_KEY_LINES = 40


def key_log_lines(sources: list[LogSource]) -> list[str]:
    lines: list[str] = []
    for src in sources:
        for i, line in enumerate(src.lines, start=1):
            if KEY_LINE.search(line):
                lines.append(f"{src.name}:{i}: {line.strip()[:400]}")
                if len(lines) >= MAX_KEY_LINES:
                    return lines
    return lines


def launch_args_from_logs(sources: list[LogSource]) -> dict[str, Any] | None:
    """vLLM logs only the non-default arguments, as a Python dict literal, at start-up."""
    for src in sources:
        for line in src.lines:
            m = _NON_DEFAULT.search(line)
            if not m:
                continue
            try:
                value = ast.literal_eval(m.group(1))
            except (ValueError, SyntaxError):
                return {"raw": m.group(1)[:2000]}
            return value if isinstance(value, dict) else {"raw": m.group(1)[:2000]}
    return None


def _snapshot_dict(snapshot: Any) -> dict[str, Any] | None:
    if snapshot is None:
        return None
    if isinstance(snapshot, dict):
        return snapshot
    snapshot = getattr(snapshot, "snapshot", snapshot)  # collect's CollectResult wraps the Snapshot
    to_dict = getattr(snapshot, "to_dict", None)
    return to_dict() if callable(to_dict) else None


def snapshot_here_or_bundle(bundle: Path | None, collect: bool) -> tuple[Any, str]:
    """(collect's CollectResult or None, where it came from / why not)."""
    try:
        from vllm_medic.collect import api as collect_api
    except ImportError:
        return None, "skipped: the collect engine is not available in this build"
    if bundle is not None:
        return collect_api.load_captured(bundle), f"bundle {bundle}"
    if not collect:
        return None, "skipped: --no-collect"
    return collect_api.collect_here(collect_api.CollectOptions()), "collected on this host"


async def run_archive(ctx: RunContext) -> StepOutcome:
    from vllm_medic.serve.client import EndpointError

    out = StepOutcome("archive")
    opts = ctx.opts
    server: dict[str, Any] = {"url": opts.url, "vllm_version": ctx.version, "model": ctx.model_name()}
    if ctx.server_reachable is not False:
        try:
            server["vllm_version"] = server["vllm_version"] or await ctx.client.version()
            models = await ctx.client.models()
            if ctx.model is None and models:
                ctx.model = str(models[0].get("id"))
                server["model"] = ctx.model
            server["models"] = [
                {"id": m.get("id"), "root": m.get("root"), "max_model_len": m.get("max_model_len")}
                for m in models
            ]
            metrics = await ctx.client.metrics()
            server["cache_config_info"] = metrics.cache_config_info()
        except EndpointError as exc:
            server["error"] = str(exc)
    out.data.update(
        {
            "vllm_version": server.get("vllm_version"),
            "server": server,
        }
    )
    sources = ctx.log_sources
    if sources is None and opts.has_logs:
        sources = await asyncio.to_thread(read_sources, opts.log_paths, opts.docker, opts.kubectl)
    sources = [s for s in sources or [] if not s.error]
    if sources:
        out.data["key_log_lines"] = key_log_lines(sources)
        launch = launch_args_from_logs(sources)
        if launch is not None:
            out.data["launch_args"] = _argv_from_non_default(launch)
            out.data["launch_args_source"] = "server log (non-default args)"
            out.data["non_default_args"] = launch
    try:
        captured, origin = await asyncio.to_thread(snapshot_here_or_bundle, opts.bundle, opts.collect)
    except Exception as exc:  # noqa: BLE001 - a broken bundle is reported on the sheet, not a crash
        captured, origin = None, f"failed: {type(exc).__name__}: {exc}"
        out.add(
            Finding(
                "ACC-ARCHIVE-002", Severity.WARN, Category.OTHER, "the environment snapshot could not be read",
                [origin], ["check --bundle points at a `vllm-medic collect` output (directory or .tgz)"],
            )
        )  # fmt: skip
    out.data["snapshot_origin"] = origin
    snapshot = _snapshot_dict(captured)
    if snapshot is not None:
        _copy_snapshot_facts(snapshot, out.data)
        ctx.attach("snapshot.json", json.dumps(snapshot, default=str), "application/json")
    elif origin.startswith("skipped"):
        out.add(
            Finding(
                "ACC-ARCHIVE-001", Severity.INFO, Category.OTHER, "no environment snapshot on this sheet", [origin],
                ["run `vllm-medic collect` on the server host and pass --bundle, or rerun accept there"],
            )
        )  # fmt: skip
    out.data["environment"] = _environment(ctx, captured, origin, server)
    out.add(environment.headline(out.data["environment"]))
    archived = [
        k for k in ("vllm_version", "launch_args", "key_log_lines", "driver_version") if out.data.get(k)
    ]
    out.add(
        Finding(
            "ACC-ARCHIVE-000", Severity.PASS, Category.OTHER, f"archived: {', '.join(archived) or 'server URL only'}",
            [f"snapshot: {origin}", f"vLLM {out.data.get('vllm_version') or 'unknown'}, model {ctx.model_name()}"],
        )
    )  # fmt: skip
    return out.settle()


def _environment(ctx: RunContext, captured: Any, origin: str, server: dict[str, Any]) -> dict[str, Any]:
    """Preflight plus live cross-checks over what was archived; not_verified when nothing usable was."""
    snap = getattr(captured, "snapshot", None)
    if not isinstance(snap, Snapshot):
        return environment.not_verified(f"no environment snapshot ({origin})")
    empty = not snap.driver.version and not snap.gpus and not snap.launch.argv and not snap.vllm.version
    if empty and ctx.opts.bundle is None:
        # collected here, but this host has nothing of a vLLM server (a client machine, a remote server):
        # judging it would judge the wrong machine. A bundle is always judged, however little it holds.
        return environment.not_verified(
            f"the snapshot ({origin}) holds no driver, GPU, vLLM or launch facts: the server runs elsewhere"
        )
    manifest = getattr(captured, "manifest", {}) or {}
    from vllm_medic.collect.source_entry import entries_by_name

    sources = entries_by_name(manifest.get("sources"))
    checks, recipe = environment.preflight(
        snap, ctx.opts.recipe, ctx.opts.strategy, dict(getattr(captured, "raw", {}) or {}), sources
    )
    cross = environment.cross_check(snap, server) if "error" not in server else []
    return environment.summarise(checks, cross, recipe, origin)


def _argv_from_non_default(args: dict[str, Any]) -> list[str]:
    argv: list[str] = []
    for key, value in args.items():
        flag = "--" + str(key).replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is False:
            argv.append("--no-" + flag[2:])
        elif value is None:
            continue
        elif isinstance(value, list | tuple):
            argv += [flag, *[str(v) for v in value]]
        else:
            argv += [flag, str(value)]
    return argv


def _copy_snapshot_facts(snap: dict[str, Any], data: dict[str, Any]) -> None:
    drv = snap.get("driver") or {}
    img = snap.get("image") or {}
    if isinstance(drv, dict):
        data["driver_version"] = drv.get("version")
        data["cuda_version"] = drv.get("cuda_version")
    if isinstance(img, dict) and (img.get("digest") or img.get("tag")):
        data["image"] = {"tag": img.get("tag"), "digest": img.get("digest")}
    gpus = snap.get("gpus")
    if isinstance(gpus, list):
        data["gpus"] = [g.get("name") if isinstance(g, dict) else str(g) for g in gpus]
    topo = snap.get("topology")
    if topo:
        data["topology"] = topo
    launch = snap.get("launch")
    if isinstance(launch, dict) and launch.get("argv") and not data.get("launch_args"):
        data["launch_args"] = [str(a) for a in launch["argv"]]
        data["launch_args_source"] = f"snapshot ({launch.get('source') or 'launch'})"
