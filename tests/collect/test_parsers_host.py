"""Topology, RDMA, links, modules, docker, vLLM/Python parsers on real captured outputs."""

from __future__ import annotations

import pytest
from tests.collect.conftest import sample

from vllm_medic.collect.parsers.docker import parse_image_inspect, parse_images_digests
from vllm_medic.collect.parsers.network import parse_ibdev2netdev, parse_ip_link
from vllm_medic.collect.parsers.python_env import parse_collect_env, parse_pip_freeze, parse_vllm_version
from vllm_medic.collect.parsers.system import (
    parse_container,
    parse_env,
    parse_lsmod,
    parse_proc_driver_version,
)
from vllm_medic.collect.parsers.topology import parse_topology
from vllm_medic.redact import MASK

# ---------------------------------------------------------------- topo -m


def test_topology_hgx_12_nics_tabs_with_legend():
    r = parse_topology(sample("nvidia-smi-topo-m/hgx-8gpu-nv18-12nic-pix-single-numa-aihub0007.txt"))
    t = r.topology
    assert t.devices[:8] == [f"GPU{i}" for i in range(8)] and len(t.devices) == 20
    assert t.matrix["GPU0"]["GPU1"] == "NV18" and t.matrix["GPU0"]["GPU0"] == "X"
    pix = {
        g: [n for n, link in t.matrix[g].items() if n.startswith("NIC") and link == "PIX"]
        for g in t.devices[:8]
    }
    assert pix == {
        "GPU0": ["NIC0"],
        "GPU1": ["NIC1"],
        "GPU2": ["NIC2"],
        "GPU3": ["NIC5"],
        "GPU4": ["NIC6"],
        "GPU5": ["NIC7"],
        "GPU6": ["NIC8"],
        "GPU7": ["NIC11"],
    }
    assert t.matrix["NIC3"]["NIC4"] == "PIX"
    assert t.cpu_affinity["GPU0"] == "0-191" and t.numa_affinity["GPU7"] == "0"
    assert t.nic_legend["NIC11"] == "mlx5_11"
    assert r.problems == []


def test_topology_empty_cpu_affinity_cells_slurm():
    t = parse_topology(
        sample("nvidia-smi-topo-m/h100-8gpu-6nic-empty-cpu-affinity-slurm-cgroup-della.txt")
    ).topology
    assert "GPU0" not in t.cpu_affinity and t.cpu_affinity["GPU4"] == "1"
    assert t.numa_affinity["GPU0"] == "0" and t.numa_affinity["GPU4"] == "1"
    assert [n for n, link in t.matrix["GPU0"].items() if link == "PIX"] == ["NIC0", "NIC1"]
    assert not any(link == "PIX" for n, link in t.matrix["GPU1"].items() if n.startswith("NIC"))


def test_topology_numa_ranges_spaces_gb200():
    r = parse_topology(sample("nvidia-smi-topo-m/gb200-4gpu-nv18-8nic-mlx5-numa-ranges-openshift.txt"))
    t = r.topology
    assert t.numa_affinity == {"GPU0": "0,2-17", "GPU1": "0,2-17", "GPU2": "1,18-33", "GPU3": "1,18-33"}
    assert t.cpu_affinity["GPU2"] == "72-143"
    assert {t.matrix["GPU0"][f"NIC{i}"] for i in range(8)} == {"SYS"}
    assert t.matrix["NIC6"]["NIC7"] == "PIX"


def test_topology_collapsed_spaces_no_nics():
    t = parse_topology(sample("nvidia-smi-topo-m/a100-8gpu-nv12-stas00.txt")).topology
    assert len(t.devices) == 8 and t.matrix["GPU3"]["GPU5"] == "NV12"
    assert t.cpu_affinity["GPU4"] == "24-47" and t.nic_legend == {}


def test_topology_old_mlx5_column_name():
    t = parse_topology(
        sample("nvidia-smi-topo-m/a100-8gpu-nv1-nv2-mlx5_0-column-no-legend-azure-rapids-deployment.txt")
    ).topology
    assert t.devices[-1] == "mlx5_0" and t.matrix["GPU0"]["mlx5_0"] == "NODE"
    assert t.matrix["GPU0"]["GPU2"] == "NV1" and t.matrix["GPU0"]["GPU1"] == "NV2"


