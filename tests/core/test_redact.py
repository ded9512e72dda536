from vllm_medic.redact import MASK, redact_argv, redact_env, redact_obj, redact_text


def test_env_secret_names_are_masked_but_plain_values_kept():
    env = redact_env(
        {
            "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwx",
            "NCCL_SOCKET_IFNAME": "eth0",
            "OPENAI_API_KEY": "sk-live",
            "VLLM_API_KEY": "abc",
            "TOKENIZERS_PARALLELISM": "false",
            "AWS_SECRET_ACCESS_KEY": "x/y",
        }
    )
    assert env["HF_TOKEN"] == MASK and env["OPENAI_API_KEY"] == MASK and env["VLLM_API_KEY"] == MASK
    assert env["AWS_SECRET_ACCESS_KEY"] == MASK
    assert env["NCCL_SOCKET_IFNAME"] == "eth0" and env["TOKENIZERS_PARALLELISM"] == "false"


def test_text_shapes_urls_and_args():
    text = (
        "vllm serve m --api-key s3cr3tvalue --hf-token=hf_abcdefghijklmnopqrstuvwx "
        "url=https://user:hunter2@example.com/x?token=abc&x=1 Authorization: Bearer abcdefghijkl "
        "AKIAABCDEFGHIJKLMNOP password=pw123"
    )
    out = redact_text(text)
    for secret in (
        "s3cr3tvalue",
        "hf_abcdefghijklmnopqrstuvwx",
        "hunter2",
        "token=abc",
        "abcdefghijkl",
        "AKIAABCDEFGHIJKLMNOP",
        "pw123",
    ):
        assert secret not in out, (secret, out)
    assert "example.com" in out and "x=1" in out


def test_argv_and_objects():
    assert redact_argv(["vllm", "serve", "--api-key", "k1", "--api-key=k2", "--port", "8000"]) == [
        "vllm",
        "serve",
        "--api-key",
        MASK,
        f"--api-key={MASK}",
        "--port",
        "8000",
    ]
    obj = redact_obj({"env": {"HF_TOKEN": "abc"}, "args": ["--api-key", "zzz"], "n": 3, "max_tokens": 5})
    assert obj["env"]["HF_TOKEN"] == MASK and obj["n"] == 3 and obj["max_tokens"] == 5
