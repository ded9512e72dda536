"""Command registration for this stage (filled in by the stage's work)."""

import typer


def register(app: typer.Typer) -> None:
    del app
