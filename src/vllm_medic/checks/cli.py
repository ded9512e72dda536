"""`check`, `rules`, `recipes` and `doctor`: preflight verdicts over a snapshot and a recipe."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vllm_medic.cli_common import JsonOpt, JunitOpt, StrictOpt, VerboseOpt, console, emit_findings, stderr
from vllm_medic.hooks import Hook

if TYPE_CHECKING:
    from vllm_medic.recipes.model import Recipe


@dataclass(frozen=True)
class ClusterCheckRequest:
    """`check --from PATH` handed to its multi-node form: the bundle, what to check it against, how to report."""

    path: Path
    recipe: Recipe
    model_config: dict[str, Any] | None
    strategy: str | None
    hardware: str | None
    as_json: bool
    junit: Path | None
    strict: bool
    verbose: bool


#: the exit code of `check` on a multi-node bundle; None when the path is not one
ClusterCheck = Callable[[ClusterCheckRequest], int | None]


#: plugged by the cluster package (cluster/cli.py): each node's verdicts folded, plus what differs
CLUSTER_CHECK: Hook[ClusterCheck] = Hook("check on a multi-node bundle")

RecipeOpt = Annotated[
    str,
    typer.Option(
        "--recipe",
        help="Shipped recipe name (see `vllm-medic recipes`) or the path of a recipe YAML "
        "(ours or an official vllm-project/recipes model file).",
        metavar="NAME|PATH",
    ),
]
LaunchOpt = Annotated[
    str | None,
    typer.Option(
        "--launch",
        help="The launch command ('vllm serve ...'), or a file holding it (script, docker inspect JSON, "
        "Kubernetes manifest). Overrides the snapshot's launch.",
        metavar="TEXT|FILE",
    ),
]
ModelOpt = Annotated[
    Path | None,
    typer.Option(
        "--model", help="Model directory (or its config.json) to check the architecture.", metavar="PATH"
    ),
]
StrategyOpt = Annotated[
    str | None,
    typer.Option("--strategy", help="Recipe strategy, e.g. single_node_tp, multi_node_dep.", metavar="NAME"),
]
HardwareOpt = Annotated[
    str | None,
    typer.Option(
        "--hardware", help="Hardware key when not detectable, e.g. b300, h200, gb300.", metavar="KEY"
    ),
]
TimeoutOpt = Annotated[
    float, typer.Option("--timeout", help="Per-probe timeout in seconds for live collection.", min=0.1)
]
ImageOpt = Annotated[
    str | None, typer.Option("--image", help="Docker image to inspect when collecting live.", metavar="IMAGE")
]


def register(app: typer.Typer) -> None:
    app.command("check")(check_cmd)
    app.command("rules")(rules_cmd)
    app.command("recipes")(recipes_cmd)
    app.command("doctor")(doctor_cmd)


def check_cmd(
    from_: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="Bundle directory or .tar.gz (or a directory of captured outputs).",
            metavar="DIR_OR_BUNDLE",
        ),
    ] = None,
    snapshot: Annotated[
        Path | None, typer.Option("--snapshot", help="A snapshot.json.", metavar="FILE")
    ] = None,
    recipe: RecipeOpt = "generic",
    strategy: StrategyOpt = None,
    hardware: HardwareOpt = None,
    model: ModelOpt = None,
    launch: LaunchOpt = None,
    image: ImageOpt = None,
    timeout: TimeoutOpt = 10.0,
    as_json: JsonOpt = False,
    junit: JunitOpt = None,
    strict: StrictOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Preflight verdicts for a recipe, from a bundle (--from), a snapshot (--snapshot) or collected here."""
    from vllm_medic.checks import inputs
    from vllm_medic.checks.api import read_model_config, run_checks, severity_counts
    from vllm_medic.errors import UsageError
    from vllm_medic.recipes import load_recipe

    if from_ is not None and snapshot is not None:
        raise UsageError("give either --from or --snapshot, not both")
    rec = load_recipe(recipe)
    model_config = read_model_config(model) if model is not None else None
    if from_ is not None and snapshot is None and (cluster_check := CLUSTER_CHECK.plugged) is not None:
        request = ClusterCheckRequest(
            from_, rec, model_config, strategy, hardware, as_json, junit, strict, verbose
        )
        code = cluster_check(request)
        if code is not None:
            raise typer.Exit(code)
    if from_ is not None:
        ev = inputs.from_bundle(from_)
    elif snapshot is not None:
        ev = inputs.from_snapshot_file(snapshot)
    else:
        ev = inputs.live(image, launch, timeout, str(model) if model else None)  # collect parses --launch
    if (from_ is not None or snapshot is not None) and launch is not None:
        inputs.apply_launch(ev.snapshot, launch)
    if model_config is None:
        extra_model = ev.snapshot.extra.get("model")
        if isinstance(extra_model, dict) and extra_model.get("architectures"):
            model_config = extra_model
    findings = run_checks(
        ev.snapshot,
        rec,
        model_config=model_config,
        strategy=strategy,
        hardware=hardware,
        raw=ev.raw,
        sources=ev.sources,
    )
    code = emit_findings(
        findings,
        as_json=as_json,
        junit=junit,
        strict=strict,
        suite="vllm-medic.check",
        extra={"recipe": rec.summary(), "evidence_from": ev.origin, "counts": severity_counts(findings)},
        title=f"vllm-medic check — recipe {rec.name} ({rec.source}); evidence: {ev.origin}",
        verbose=verbose,
    )
    raise typer.Exit(int(code))


