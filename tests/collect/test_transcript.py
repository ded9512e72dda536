"""Splitting one pasted terminal transcript into canonical files (real transcripts from SOURCES.md)."""

from __future__ import annotations

from tests.collect.conftest import sample

from vllm_medic.collect.transcript import split_transcript


def test_truenas_transcript_two_commands():
    files, unknown = split_transcript(
        sample("nvidia-smi-errors/nvml-version-mismatch-580.178-plus-proc-driver-version.txt")
    )
    assert sorted(files) == ["nvidia-smi.txt", "proc-driver-nvidia-version.txt"]
    assert b"Driver/library version mismatch" in files["nvidia-smi.txt"]
    assert files["proc-driver-nvidia-version.txt"].startswith(
        b"$ cat /proc/driver/nvidia/version\nNVRM version:"
    )
    assert unknown == []


def test_empty_greps_still_answer_and_the_bare_prompt_ends_the_output():
    files, _ = split_transcript(
        sample("lsmod/lsmod-grep-nvidia_peermem-and-nv_peer_mem-both-empty-not-loaded.txt")
    )
    # each file keeps its command line: the reader sees two greps, not an empty module list
    assert files == {"lsmod.txt": b"$ lsmod | grep nvidia_peermem\n$ lsmod | grep nv_peer_mem\n"}


def test_unknown_commands_are_reported_and_hash_comments_stay_output():
    text = (  # SYNTHETIC transcript
        "user@node7:~$ hostname\nnode7\n"
        "user@node7:~$ pip freeze\n# Editable install with no version control (foo==1.0)\n-e /src/foo\ntorch==2.8.0+cu128\n"
        "root@node7:~# nvidia-smi topo -m\n\tGPU0\tCPU Affinity\nGPU0\t X \t0-7\n"
    )
    files, unknown = split_transcript(text)
    assert unknown == ["hostname"]
    assert b"torch==2.8.0+cu128" in files["pip-freeze.txt"] and b"# Editable" in files["pip-freeze.txt"]
    assert files["nvidia-smi-topo-m.txt"].startswith(b"$ nvidia-smi topo -m\n\tGPU0")