def test_topology_garbage():
    r = parse_topology("nvidia-smi: command not found\n")
    assert r.topology.matrix == {} and r.problems


# ---------------------------------------------------------------- RDMA, links


def test_ibdev2netdev_bonds_and_down_ports():
    r = parse_ibdev2netdev(sample("ibdev2netdev/hgx-12hca-roce-ens-naming-bond0-aihub0009.txt"))
    assert len(r.ports) == 12
    down = sorted(p.ib_dev for p in r.ports if p.state == "Down")
    assert down == ["mlx5_2", "mlx5_8"]
    assert {p.ib_dev for p in r.ports if p.netdev == "bond0"} == {"mlx5_1", "mlx5_7"}
    assert all(p.port == 1 for p in r.ports)


def test_ip_brief_pointopoint_without_mac_and_veth_suffix():
    r = parse_ip_link(sample("ip-link/ip-br-link-tun-wg-no-mac-veth-at-ifN-docker.txt"))
    names = [link.name for link in r.links]
    assert "veth0fbd50e" in names and "wg0" in names and len(names) == 8
    wg = next(link for link in r.links if link.name == "wg0")
    assert wg.state == "UNKNOWN" and "POINTOPOINT" in wg.flags


def test_ip_addr_infiniband_link_down():
    r = parse_ip_link(sample("ip-link/ip-addr-show-azure-ndv4-ipoib-down-rapids-deployment.txt"))
    ib = next(link for link in r.links if link.kind == "infiniband")
    assert (ib.name, ib.state, ib.mtu) == ("ibP59423s2", "DOWN", 4092)
    assert len(r.links) == 5


def test_ip_link_full_and_brief_from_the_build_vm_agree():
    full = parse_ip_link(sample("ip-link/ip-link-full-ifb-eth0-build-vm.txt")).links
    brief = parse_ip_link(sample("ip-link/ip-br-link-build-vm.txt")).links
    assert [(x.name, x.state) for x in full] == [(x.name, x.state) for x in brief]


# ---------------------------------------------------------------- modules, /proc


def test_lsmod_grep_nvidia_without_peermem():
    r = parse_lsmod(sample("lsmod/lsmod-grep-nvidia-rhel8-no-uvm-no-peermem-data-science-stack-90.txt"))
    assert r.modules == ["nvidia_drm", "nvidia_modeset", "nvidia", "drm_kms_helper", "drm"]
    assert "nvidia_peermem" not in r.modules and r.problems == []


def test_lsmod_empty_greps_mean_not_loaded_not_unparsable():
    r = parse_lsmod(sample("lsmod/lsmod-grep-nvidia_peermem-and-nv_peer_mem-both-empty-not-loaded.txt"))
    assert r.modules == [] and r.problems == []


def test_proc_driver_version_from_a_transcript():
    r = parse_proc_driver_version(
        sample("nvidia-smi-errors/nvml-version-mismatch-580.178-plus-proc-driver-version.txt")
    )
    assert r.kernel_module_version == "580.173.02" and r.open_kernel_module is False


# ---------------------------------------------------------------- docker


def test_image_inspect_local_build_has_no_digest():
    r = parse_image_inspect(sample("docker-image-inspect/local-build-empty-repodigests-samples-docker.json"))
    assert r.image.tag == "samples-docker/1.1.dockerfile_hello:v1.0"
    assert r.image.digest is None and r.image.repo_digests == []
    assert r.problems == []


def test_image_inspect_truncated_paste_salvages_tag_and_digest():
    r = parse_image_inspect(
        sample("docker-image-inspect/vllm-openai-latest-2024-10-TRUNCATED-vllm-10156.json")
    )
    assert r.image.tag == "vllm/vllm-openai:latest"
    assert r.image.digest == "sha256:facbbd4a92c1754675b239a5f22a281ed3aa8bde64662db8919d85d670673aa7"
    assert r.image.id.startswith("sha256:9de570df")
    assert "salvaged" in r.problems[0]


