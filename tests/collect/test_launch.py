"""parse_launch: every way a vLLM launch is written down. Inputs are SYNTHETIC unless noted; flag
names and values come from the Kimi K3 recipe and vLLM's argument parser (shared research §1.4, §7)."""

from __future__ import annotations

import json

import pytest
from tests.collect.conftest import EXAMPLE

from vllm_medic.collect.launch import parse_launch
from vllm_medic.redact import MASK


def test_blog_quick_start_from_the_example_file():
    launch = parse_launch(str(EXAMPLE / "launch.txt"))
    assert launch.source == "file"
    assert launch.model == "moonshotai/Kimi-K3"
    assert launch.args["tensor_parallel_size"] == 8
    assert launch.args["enable_prefix_caching"] is True and launch.args["trust_remote_code"] is True
    assert launch.args["tool_call_parser"] == "kimi_k3" and launch.args["load_format"] == "fastsafetensors"
    assert launch.warnings == []


def test_short_aliases_eq_forms_negation_json_and_repeats():
    text = (
        "FOO=1 NCCL_DEBUG=INFO vllm serve moonshotai/Kimi-K3 -tp 8 -pp=2 -dp 2 -dpl 1 -ep "
        "--gpu-memory-utilization=0.95 --max-model-len 32k --kv-cache-dtype fp8 "
        "--no-enable-prefix-caching --all2all-backend deepep_v2 --moe-backend deep_gemm_mega_moe "
        '--speculative-config \'{"model":"RedHatAI/Kimi-K3-speculator.dspark", "num_speculative_tokens":8}\' '
        "--served-model-name k3 kimi --middleware a.B --middleware c.D"
    )
    launch = parse_launch(text)
    a = launch.args
    assert (a["tensor_parallel_size"], a["pipeline_parallel_size"], a["data_parallel_size"]) == (8, 2, 2)
    assert a["data_parallel_size_local"] == 1 and a["enable_expert_parallel"] is True
    assert a["gpu_memory_utilization"] == 0.95 and a["max_model_len"] == 32000
    assert a["enable_prefix_caching"] is False
    assert a["all2all_backend"] == "deepep_v2" and a["moe_backend"] == "deep_gemm_mega_moe"
    assert a["speculative_config"] == {
        "model": "RedHatAI/Kimi-K3-speculator.dspark",
        "num_speculative_tokens": 8,
    }
    assert a["served_model_name"] == ["k3", "kimi"] and a["middleware"] == ["a.B", "c.D"]
    assert launch.env == {"FOO": "1", "NCCL_DEBUG": "INFO"}
    assert a["kv_cache_dtype"] == "fp8"


def test_max_model_len_binary_suffix_and_auto():
    assert parse_launch("vllm serve m --max-model-len 1K").args["max_model_len"] == 1024
    assert parse_launch("vllm serve m --max-model-len auto").args["max_model_len"] == "auto"


def test_python_module_form_and_model_flag():
    launch = parse_launch(
        ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/k3", "--port", "8000"]
    )
    assert launch.model == "/models/k3" and launch.args["port"] == 8000 and launch.source == "argv"


def test_secrets_are_masked_in_args_argv_and_env():
    launch = parse_launch(
        "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz vllm serve m --api-key s3cr3t-value --hf-token hf_zyxwvutsrqponmlkjihgfedcba"
    )
    dumped = json.dumps(launch.__dict__)
    for secret in ("s3cr3t-value", "hf_abcdefghijklmnopqrstuvwxyz", "hf_zyxwvutsrqponmlkjihgfedcba"):
        assert secret not in dumped
    assert launch.args["api_key"] == [MASK] and launch.env["HF_TOKEN"] == MASK


def test_docker_run_reads_container_options_and_vllm_args():
    text = """docker run --rm -it --gpus all --ipc=host --shm-size 32g --network host \\
  -v ~/.cache/huggingface:/root/.cache/huggingface \\
  -e NCCL_DMABUF_ENABLE=0 -e UCX_TLS=rc,cuda_copy --env VLLM_USE_RUST_FRONTEND=1 \\
  vllm/vllm-openai:kimi-k3 moonshotai/Kimi-K3 --tensor-parallel-size 8 --enable-expert-parallel \\
  --all2all-backend deepep_v2 --trust-remote-code"""
    launch = parse_launch(text)
    assert launch.image == "vllm/vllm-openai:kimi-k3"
    assert launch.runtime_options["gpus"] == "all" and launch.runtime_options["ipc"] == "host"
    assert launch.runtime_options["shm_size"] == "32g" and launch.runtime_options["network"] == "host"
    assert launch.env == {"NCCL_DMABUF_ENABLE": "0", "UCX_TLS": "rc,cuda_copy", "VLLM_USE_RUST_FRONTEND": "1"}
    assert launch.model == "moonshotai/Kimi-K3" and launch.args["all2all_backend"] == "deepep_v2"


