"""str.isdigit() is true for '²' and friends, which int() rejects: parsers test with isdecimal()."""

from vllm_medic.collect.health.limits import parse_cgroup_memory


def test_superscript_digits_are_not_a_number():
    assert parse_cgroup_memory("²").known is False
    assert parse_cgroup_memory("1073741824").limit_bytes == 1073741824
