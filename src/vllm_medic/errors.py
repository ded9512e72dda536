"""Errors that map to the documented exit codes (2 usage, 3 tool could not work).

They derive from the Click exception class that Typer itself runs on, so whichever way a command is
invoked (the console script, or Typer's test runner) it prints ``Error: <message>`` on stderr and
exits with the code, never a traceback.
"""

try:  # Typer >= 0.2x runs on a vendored Click
    from typer._click import ClickException as _ClickException
except ImportError:  # older Typer runs on Click itself
    from click import ClickException as _ClickException  # type: ignore[assignment]  # same class, older home


class MedicError(_ClickException):
    """Every message is redacted on construction: an error naming a URL with a password, a launch line
    or a log excerpt is an exit like any other (stderr is pasted into tickets)."""

    exit_code = 3

    def __init__(self, message: str) -> None:
        from vllm_medic.redact import redact_text

        super().__init__(redact_text(str(message)))


class UsageError(MedicError):
    """The user asked for something that cannot be done as asked (bad path, malformed recipe, ...)."""

    exit_code = 2


class ToolError(MedicError):
    """The tool itself could not do its work (cannot write the bundle, internal failure, ...)."""

    exit_code = 3