def test_docker_run_with_explicit_vllm_serve_command():
    launch = parse_launch("docker run --gpus '\"device=0,1\"' --entrypoint vllm img:1 serve m -tp 2")
    assert launch.image == "img:1" and launch.model == "m" and launch.args["tensor_parallel_size"] == 2


def test_shell_script_file_with_exports_and_continuations(tmp_path):
    script = tmp_path / "serve.sh"
    script.write_text(
        "#!/usr/bin/env bash\nset -euo pipefail\nexport VLLM_ENGINE_READY_TIMEOUT_S=3600\n"
        "MODEL=moonshotai/Kimi-K3\nTP=8\n"
        "# the serve command\n"
        "vllm serve ${MODEL} \\\n  --tensor-parallel-size $TP \\\n  --enable-prefix-caching  # cache on\n"
        "echo done\n"
    )
    launch = parse_launch(str(script))
    assert launch.source == "file" and launch.model == "moonshotai/Kimi-K3"
    assert launch.args["tensor_parallel_size"] == 8 and launch.args["enable_prefix_caching"] is True
    assert launch.env["VLLM_ENGINE_READY_TIMEOUT_S"] == "3600"


def test_docker_inspect_json(tmp_path):
    inspect = [
        {
            "Path": "vllm",
            "Args": ["serve", "moonshotai/Kimi-K3", "-tp", "8", "--api-key", "sekret"],
            "Config": {
                "Image": "vllm/vllm-openai:kimi-k3",
                "Entrypoint": ["vllm", "serve"],
                "Cmd": ["moonshotai/Kimi-K3", "-tp", "8", "--api-key", "sekret"],
                "Env": ["NCCL_DMABUF_ENABLE=0", "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz"],
            },
            "HostConfig": {
                "ShmSize": 17179869184,
                "IpcMode": "host",
                "Runtime": "nvidia",
                "DeviceRequests": [{"Driver": "", "Count": -1, "DeviceIDs": None, "Capabilities": [["gpu"]]}],
            },
        }
    ]
    f = tmp_path / "inspect.json"
    f.write_text(json.dumps(inspect))
    launch = parse_launch(str(f))
    assert launch.image == "vllm/vllm-openai:kimi-k3" and launch.model == "moonshotai/Kimi-K3"
    assert launch.args["tensor_parallel_size"] == 8 and launch.args["api_key"] == [MASK]
    assert launch.runtime_options == {
        "shm_size": 17179869184,
        "ipc": "host",
        "runtime": "nvidia",
        "gpus": "all",
    }
    assert launch.env["NCCL_DMABUF_ENABLE"] == "0" and launch.env["HF_TOKEN"] == MASK
    assert "sekret" not in json.dumps(launch.__dict__)


MANIFEST = """\
# Source: vllm/templates/deployment.yaml  (helm template output)
apiVersion: v1
kind: Service
metadata: {name: vllm}
spec: {ports: [{port: 8000}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm}
spec:
  template:
    spec:
      containers:
      - name: sidecar
        image: busybox
        command: ["sleep", "infinity"]
      - name: vllm
        image: vllm/vllm-openai:kimi-k3
        command: ["/bin/sh", "-c"]
        args:
        - |
          vllm serve $(MODEL_ID) --tensor-parallel-size $(TP) \\
            --enable-prefix-caching --max-model-len 32768
        env:
        - {name: MODEL_ID, value: moonshotai/Kimi-K3}
        - {name: TP, value: "8"}
        - name: HF_TOKEN
          valueFrom: {secretKeyRef: {name: hf, key: token}}
        resources:
          limits: {nvidia.com/gpu: 8}
"""


def test_kubernetes_multi_document_manifest_with_sh_c_and_var_refs():
    launch = parse_launch(MANIFEST)
    assert launch.image == "vllm/vllm-openai:kimi-k3"
    assert launch.model == "moonshotai/Kimi-K3"
    assert launch.args["tensor_parallel_size"] == 8 and launch.args["max_model_len"] == 32768
    assert launch.runtime_options["gpus"] == "8"
    assert launch.env["HF_TOKEN"] == MASK


def test_kubernetes_args_only_use_the_image_entrypoint():
    doc = """apiVersion: v1
kind: Pod
spec:
  containers:
  - name: vllm
    image: vllm/vllm-openai:v0.27.1
    args: ["--model", "$(M)", "-tp", "4", "--no-enable-prefix-caching"]
"""
    launch = parse_launch(doc)
    assert launch.args["tensor_parallel_size"] == 4 and launch.args["enable_prefix_caching"] is False
    assert launch.args["model"] == "$(M)" and any("$(M)" in w for w in launch.warnings)


@pytest.mark.parametrize(
    "text,warning",
    [
        ("", "empty"),
        ("echo hello", "no vLLM command"),
        ("apiVersion: v1\nkind: Pod\nspec:\n  containers: [\n", "not valid YAML"),
        ('{"not": "an inspect"}', "neither"),
        ("vllm serve 'unbalanced", None),
    ],
)
def test_bad_launches_are_warnings_not_crashes(text, warning):
    launch = parse_launch(text)
    if warning:
        assert any(warning in w for w in launch.warnings)


