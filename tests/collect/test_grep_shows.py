"""A grepped paste proves an absence only of what its grep would have shown."""

import pytest

from vllm_medic.collect.parsers.residue import grep_shows


@pytest.mark.parametrize(
    ("command", "name", "shows"),
    [
        ("lsmod | grep nvidia", "nvidia_peermem", True),
        ("lsmod | grep -i NVIDIA", "nvidia_peermem", True),
        ("lsmod | grep -E 'mlx5|nvidia'", "nvidia_peermem", True),
        ("lsmod | grep nvidia", "mlx5_ib", False),
        ("lsmod | grep -v nvidia", "nvidia_peermem", False),
        ("lsmod | grep -w nvidia", "nvidia_peermem", False),
        ("lsmod | grep nvidia | head -3", "nvidia_peermem", False),
        ("lsmod | grep 'nv.*mem'", "nvidia_peermem", False),
        ("lsmod", "nvidia_peermem", False),
    ],
)
def test_grep_shows(command, name, shows):
    assert grep_shows(command, name) is shows
