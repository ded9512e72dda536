"""The `vllm-medic` command line: a thin shell; every command lives in its stage's package.

Each package's ``cli.py`` exposes ``register(app)``. Heavy imports stay inside command bodies so
that ``vllm-medic doctor`` starts fast.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING

import typer

from vllm_medic import __version__
from vllm_medic.model import ExitCode

if TYPE_CHECKING:
    from rich.console import Console

_COMMAND_MODULES = (
    "vllm_medic.collect.cli",
    "vllm_medic.checks.cli",
    "vllm_medic.triage.cli",
    "vllm_medic.accept.cli",
    "vllm_medic.cache.cli",
    "vllm_medic.plan.cli",
    "vllm_medic.sim.cli",
    "vllm_medic.history.cli",
    "vllm_medic.health.cli",
    "vllm_medic.cluster.cli",  # last: plugs the multi-node forms into the stages' commands
)
_PLUGS = "vllm_medic.cluster.cli"
# The commands each module registers (tests/core/test_cli_startup.py checks it against `register`):
# `vllm-medic triage LOG` builds only triage's command. Typer turns every registered command into a
# Click one on each start, ~0.05 s for all of them, which a one-shot `triage` pays before reading a byte.
_COMMANDS_OF = {
    "vllm_medic.collect.cli": ("collect",),
    "vllm_medic.checks.cli": ("check", "rules", "recipes", "doctor"),
    "vllm_medic.triage.cli": ("triage",),
    "vllm_medic.accept.cli": ("accept",),
    "vllm_medic.cache.cli": ("cache",),
    "vllm_medic.plan.cli": ("plan",),
    "vllm_medic.sim.cli": ("sim",),
    "vllm_medic.history.cli": ("history", "report", "diff"),
    "vllm_medic.health.cli": ("health", "nccl-path"),
}


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"vllm-medic {__version__}")
        raise typer.Exit(0)


def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version."
    ),
) -> None:
    pass


def _make_app(modules: tuple[str, ...]) -> typer.Typer:
    cli = typer.Typer(
        name="vllm-medic",
        help="Diagnose self-hosted vLLM deployments (Kimi K3 first) and sign off an acceptance sheet.\n\n"
        "Exit codes: 0 nothing failed, 1 at least one failure (with --strict also warnings), "
        "2 usage error, 3 the tool itself could not work.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )
    cli.callback()(_root)
    for name in modules:
        importlib.import_module(name).register(cli)
    return cli


_whole: list[typer.Typer] = []


def __getattr__(name: str) -> typer.Typer:
    """`cli.app`, the whole command line, is built on first use: a one-shot `vllm-medic triage LOG`
    never builds it (each stage's `register` imports that stage's command module)."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if not _whole:
        _whole.append(_make_app(_COMMAND_MODULES))
    return _whole[0]


def _app_for(args: list[str]) -> typer.Typer:
    """The whole command line, or only the named command's (plus the cluster plugs) when the first
    argument names one: its help, options and errors are the same either way."""
    first = args[0] if args else ""
    for module, commands in _COMMANDS_OF.items():
        if first in commands:
            return _make_app((module, _PLUGS))
    return __getattr__("app")


def _stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def main(argv: list[str] | None = None) -> None:
    try:
        # MedicError is a ClickException: Click itself prints `Error: <message>` and exits 2/3 (errors.py)
        _app_for(sys.argv[1:] if argv is None else argv)(args=argv, standalone_mode=True)
    except KeyboardInterrupt:
        _stderr().print(
            "[yellow]interrupted[/] (what was already measured has been saved where the command says)"
        )
        sys.exit(int(ExitCode.INTERRUPTED))
    except SystemExit:
        raise
    except RecursionError:  # JSON/YAML nested ~1,000 deep: bad input, not a tool failure
        _stderr().print(
            "[red]error:[/] an input is nested too deeply to read (JSON or YAML over ~1,000 levels); "
            "check the files given to this command",
            highlight=False,
        )
        sys.exit(int(ExitCode.USAGE))
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a traceback for the user
        if os.environ.get("VLLM_MEDIC_DEBUG"):
            raise
        from rich.markup import escape

        from vllm_medic.redact import redact_text

        _stderr().print(
            f"[red]internal error:[/] {type(exc).__name__}: {escape(redact_text(str(exc)))}\n"
            "Set VLLM_MEDIC_DEBUG=1 to see the traceback, and please report it.",
            highlight=False,
        )
        sys.exit(int(ExitCode.TOOL_ERROR))


if __name__ == "__main__":
    main()
