"""Ctrl-C racing a probe's start: a process registered after kill_all() must not survive."""

import subprocess

from vllm_medic.collect.runner import ProcessRegistry


def test_a_process_started_after_kill_all_is_killed_on_registration():
    registry = ProcessRegistry()
    registry.kill_all()  # Ctrl-C arrived while this probe's thread was still inside Popen
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    registry.add(proc)
    assert proc.wait(timeout=5) != 0  # killed, not left to run out its timeout


def test_processes_registered_before_kill_all_are_killed_by_it():
    registry = ProcessRegistry()
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    registry.add(proc)
    registry.kill_all()
    assert proc.wait(timeout=5) != 0
