"""The step registry is the one spelling of the acceptance steps: every other place agrees with it."""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path

import typer.main

from vllm_medic.accept.options import parse_steps
from vllm_medic.accept_steps import BY_NAME, STEP_NAMES, STEPS, numbered_title
from vllm_medic.cli import app

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "vllm_medic"
NAME_RUN = re.compile(
    r"\bstart(?:[,|]\w+)+"
)  # "start,basic,…" / "start|basic|…" wherever docs list the steps


def test_every_step_runs_an_async_function_of_that_name() -> None:
    for step in STEPS:
        fn = step.function()
        assert asyncio.iscoroutinefunction(fn), step
        assert fn.__name__ == f"run_{step.name}", step


def test_the_server_steps_are_the_ones_between_start_and_archive() -> None:
    assert [s.name for s in STEPS if s.needs_server] == ["basic", "prefix_reuse", "ramp", "soak"]
    assert parse_steps(None) == STEP_NAMES
    assert parse_steps("archive,start") == ("start", "archive")  # run order is the table's


def test_titles_are_numbered_by_position_and_unknown_names_pass_through() -> None:
    assert numbered_title("start") == "1. Service start"
    assert numbered_title("ramp") == "4. Concurrency ramp"
    assert numbered_title("archive") == f"{len(STEPS)}. Archive"
    assert numbered_title("warmup") == "warmup"


def test_the_cli_help_lists_the_table() -> None:
    command = typer.main.get_command(app).commands["accept"]  # type: ignore[attr-defined]
    steps_option = next(p for p in command.params if p.name == "steps")
    assert NAME_RUN.search(steps_option.help).group(0) == ",".join(STEP_NAMES)
    assert ", ".join(STEP_NAMES) in command.help


def test_the_docs_list_the_steps_of_the_table() -> None:
    accept_md = (ROOT / "docs" / "accept.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    runs = NAME_RUN.findall(accept_md) + NAME_RUN.findall(readme.replace(", ", ","))
    assert len(runs) >= 3, runs
    assert {re.sub(r"[,|]", ",", r) for r in runs} == {",".join(STEP_NAMES)}
    section = accept_md.split("## The steps", 1)[1].split("\n## ", 1)[0]
    table_names = re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE)
    assert tuple(table_names) == STEP_NAMES


def _step_literals(path: Path) -> set[str]:
    """String literals passed as the step name to ``step(run, NAME)`` / ``_step_data(run, NAME)``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and len(node.args) == 2 and isinstance(node.args[1], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("step", "_step_data"):
                found.add(node.args[1].value)
    return found


def test_the_sheet_and_the_views_read_only_steps_of_the_table() -> None:
    read = _step_literals(SRC / "store" / "views.py") | _step_literals(SRC / "report" / "html.py")
    assert {"ramp", "soak", "prefix_reuse", "archive"} <= read, read  # the scan sees the lookups
    assert read <= set(BY_NAME), read - set(BY_NAME)


def test_no_module_spells_the_step_list_again() -> None:
    """A tuple or list literal holding three or more step names outside the table is a copy to drift."""
    names = set(STEP_NAMES)
    copies = []
    for path in SRC.rglob("*.py"):
        if path.name == "accept_steps.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Tuple | ast.List | ast.Set | ast.Dict):
                elts = node.keys if isinstance(node, ast.Dict) else node.elts
                hits = [e.value for e in elts if isinstance(e, ast.Constant) and e.value in names]
                if len(hits) >= 3:
                    copies.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not copies, copies
