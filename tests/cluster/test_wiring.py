"""The multi-node forms reach the stages' commands through hooks (vllm_medic/hooks.py), plugged by
cluster/cli.py when the command line is built: the stages never import cluster."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from vllm_medic.errors import ToolError
from vllm_medic.hooks import Hook


def test_the_command_line_plugs_every_multi_node_form() -> None:
    import vllm_medic.cli  # noqa: F401 - building the app plugs the hooks
    from vllm_medic.accept import cli as accept_cli
    from vllm_medic.checks import cli as checks_cli
    from vllm_medic.collect import cli as collect_cli
    from vllm_medic.triage import cli as triage_cli

    hooks = [checks_cli.CLUSTER_CHECK, collect_cli.FANOUT, triage_cli.CLUSTER_TRIAGE, accept_cli.DISTRIBUTED]
    assert [h.what for h in hooks if h.plugged is None] == []
    assert {getattr(h.plugged, "__module__", None) for h in hooks} == {"vllm_medic.cluster.cli"}


def test_a_hook_nothing_fills_is_a_tool_error_naming_it() -> None:
    hook: Hook[Callable[..., int]] = Hook("triage --ray")
    with pytest.raises(ToolError, match="triage --ray is not available"):
        hook.need()
    hook.plug(len)
    assert hook.need() is len and hook.plugged is len
