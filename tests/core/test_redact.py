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


# One SYNTHETIC token per known shape (data/secret_shapes.yaml); each must be masked in plain text.
SHAPE_EXAMPLES = {
    "huggingface": "hf_QxTrPlNmVbKjHgFdSaZwEuRiOy",
    "openai": "sk-proj-Fk3LmQ9zR7tVw2XbN5cJ8pHd",
    "ngc": "nvapi-Zk9Qw3Er7Ty1Ui5Op2As6Df4Gh8Jk0LzXcVbNm",
    "github": "ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv",
    "github-fine-grained": "github_pat_11ABCDEFG0123456789_abcdefghijKLMNOP",
    "aws-access-key-id": "AKIAZ7Q4W2E8R6T1Y3U5",
    "slack": "xoxb-123456789012-abcdefABCDEF",
    "gitlab": "glpat-Ab1Cd2Ef3Gh4Ij5Kl6Mn",
    "google-api-key": "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
}


def test_every_known_shape_has_an_example_and_is_masked_in_free_text():
    from vllm_medic.redact import shapes

    assert {name for name, _, _ in shapes()} == set(SHAPE_EXAMPLES)
    for name, token in SHAPE_EXAMPLES.items():
        out = redact_text(f"INFO 12-01 loading with {token} now")
        assert token not in out and "loading with" in out and "now" in out, (name, out)


def test_every_shape_is_caught_by_the_large_text_prefilter():
    from vllm_medic.collect.redaction import WHOLE_TEXT_LIMIT, redact_output

    filler = "[1.0] NVRM: nothing to see here at all, just a kernel line\n" * (WHOLE_TEXT_LIMIT // 50)
    text = filler + "\n".join(f"x {t} y" for t in SHAPE_EXAMPLES.values()) + "\n" + filler
    out = redact_output(text)
    assert [t for t in SHAPE_EXAMPLES.values() if t in out] == []


STRUCTURE_CASES = {  # secret-bearing forms whose value has no known shape: only structure finds them
    "vllm non-default args": ("non-default args: {'api_key': ['KEYaaa111'], 'model': 'm'}", "'model': 'm'"),
    "python repr": ("Namespace(api_key='KEYaaa111', port=8000)", "port=8000"),
    "bare auth header": ("Authorization: KEYaaa111", "Authorization"),
    "bearer header": ("-H 'Authorization: Bearer KEYaaa111'", "Bearer"),
    "basic auth": ("Authorization: Basic dXNlcjpLRVlhYWExMTE=", "Basic"),
    "x-api-key header": ('{"X-Api-Key": "KEYaaa111"}', "X-Api-Key"),
    "shell flag": ("vllm serve m --api-key KEYaaa111 --port 8000", "--port 8000"),
    "shell flag =": ('vllm serve m --api-key="KEYaaa111" --port 8000', "--port 8000"),
    "shell continuation": ("vllm serve m \\\n  --api-key \\\n  KEYaaa111 \\\n  --port 8000", "--port 8000"),
    "k8s args list": ("args:\n  - --api-key\n  - KEYaaa111\n  - --port\n  - '8000'", "'8000'"),
    "k8s quoted list": ('args:\n- "--token"\n- "KEYaaa111"\n- "--port"', '"--port"'),
    "yaml flow list": ('args: ["--api-key", "KEYaaa111", "--port", "8000"]', '"8000"'),
    "docker inspect": ('"Args": [\n "--password",\n "KEYaaa111"\n]', '"Args"'),
    "docker login -p": ("docker login nvcr.io -u '$oauthtoken' -p KEYaaa111", "nvcr.io"),
    "curl -u": ("curl -u admin:KEYaaa111 http://127.0.0.1:8000/metrics", "admin:"),
    "url credentials": ("--server http://user:KEYaaa111@10.0.0.5:8000", "10.0.0.5:8000"),
    "url query": ("GET /v1/models?api_key=KEYaaa111&x=1", "x=1"),
    "env assignment": ("VLLM_API_KEY=KEYaaa111 vllm serve m", "vllm serve m"),
    "json pair": ('{"hf_token": "KEYaaa111", "port": 8000}', '"port": 8000'),
    "yaml pair": ("api_key: KEYaaa111\nport: 8000", "port: 8000"),
}


def test_structural_forms_are_masked_and_their_neighbours_kept():
    for name, (text, kept) in STRUCTURE_CASES.items():
        out = redact_text(text)
        assert "KEYaaa111" not in out, (name, out)
        assert kept in out, (name, out)
        assert redact_text(out) == out, (name, "redaction must be idempotent", out)


def test_a_following_flag_or_a_port_mapping_is_never_taken_for_a_value():
    assert redact_text("docker run -p 8000:8000 img") == "docker run -p 8000:8000 img"
    out = redact_text('["--api-key", "--port", "8000"]')
    assert out == '["--api-key", "--port", "8000"]'
    assert "8192" in redact_text("--max-num-batched-tokens 8192 --api-key K")
    assert redact_text("'api_key': None") == "'api_key': None", "an unset key is diagnostic, kept"


def test_objects_are_walked_into_lists_and_nested_maps_under_a_secret_key():
    obj = redact_obj(
        {
            "non_default_args": {"api_key": ["KEYaaa111"], "model": "m"},
            "auth": {"token": {"value": "KEYbbb222"}, "kind": "bearer-ish"},
            "argv": ["docker", "login", "-p", "KEYccc333", "nvcr.io"],
            "lines": ["x", "Authorization: KEYddd444"],
        }
    )
    flat = repr(obj)
    for secret in ("KEYaaa111", "KEYbbb222", "KEYccc333", "KEYddd444"):
        assert secret not in flat, (secret, flat)
    assert obj["non_default_args"]["model"] == "m" and "nvcr.io" in obj["argv"]
    assert redact_obj({"signature": "cuda-oom"}, by_name=False) == {"signature": "cuda-oom"}