def test_missing_launch_file_is_read_as_text_not_an_error(tmp_path):
    launch = parse_launch(str(tmp_path / "does-not-exist.sh"))
    assert launch.args == {} and launch.warnings


def test_json_argument_spanning_lines_in_a_script():
    text = (
        "vllm serve moonshotai/Kimi-K3 -tp 8 \\\n"
        "  --speculative-config '{\n"
        '    "model": "RedHatAI/Kimi-K3-speculator.dspark",\n'
        '    "num_speculative_tokens": 8, "method": "dspark"\n'
        "  }' \\\n"
        "  --enable-prefix-caching\n"
    )
    launch = parse_launch(text)
    assert launch.args["speculative_config"]["method"] == "dspark"
    assert launch.args["enable_prefix_caching"] is True and launch.warnings == []


def test_config_file_arguments_are_read_and_the_command_line_wins(tmp_path):
    (tmp_path / "k3.yaml").write_text(  # SYNTHETIC vLLM --config file
        "tensor-parallel-size: 4\nenable_prefix_caching: true\nmax-model-len: 32k\ngpu-memory-utilization: 0.9\n"
    )
    script = tmp_path / "serve.sh"
    script.write_text("vllm serve moonshotai/Kimi-K3 --config k3.yaml -tp 8\n")
    launch = parse_launch(str(script))
    assert launch.args["tensor_parallel_size"] == 8  # command line over config
    assert launch.args["enable_prefix_caching"] is True and launch.args["max_model_len"] == 32000
    assert launch.args["gpu_memory_utilization"] == 0.9


def test_config_file_not_present_is_a_warning(tmp_path):
    launch = parse_launch(f"vllm serve m --config {tmp_path / 'absent.yaml'}")
    assert any("not read" in w for w in launch.warnings)


def test_docker_env_passthrough_is_a_warning_not_a_value(monkeypatch):
    monkeypatch.setenv("UCX_TLS", "tcp")  # the collector's own value must not leak into the launch
    launch = parse_launch("docker run -e UCX_TLS --gpus all vllm/vllm-openai:kimi-k3 m")
    assert "UCX_TLS" not in launch.env and any("UCX_TLS" in w for w in launch.warnings)


COMPOSE = """\
services:
  vllm:
    image: vllm/vllm-openai:kimi-k3
    ipc: host
    shm_size: 16gb
    environment:
      - NCCL_DMABUF_ENABLE=0
      - HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz
    command: >
      moonshotai/Kimi-K3 --tensor-parallel-size 8 --trust-remote-code
      --enable-prefix-caching --api-key sekrit-value
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: all
              capabilities: [gpu]
  ui:
    image: ghcr.io/open-webui/open-webui:main
"""  # SYNTHETIC docker-compose file


def test_docker_compose_service():
    launch = parse_launch(COMPOSE)
    assert launch.image == "vllm/vllm-openai:kimi-k3" and launch.model == "moonshotai/Kimi-K3"
    assert launch.args["tensor_parallel_size"] == 8 and launch.args["enable_prefix_caching"] is True
    assert launch.runtime_options == {"ipc": "host", "shm_size": "16gb", "gpus": "all"}
    assert launch.env["NCCL_DMABUF_ENABLE"] == "0" and launch.env["HF_TOKEN"] == MASK
    assert "sekrit-value" not in json.dumps(launch.__dict__)


def test_real_k8s_deployment_from_the_vllm_docs():
    from tests.collect.conftest import DATA

    launch = parse_launch(str(DATA / "launch/k8s-mistral-7b-nvidia-deployment-vllm-docs.yaml"))
    assert launch.image == "vllm/vllm-openai:latest" and launch.model == "mistralai/Mistral-7B-Instruct-v0.3"
    assert launch.args["max_num_batched_tokens"] == 1024  # underscore spelling of the flag
    assert launch.args["enable_chunked_prefill"] is True and launch.args["trust_remote_code"] is True
    assert launch.runtime_options == {"gpus": "1", "shm_size": "2Gi"}
    assert launch.env["HUGGING_FACE_HUB_TOKEN"] == MASK


def test_real_amd_deployment_reads_amd_gpus():
    from tests.collect.conftest import DATA

    launch = parse_launch(str(DATA / "launch/k8s-mistral-7b-amd-rocm-hostipc-deployment-vllm-docs.yaml"))
    assert launch.image.startswith("rocm/vllm:") and launch.args["port"] == 8000
    assert launch.runtime_options == {"gpus": "1", "ipc": "host", "network": "host", "shm_size": "8Gi"}


def test_unresolved_variables_are_named():
    launch = parse_launch("vllm serve $MODEL -tp ${TP}")
    assert launch.args["tensor_parallel_size"] == "${TP}"
    assert any("--tensor-parallel-size ${TP}" in w for w in launch.warnings)