def rules_cmd(as_json: JsonOpt = False) -> None:
    """Print the rule catalogue: id, category, title, why, fix."""
    from vllm_medic.checks.api import load_rules
    from vllm_medic.report.jsonout import dumps

    rules = load_rules()
    if as_json:
        typer.echo(dumps({"rules": [r.catalogue_entry() for r in rules]}))
        return
    out = console()
    from rich.markup import escape

    for r in rules:
        out.print(f"[bold]{r.id}[/] [dim]{r.category.value}[/]  {escape(r.title)}", highlight=False)
        out.print(f"    why: {escape(r.why)}", highlight=False)
        for i, step in enumerate(r.fix, 1):
            out.print(f"    {i}. {escape(step)}", highlight=False)
        for d in r.docs:
            out.print(f"    [dim]docs: {escape(d)}[/]", highlight=False)
    out.print(f"\n{len(rules)} rules.", highlight=False)


def recipes_cmd(as_json: JsonOpt = False) -> None:
    """List the shipped recipes. A path to a recipe YAML works wherever a name does."""
    from vllm_medic.recipes import list_recipes
    from vllm_medic.report.jsonout import dumps

    items = list_recipes()
    note = (
        "Any --recipe also accepts a path: a vllm-medic recipe YAML, or an official vllm-project/recipes "
        "model file (e.g. models/moonshotai/Kimi-K3.yaml; strategies/ beside it is read when present)."
    )
    if as_json:
        typer.echo(
            dumps(
                {
                    "recipes": [
                        {"name": i.name, "title": i.title, "model": i.model, "source": i.source}
                        for i in items
                    ],
                    "note": note,
                }
            )
        )
        return
    from rich.markup import escape

    out = console()
    for i in items:
        out.print(
            f"[bold]{escape(i.name)}[/]  {escape(i.title)}  model: {escape(i.model or 'any')}",
            highlight=False,
        )
        out.print(f"    source: {escape(i.source)}", highlight=False)
    out.print(f"\n{escape(note)}", highlight=False)


def doctor_cmd(
    recipe: RecipeOpt = "generic",
    launch: LaunchOpt = None,
    image: ImageOpt = None,
    model: ModelOpt = None,
    timeout: TimeoutOpt = 10.0,
    as_json: JsonOpt = False,
    junit: JunitOpt = None,
    strict: StrictOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Collect here and check, flutter-doctor style: [✓] [!] [✗], the fix under each, probe timings."""
    start = time.monotonic()
    from vllm_medic.checks import inputs
    from vllm_medic.checks.api import read_model_config, run_checks, severity_counts
    from vllm_medic.checks.doctor_view import probe_rows, render_doctor
    from vllm_medic.model import ExitCode, exit_code_for
    from vllm_medic.recipes import load_recipe
    from vllm_medic.report.jsonout import dumps
    from vllm_medic.report.junit import write_junit

    rec = load_recipe(recipe)
    model_config = read_model_config(model) if model is not None else None
    ev = inputs.live(image, launch, timeout, str(model) if model else None)
    findings = run_checks(ev.snapshot, rec, model_config=model_config, raw=ev.raw, sources=ev.sources)
    wall = time.monotonic() - start
    code = exit_code_for(findings, strict)
    interrupted = bool(ev.manifest.get("interrupted"))
    if interrupted:  # Ctrl-C during collection: report what was measured, then exit 130
        code = ExitCode.INTERRUPTED
    if as_json:
        payload = {
            "recipe": rec.summary(),
            "probes": probe_rows(ev.sources),
            "wall_s": round(wall, 3),
            "interrupted": interrupted,
            "findings": [f.to_dict() for f in findings],
            "counts": severity_counts(findings),
            "exit_code": int(code),
        }
        typer.echo(dumps(payload))
    else:
        render_doctor(
            console(), findings, recipe_name=rec.name, sources=ev.sources, wall_s=wall, verbose=verbose
        )
        if interrupted:
            stderr.print("[yellow]interrupted:[/] probes were cut short; the findings above are partial.")
    if junit is not None:  # after the findings are shown: an unwritable FILE must not hide them
        write_junit(junit, findings, "vllm-medic.doctor", strict)
    raise typer.Exit(int(code))
