"""Lines that announce a cause instead of being it.

Some failure lines are wrappers: `torch._dynamo ... BackendCompilerFailed: backend='x' raised:` and
NCCL's `NCCL error ... unhandled cuda error (run with NCCL_DEBUG=INFO for details)` print the real
error on the next lines (`RuntimeError: ... Lack of device memory`, `Last error: Cuda failure
'out of memory'`); vLLM V0's `MQEngineDeadError: ... Inspect the stacktrace to find the original
error: OutOfMemoryError(...)` quotes an error the engine process prints itself next to it. A wrapper
still classifies (when nothing else is there it is the best evidence), but a classified line right
after it, in the same file and run, is the root: the wrapper only points at it.
"""

from __future__ import annotations

import re

# The cause is printed on the following lines (a different line class from the wrapper's).
CAUSE_FOLLOWS = re.compile(
    r"\braised:\s*$|\bLast error:\s*$|\(run with NCCL_DEBUG=(?:INFO|WARN) for details\)"
    # round 11: std::terminate's header; the exception's own message is on its `what():` line below.
    r"|\bterminate called after throwing an instance of '[^']+'\s*$"
    # round 16: PyTorch's c10d NCCL error before its `(run with NCCL_DEBUG=…)` hint existed (torch 2.0:
    # `NCCL error in: ProcessGroupNCCL.cpp:1287, invalid usage, NCCL version 2.17.1`): the NCCL error
    # name, `Last error:` and NCCL's own message follow.
    r"|NCCL error in: [^\n]*, NCCL version [\w.+\-]+\s*$"
    # round 20: torch_npu's error code alone at the end of a line (`ERR02200 DIST call api failed`: submodule
    # and ErrCode, `call <lib> api failed` for an ACL/HCCL/GE call): CANN's own message for the call that
    # failed (`Config_Error_Ranktable(E10014): Value … is invalid`) is printed on the lines below it.
    r"|\bERR\d{5} [A-Z]+ call (?:\w+ )?api failed\.?\s*$"
)
# round 20: a header with no message of its own: a Rust panic's (Rust >= 1.73: `thread '<unnamed>' panicked
# at src/file.rs:409:17:`), whose message is the next line. It gives way to that line whenever the line
# classifies, even to the class the header borrowed from it as a neighbour (blind round 6's mistralrs-44:
# the CUDA OOM under the header is the root); a message that does not classify leaves the header.
HEADER_ONLY = re.compile(r"\bpanicked at [^\s:]+:\d+:\d+:\s*$")
# The cause is quoted inside the line and printed in full by the process that failed.
QUOTES_CAUSE = re.compile(r"Inspect the stacktrace to find the original error")
# The line only opens a structured dump (torchelastic's `error_handler: {`): its content below says it.
OPENS_DUMP = re.compile(r"[:=\s][{\[]\s*$")
# How far below the wrapper the cause may sit (NCCL: error, ncclUnhandledCudaError, "Last error:", cause).
WINDOW_LINES = 4


def wrapper_kind(message: str) -> str | None:
    """ "follows" | "header" | "quotes" | "dump" | None."""
    if CAUSE_FOLLOWS.search(message):
        return "follows"
    if HEADER_ONLY.search(message):
        return "header"
    if QUOTES_CAUSE.search(message):
        return "quotes"
    if OPENS_DUMP.search(message):
        return "dump"
    return None
