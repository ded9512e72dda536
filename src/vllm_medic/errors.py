"""Errors that map to the documented exit codes (2 usage, 3 tool could not work)."""


class MedicError(Exception):
    exit_code = 3


class UsageError(MedicError):
    """The user asked for something that cannot be done as asked (bad path, malformed recipe, ...)."""

    exit_code = 2


class ToolError(MedicError):
    """The tool itself could not do its work (cannot write the bundle, internal failure, ...)."""

    exit_code = 3