def test_image_inspect_cuda_from_env_and_secret_env_masked():
    text = (
        '[{"Id": "sha256:1", "RepoTags": ["vllm/vllm-openai:kimi-k3"], "RepoDigests": '
        '["vllm/vllm-openai@sha256:abc"], "Config": {"Env": ["CUDA_VERSION=13.0.1", "HF_TOKEN=hf_abcdefghijklmnopqrstuvwx"], '
        '"Entrypoint": ["vllm", "serve"], "Labels": null}}]'
    )  # SYNTHETIC, shaped like docker image inspect
    r = parse_image_inspect(text, requested="vllm/vllm-openai:kimi-k3")
    assert (r.image.cuda_version, r.image.digest, r.image.entrypoint) == (
        "13.0.1",
        "sha256:abc",
        ["vllm", "serve"],
    )
    assert r.image.env["HF_TOKEN"] == MASK


def test_image_inspect_empty_list_means_image_absent():
    whole = parse_image_inspect("[]\n")
    assert whole.absent and not whole.partial
    # the same `[]` printed by a jq filter is an empty field of a present image
    filtered = parse_image_inspect("[]\n", commands=["docker image inspect x | jq '.[0].RepoDigests'"])
    assert not filtered.absent and "not a missing image" in filtered.partial[0]


def test_images_digests_table():
    text = (  # SYNTHETIC, the `docker images --digests` column layout
        "REPOSITORY         TAG        DIGEST                                                                    IMAGE ID       CREATED       SIZE\n"
        "vllm/vllm-openai   kimi-k3    sha256:1111111111111111111111111111111111111111111111111111111111111111   0123456789ab   2 weeks ago   21.3GB\n"
        "my/local           dev        <none>                                                                    ba9876543210   3 days ago    1.2GB\n"
    )
    rows = parse_images_digests(text).rows
    assert rows[0]["tag"] == "kimi-k3" and rows[0]["digest"].startswith("sha256:1111")
    assert rows[1]["digest"] == "<none>"


# ---------------------------------------------------------------- vLLM and Python


@pytest.mark.parametrize(
    "text,version,variant,sha",
    [
        (None, "0.23.0", "cu129", None),
        ("0.27.1\n", "0.27.1", None, None),
        (
            "INFO 07-27 10:00:00 [__init__.py:216] Automatically detected platform cuda.\n0.11.1.dev12+g5ded9e9aa\n",
            "0.11.1.dev12",
            None,
            "5ded9e9aa",
        ),
    ],
)
def test_vllm_version(text, version, variant, sha):
    r = parse_vllm_version(
        text if text is not None else sample("vllm-version/local-version-suffix-0.23.0+cu129.txt")
    )
    assert (r.vllm.version, r.vllm.variant, r.vllm.git_sha) == (version, variant, sha)


def test_vllm_version_error_output_is_unparsable():
    r = parse_vllm_version(
        "Traceback (most recent call last):\nModuleNotFoundError: No module named 'vllm'\n"
    )
    assert r.vllm.version is None and r.problems


def test_pip_freeze_mixed_cuda_userspace_and_torch_build():
    text = (  # SYNTHETIC freeze built from real package names/versions seen in the collect-env sample
        "torch==2.8.0+cu128\nnvidia-cublas-cu12==12.8.4.1\nnvidia-nccl-cu12==2.27.3\n"
        "nvidia-cuda-runtime==13.0.96\nnvidia-cublas==13.1.0.3\nvllm @ file:///wheels/vllm-0.27.1-cp38-abi3-linux_x86_64.whl\n"
        "Flash_Attn==2.8.3\n-e git+https://github.com/x/y.git@abc#egg=y\n"
    )
    py = parse_pip_freeze(text).python
    assert py.torch.version == "2.8.0+cu128" and py.torch.cuda == "12.8"
    assert sorted(py.cuda_userspace) == ["12", "13"]
    assert "nvidia-cuda-runtime==13.0.96" in py.cuda_userspace["13"]
    assert py.nccl_version == "2.27.3"
    assert py.packages["flash-attn"] == "2.8.3" and py.packages["vllm"].startswith("@")


