"""`vllm-medic COMMAND …` builds only that command's Click form: the table saying which module
registers which command must match what each module's `register` really adds, or a command would
go missing from its own fast path."""

from __future__ import annotations

import importlib
import subprocess
import sys

import typer

from vllm_medic import cli
from vllm_medic.triage import cli as triage_cli


def _registered(module: str) -> set[str]:
    app = typer.Typer()
    importlib.import_module(module).register(app)
    names = {c.name or c.callback.__name__ for c in app.registered_commands if c.callback is not None}
    return names | {g.name for g in app.registered_groups if g.name}


def test_the_command_table_matches_what_each_module_registers():
    stages = [m for m in cli._COMMAND_MODULES if m != cli._PLUGS]
    assert sorted(cli._COMMANDS_OF) == sorted(stages)
    for module, commands in cli._COMMANDS_OF.items():
        assert _registered(module) == set(commands), module
    assert _registered(cli._PLUGS) == set()


def test_a_named_command_gets_a_command_line_of_its_own_with_the_plugs():
    triage_cli.CLUSTER_TRIAGE._fn = None
    small = cli._app_for(["triage", "x.log", "--json"])
    assert small is not cli.app
    assert [c.name for c in small.registered_commands] == ["triage"]
    assert triage_cli.CLUSTER_TRIAGE.plugged is not None  # `triage --ray` still works
    for args in ([], ["--help"], ["--version"], ["no-such-command"]):
        assert cli._app_for(args) is cli.app


def _imports_of_a_triage_run(log, env) -> tuple[int, set[str]]:
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "vllm_medic.cli", "triage", str(log), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    names = {
        line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")
    }
    return run.returncode, names


def test_a_json_triage_with_a_warm_cache_imports_neither_pyyaml_nor_rich_console(tmp_path):
    """Start-up is most of a small scan's time: PyYAML (~10 ms) is for a cache miss, rich's console
    (~25 ms) for text output; the answer is the same with and without them."""
    log = tmp_path / "rank0.log"
    log.write_text("INFO 12-04 01:00:00 [core.py:1] ok\ntorch.OutOfMemoryError: CUDA out of memory.\n")
    env = {"VLLM_MEDIC_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    cold_code, cold = _imports_of_a_triage_run(log, env)
    warm_code, warm = _imports_of_a_triage_run(log, env)
    assert cold_code == warm_code == 1  # a root cause found, both times
    assert "yaml" in cold  # the first run parsed the shipped files
    assert "vllm_medic.triage.api" in warm
    assert "yaml" not in warm and "rich.console" not in warm
