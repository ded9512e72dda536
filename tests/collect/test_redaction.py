"""Large outputs are redacted line by line, with the same result as the whole-text redactor."""

from __future__ import annotations

from vllm_medic.collect.redaction import WHOLE_TEXT_LIMIT, redact_output
from vllm_medic.redact import redact_text

SECRET_LINES = [  # SYNTHETIC secrets of every shape the shared redactor knows
    "export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz",
    "curl -H 'Authorization: Bearer abcdefghijklmnop' https://user:hunter22@example.com/x?token=abc",
    "vllm serve m --api-key s3cr3tvalue",
    "AWS_SECRET_ACCESS_KEY=abc/def AKIAABCDEFGHIJKLMNOP",
    "key: sk-proj-abcdefghijklmnopqrstu ghp_abcdefghijklmnopqrstuvwxyz glpat-abcdefghijklmnopqrstu",
    "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
]


def test_big_kernel_log_with_secrets_sprinkled_in():
    noise = (
        "[12345.678901] NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
    )
    text = noise * 4000 + "\n".join(SECRET_LINES) + "\n" + noise * 4000
    assert len(text) > WHOLE_TEXT_LIMIT
    out = redact_output(text)
    assert out == redact_text(text)
    for secret in (
        "hf_abcdefghijklmnopqrstuvwxyz",
        "abcdefghijklmnop",
        "hunter22",
        "s3cr3tvalue",
        "AKIAABCDEFGHIJKLMNOP",
        "sk-proj-abcdefghijklmnopqrstu",
        "ghp_abcdefghijklmnopqrstuvwxyz",
        "eyJhbGciOiJIUzI1NiJ9",
    ):
        assert secret not in out


def test_small_text_uses_the_shared_redactor_unchanged():
    text = "\n".join(SECRET_LINES)
    assert redact_output(text) == redact_text(text)