def test_collect_env_sectioned_a30():
    r = parse_collect_env(
        sample("vllm-collect-env/vllm-0.11.1.dev-4x-a30-nv4-nic0-driver535.274.02-docker.txt")
    )
    assert r.sectioned
    assert (r.vllm.version, r.vllm.git_sha) == ("0.11.1.dev12", "5ded9e9aa")
    assert r.driver_version == "535.274.02"
    assert r.gpu_models == [f"GPU {i}: NVIDIA A30" for i in range(4)]
    assert (r.python.torch.version, r.python.torch.cuda) == ("2.8.0+cu128", "12.8")
    assert r.python.nccl_version == "2.27.3" and list(r.python.cuda_userspace) == ["12"]
    assert r.env["NCCL_VERSION"] == "2.25.1-1" and r.env["CUDA_VERSION"] == "12.8.1"
    t = r.topology.topology
    assert t.matrix["GPU0"]["GPU1"] == "NV4" and t.matrix["GPU3"]["NIC0"] == "PIX"
    assert t.nic_legend == {"NIC0": "mlx5_0"}


@pytest.mark.parametrize(
    "rel,driver,gpus,torch_cuda",
    [
        (
            "vllm-collect-env/flat-format-4x-a10-driver470-torch2.4.0-cu121-vllm-7943-EXCERPT.txt",
            "470.129.06",
            ["GPU 0: NVIDIA A10", "GPU 1: NVIDIA A10", "GPU 2: NVIDIA A10", "GPU 3: NVIDIA A10"],
            "12.1",
        ),
        (
            "vllm-collect-env/flat-format-l40s-pod-vllm-openai-latest-4462-EXCERPT.txt",
            "550.54.14",
            ["GPU 0: NVIDIA L40S"],
            "12.1",
        ),
    ],
)
def test_collect_env_flat(rel, driver, gpus, torch_cuda):
    r = parse_collect_env(sample(rel))
    assert not r.sectioned
    assert r.driver_version == driver and r.gpu_models == gpus and r.python.torch.cuda == torch_cuda


# ---------------------------------------------------------------- env and container


def test_env_keeps_relevant_names_and_masks_secrets():
    text = (  # SYNTHETIC env dump with fake secrets
        "export NCCL_SOCKET_IFNAME=bond0\nUCX_TLS=rc,cuda_copy\nHF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz\n"
        "VLLM_API_KEY=abc123\nGLOO_SOCKET_IFNAME=eth0\nHOME=/root\nPATH=/usr/bin\nSOME_PASSWORD=x\n"
        "TP_SOCKET_IFNAME=eth0\nCUDA_VISIBLE_DEVICES=0,1\nLD_LIBRARY_PATH=/usr/local/cuda/lib64\n"
    )
    env = parse_env(text)
    assert env["NCCL_SOCKET_IFNAME"] == "bond0" and env["UCX_TLS"] == "rc,cuda_copy"
    assert env["HF_TOKEN"] == MASK and env["VLLM_API_KEY"] == MASK
    assert "HOME" not in env and "PATH" not in env and "SOME_PASSWORD" not in env
    assert env["TP_SOCKET_IFNAME"] == "eth0" and env["CUDA_VISIBLE_DEVICES"] == "0,1"


@pytest.mark.parametrize(
    "text,inside,runtime",
    [
        (
            "/.dockerenv: present\n/run/.containerenv: absent\nKUBERNETES_SERVICE_HOST: absent\ncgroup: 0::/\n",
            True,
            "docker",
        ),
        (
            "/.dockerenv: absent\n/run/.containerenv: absent\nKUBERNETES_SERVICE_HOST: 10.96.0.1\n"
            "cgroup: 0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-abc.scope\n",
            True,
            "kubernetes",
        ),
        ("/.dockerenv: absent\n/run/.containerenv: present\ncontainer: podman\n", True, "podman"),
        (
            "/.dockerenv: absent\n/run/.containerenv: absent\nKUBERNETES_SERVICE_HOST: absent\ncontainer: absent\ncgroup: 0::/init.scope\n",
            False,
            "none",
        ),
    ],
)
def test_container_detection(text, inside, runtime):
    c = parse_container(text)
    assert (c.in_container, c.runtime) == (inside, runtime)


def test_torch_from_pypi_without_local_tag_takes_cuda_from_its_runtime_wheel():
    py = parse_pip_freeze("torch==2.8.0\nnvidia-cuda-runtime-cu12==12.8.90\n").python  # SYNTHETIC
    assert py.torch.version == "2.8.0" and py.torch.cuda == "12.8"
