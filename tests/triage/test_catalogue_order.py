"""Generic catch-alls load last, so a specific signature in any shipped file wins the line."""

import pytest

from vllm_medic.triage.api import scan_text


@pytest.mark.parametrize(
    ("line", "signature"),
    [
        # NCCL's own wording (nccl src/include/shm.h, misc/shmutils.cc) under a container's 64 MB /dev/shm
        (
            "gpu1:123:456 [0] include/shm.h:28 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-4ZnSNt (size 9637888)",
            "shm-too-small",
        ),
        (
            "gpu1:123:456 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-F0xHdQ to 9637892 bytes",
            "shm-too-small",
        ),
        ("gpu1:123:456 [0] misc/socket.cc:484 NCCL WARN Some other NCCL failure", "nccl-warn"),
    ],
)
def test_specific_signatures_win_over_generic_nccl_warn(line, signature):
    assert scan_text(line).to_dict()["root_cause"]["signature"] == signature
