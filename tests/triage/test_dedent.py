"""A log pasted as one uniformly indented block is read without the indent (triage/dedent.py)."""

from __future__ import annotations

import io

from triage_json import blind_case, found_root

from vllm_medic.triage.dedent import common_indent, dedent, maybe_dedent


def test_xinference_2926_indented_as_a_list_item_is_found_on_its_line(tmp_path):
    case = blind_case("round15.jsonl", "xinference-2926")
    assert all(line.startswith("   ") for line in case["log"].splitlines() if line.strip())
    rc = found_root(tmp_path, case["log"])
    assert (rc["category"], rc["line"]) == (case["category"], case["first_anomaly_line"])


def test_common_indent_is_shared_by_every_non_blank_line():
    assert common_indent(b"   a\n\n     b\n   c\n") == b"   "
    assert common_indent(b"   a\nb\n") == b""
    assert common_indent(b"\t a\n\t b\n") == b"\t "
    assert dedent(b"  x\n\n    y\n") == b"x\n\n  y\n"
    assert dedent(b"x\n  y\n") is None


def test_line_numbers_are_kept_and_unindented_logs_pass_untouched():
    data = b'   one\n\n   Traceback (most recent call last):\n     File "a.py", line 1, in f\n'
    out = maybe_dedent(io.BytesIO(data)).read()
    assert out.count(b"\n") == data.count(b"\n") and out.startswith(b"one\n\nTraceback")
    plain = io.BytesIO(b"INFO start\n   continuation\n")
    assert maybe_dedent(plain) is plain and plain.tell() == 0


def test_a_pipe_is_not_read_ahead():
    class Pipe(io.BytesIO):
        def seekable(self) -> bool:
            return False

    pipe = Pipe(b"   indented\n")
    assert maybe_dedent(pipe) is pipe and pipe.tell() == 0
