"""Errors that map to the documented exit codes (2 usage, 3 tool could not work).

They derive from the Click exception class that Typer itself runs on, so whichever way a command is
invoked (the console script, or Typer's test runner) it prints ``Error: <message>`` on stderr and
exits with the code, never a traceback.
"""

try:  # Typer >= 0.2x runs on a vendored Click
    from typer._click import ClickException as _ClickException
except ImportError:  # older Typer runs on Click itself
    from click import ClickException as _ClickException


class MedicError(_ClickException):
    exit_code = 3


class UsageError(MedicError):
    """The user asked for something that cannot be done as asked (bad path, malformed recipe, ...)."""

    exit_code = 2


class ToolError(MedicError):
    """The tool itself could not do its work (cannot write the bundle, internal failure, ...)."""

    exit_code = 3
