"""driver_cuda: is there a working driver, and is it new enough for the CUDA the image and wheels need?"""

from __future__ import annotations

from vllm_medic.checks.facts import Facts
from vllm_medic.checks.registry import Rule, rule
from vllm_medic.model import Finding
from vllm_medic.recipes.cuda import family_floor, forward_compat, minor_compat_limitation, native_requirement
from vllm_medic.recipes.model import Recipe
from vllm_medic.recipes.versions import major_minor, parse_version, version_lt

CUDA_COMPAT_DOCS = "https://docs.nvidia.com/deploy/cuda-compatibility/index.html"
RELEASE_NOTES = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"


def _driver_version(facts: Facts) -> tuple[str | None, str]:
    d = facts.snapshot.driver
    if d.version:
        return d.version, f"{facts.where('nvidia-smi', 'Driver Version')} Driver Version: {d.version}"
    if d.kernel_module_version:
        return (
            d.kernel_module_version,
            f"/proc/driver/nvidia/version: kernel module {d.kernel_module_version}",
        )
    return None, facts.missing("nvidia-smi") or "driver version not collected"


@rule(
    "DRV001",
    "driver_cuda",
    "NVIDIA driver answers (nvidia-smi)",
    "Nothing else can work until nvidia-smi talks to a loaded driver: no driver, a user-space/kernel "
    "version mismatch after an upgrade, or a hung GPU all stop vLLM before it loads a weight.",
    [
        "Run `nvidia-smi`; if it is missing, install the NVIDIA driver (or start the container with "
        "`--gpus all` / the NVIDIA Container Toolkit).",
        "On 'Driver/library version mismatch': stop GPU processes and reload the modules "
        "(`sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia`), or reboot.",
        "If nvidia-smi hangs: `sudo dmesg -T | grep -i xid`; drain the node and reset the GPU or reboot.",
    ],
    ["https://docs.nvidia.com/deploy/xid-errors/index.html"],
    by_hand="`nvidia-smi; echo $?` on the node",
)
def driver_answers(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    d = facts.snapshot.driver
    if facts.family() == "amd" and not d.version:
        return [
            r.finding(
                "info",
                f"AMD hardware ({facts.hardware()}): NVIDIA driver checks do not apply",
                [f"hardware {facts.hardware()} (--hardware or GPU names)"],
                [
                    "Check the ROCm stack by hand: `amd-smi version` / `rocm-smi` and `dmesg | grep -i amdgpu`."
                ],
            )
        ]
    err = facts.snapshot.error_for("nvidia-smi")
    detail = d.status_detail or (err.message if err else "")
    ev = [f"nvidia-smi status: {d.status}"] + ([detail] if detail else [])
    if d.status == "ok" or (d.version and d.status in ("unknown", "")):
        cuda = f", CUDA Version {d.cuda_version}" if d.cuda_version else ""
        return [
            r.finding(
                "pass",
                f"NVIDIA driver {d.version} loaded{cuda}",
                [f"{facts.where('nvidia-smi', 'Driver Version')} Driver Version: {d.version}{cuda}"],
            )
        ]
    if d.status == "not_found" or (err is not None and err.kind == "missing"):
        return [
            r.finding(
                "fail",
                "No NVIDIA driver here: nvidia-smi not found",
                ev,
                [
                    "Check the machine has NVIDIA GPUs: `lspci | grep -i nvidia`.",
                    "Install the NVIDIA data-center driver for this kernel (r580+ for CUDA 13 images).",
                    "In a container: run it with `--gpus all` (NVIDIA Container Toolkit) so nvidia-smi and "
                    "the driver libraries are mounted in.",
                ],
            )
        ]
    if d.status == "no_driver":
        return [
            r.finding(
                "fail",
                "nvidia-smi cannot communicate with the NVIDIA driver",
                ev,
                [
                    "Check the kernel module: `lsmod | grep nvidia` and `sudo dmesg -T | grep -i nvrm`.",
                    "After a kernel update, rebuild the module for the running kernel (`dkms status`; "
                    "reinstall the driver package) and check Secure Boot is not blocking it.",
                    "Reboot the node once the module matches the kernel.",
                ],
            )
        ]
    if d.status == "version_mismatch":
        lib = d.nvml_library_version or "?"
        kmod = d.kernel_module_version or "?"
        return [
            r.finding(
                "fail",
                "Driver/library version mismatch: user-space and kernel module differ",
                ev + [f"NVML library version {lib}; kernel module {kmod}"],
                [
                    "If no process uses the GPUs: reload the modules "
                    "(`sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia`).",
                    "Otherwise (or if rmmod says 'in use'): drain the node and reboot.",
                    "Pin the driver packages (apt-mark hold) so unattended upgrades do not repeat this.",
                ],
            )
        ]
    if d.status == "hung" or (err is not None and err.kind == "timeout"):
        return [
            r.finding(
                "fail",
                "nvidia-smi did not answer: GPU or driver hung",
                ev,
                [
                    "Look for Xid errors: `sudo dmesg -T | grep -i xid` (Xid 79 = GPU fallen off the bus; "
                    "48/63/64/74/94/95 = memory/NVLink errors).",
                    "Check the PCI device is still there: `lspci -d 10de: -vv | grep -i 'rev ff'`.",
                    "Drain the node; reset the GPU (`nvidia-smi -r -i N`) or reboot; replace hardware on "
                    "repeated Xid 79.",
                ],
            )
        ]
    if err is not None:
        return [
            r.finding(
                "fail" if d.status == "error" else "info",
                f"nvidia-smi failed ({err.kind})",
                ev + ([f"exit code {err.exit_code}"] if err.exit_code is not None else []),
            )
        ]
    return [
        r.finding(
            "info",
            "Could not check the driver: nvidia-smi output not collected",
            ev,
            ["Capture `nvidia-smi > nvidia-smi.txt` on the node and re-run with `--from DIR`."],
        )
    ]


def _image_cuda(facts: Facts, recipe: Recipe) -> tuple[str | None, str]:
    img = facts.snapshot.image
    if img.cuda_version:
        where = facts.where("docker-image-inspect", "CUDA_VERSION")
        return img.cuda_version, f"{where} image {img.tag or '?'} CUDA_VERSION={img.cuda_version}"
    tag = img.tag or facts.snapshot.launch.image
    for spec in recipe.images:
        if spec.cuda and tag == spec.tag:
            return spec.cuda, f"launch image {spec.tag} is CUDA {spec.cuda} ({spec.source})"
    torch = facts.snapshot.python.torch
    if tag is None and torch.cuda:
        return (
            torch.cuda,
            f"no image: the Python environment's torch {torch.version or '?'} is built with CUDA {torch.cuda}",
        )
    for spec in recipe.images:
        if spec.cuda and tag is None:
            return (
                spec.cuda,
                f"no image inspected; assuming the recipe image {spec.tag} (CUDA {spec.cuda}; {spec.source})",
            )
    return None, "image CUDA version unknown (no docker image inspect, no recipe image)"


@rule(
    "DRV002",
    "driver_cuda",
    "Host driver supports the image's CUDA and the recipe's driver floor",
    "Each CUDA runtime needs a minimum driver (NVIDIA's table). A CUDA 13 image on an r575 driver fails "
    "at the first CUDA call ('CUDA driver version is insufficient for CUDA runtime version').",
    [
        "Upgrade the host driver to at least the version the image's CUDA needs.",
        "Or, on data-center GPUs, add the CUDA forward-compatibility package (cuda-compat) for that CUDA.",
        "Or use an image built for a CUDA the driver already supports (nvidia-smi 'CUDA Version').",
    ],
    [RELEASE_NOTES, CUDA_COMPAT_DOCS],
    by_hand="compare `nvidia-smi` 'Driver Version' with NVIDIA's CUDA->driver table for the image's CUDA_VERSION (`docker image inspect IMAGE | grep CUDA_VERSION`)",
)
def driver_vs_cuda(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    drv, drv_ev = _driver_version(facts)
    if facts.family() == "amd" and drv is None:
        return [
            r.finding(
                "pass",
                "AMD hardware: no NVIDIA driver/CUDA pairing to check",
                [f"hardware {facts.hardware()}"],
            )
        ]
    cuda, cuda_ev = _image_cuda(facts, recipe)
    floor = recipe.driver
    if drv is None:
        return [
            r.finding(
                "info",
                "Could not compare driver and CUDA: driver version unknown",
                [drv_ev, cuda_ev],
                ["Fix DRV001 first, or capture `nvidia-smi` output into the bundle."],
            )
        ]
    ev = [drv_ev, cuda_ev]
    if floor is not None and version_lt(drv, floor.min_version):
        ev.append(
            f"recipe {recipe.name} needs driver {floor.branch}+ >= {floor.min_version} ({floor.source})"
        )
        fix = list(floor.compliant_paths) or list(r.fix)
        if floor.paths_source:
            ev.append(f"compliant paths: {floor.paths_source}")
        return [
            r.finding(
                "fail",
                f"Driver {drv} is below the recipe's floor {floor.min_version} ({floor.branch})",
                ev,
                fix,
            )
        ]
    if cuda is None:
        sev = "pass" if floor is not None else "info"
        title = (
            f"Driver {drv} meets the recipe floor {floor.min_version}; image CUDA unknown"
            if floor
            else "Could not compare driver and image CUDA: image CUDA unknown"
        )
        return [
            r.finding(sev, title, ev, ["Bundle `docker image inspect IMAGE` (or pass --image to collect)."])
        ]
    native, fam = native_requirement(cuda), family_floor(cuda)
    if native is None and fam is None:
        return [r.finding("info", f"CUDA {cuda} is not in the shipped driver table", ev)]
    need = native or fam
    assert need is not None
    ev.append(f"CUDA {need.cuda} needs driver >= {need.min_driver} ({need.release}; {need.source})")
    fc = forward_compat()
    generic_fix = [
        f"Upgrade the host driver to >= {need.min_driver} (CUDA {need.cuda}).",
        f"Or, on data-center GPUs, install the forward-compatibility package {fc['package']} in the image "
        f"({fc['source']}).",
        f"Or use an image built for CUDA <= {facts.snapshot.driver.cuda_version or 'the driver CUDA Version'}.",
    ]
    if fam is not None and version_lt(drv, fam.min_driver):
        ev.append(f"below even the CUDA {fam.cuda} minor-version-compatibility floor {fam.min_driver}")
        return [r.finding("fail", f"Driver {drv} is too old for the image's CUDA {cuda}", ev, generic_fix)]
    if native is not None and version_lt(drv, native.min_driver):
        ev.append(f"{fam.cuda if fam else ''} minor-version compatibility: {minor_compat_limitation()}")
        return [
            r.finding(
                "warn",
                f"Driver {drv} runs CUDA {cuda} only under minor-version compatibility",
                ev,
                generic_fix[:1] + ["Or accept the limitations after a smoke test of the exact image."],
            )
        ]
    return [r.finding("pass", f"Driver {drv} supports CUDA {cuda}", ev)]


def _toolkit_version(facts: Facts) -> tuple[str | None, str]:
    extra = facts.snapshot.extra
    for key in ("nvcc_version", "cuda_toolkit_version", "cuda_runtime_version"):
        v = extra.get(key)
        if isinstance(v, str) and parse_version(v):
            return v, f"{key}: {v}"
    v, where = facts.env("CUDA_VERSION")
    if v and parse_version(v):
        return v, where
    return None, "no local CUDA toolkit version collected (nvcc, CUDA_VERSION)"


@rule(
    "DRV003",
    "driver_cuda",
    "The local CUDA toolkit is not the driver",
    "`nvcc --version` or CUDA_VERSION report the toolkit installed on disk; the CUDA a machine can run is "
    "capped by the driver (nvidia-smi 'CUDA Version'). Installing toolkit 13 does not upgrade an r575 driver.",
    [
        "Read the driver's limit from `nvidia-smi` ('CUDA Version'), not from nvcc.",
        "Upgrade the driver if the runtime you need is newer than that limit.",
    ],
    [CUDA_COMPAT_DOCS],
    by_hand="`nvcc --version` vs `nvidia-smi` 'CUDA Version'",
)
def toolkit_not_driver(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    tk, tk_ev = _toolkit_version(facts)
    drv_cuda = facts.snapshot.driver.cuda_version
    if tk is None or drv_cuda is None:
        return [
            r.finding(
                "info",
                "Toolkit vs driver not compared (one side not collected)",
                [tk_ev, f"driver CUDA Version: {drv_cuda or 'unknown'}"],
                ["Compare `nvcc --version` with `nvidia-smi` 'CUDA Version' by hand if a build fails."],
            )
        ]
    ev = [tk_ev, f"{facts.where('nvidia-smi', 'CUDA Version')} driver supports up to CUDA {drv_cuda}"]
    if version_lt(drv_cuda, major_minor(tk)):
        return [r.finding("warn", f"Toolkit CUDA {tk} is newer than the driver's CUDA {drv_cuda}", ev)]
    return [r.finding("pass", f"Toolkit CUDA {major_minor(tk)} within the driver's CUDA {drv_cuda}", ev)]


def _lib_name(spec: str) -> str:
    name = spec.split("==")[0].lower()
    for suffix in ("-cu12", "-cu13", "_cu12", "_cu13"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


@rule(
    "DRV004",
    "driver_cuda",
    "One CUDA major among the Python environment's NVIDIA wheels",
    "nvidia-*-cu12 and nvidia-*-cu13 wheels in one environment mean two CUDA user-space stacks; whichever "
    "loads first wins, and the other side fails with undefined symbols or 'no kernel image'.",
    [
        "Reinstall into a clean virtual environment from one index (cu130 or cu129, not both).",
        "Or remove the minority major: `pip list | grep -E 'nvidia-.*-cu1[23]'` and uninstall the strays.",
    ],
    ["https://docs.vllm.ai/en/latest/getting_started/installation/gpu.html"],
    by_hand="`pip list 2>/dev/null | grep -E 'nvidia-.*-cu1[23]'` in the serving environment",
)
def mixed_cuda_wheels(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    us = {k: v for k, v in facts.snapshot.python.cuda_userspace.items() if v}
    if not facts.snapshot.python.packages and not us:
        return [
            r.finding(
                "info",
                "Python packages not collected: CUDA wheels not checked",
                [facts.missing("pip-freeze") or "no pip freeze / collect-env package list"],
                ["Run `pip freeze | grep -i nvidia` in the serving environment."],
            )
        ]
    majors = sorted(us)
    if len(majors) <= 1:
        title = f"NVIDIA wheels: cu{majors[0]} only" if majors else "No nvidia-*-cu12/13 wheels installed"
        return [r.finding("pass", title, [f"{len(us.get(m, []))} cu{m} wheels" for m in majors])]
    ev = [f"cu{m}: {', '.join(us[m][:4])}{' ...' if len(us[m]) > 4 else ''}" for m in majors]
    libs = {m: {_lib_name(s) for s in us[m]} for m in majors}
    both = set.intersection(*libs.values())
    if both:
        ev.append(f"same library in both majors: {', '.join(sorted(both))}")
        return [r.finding("fail", "CUDA 12 and 13 builds of the same NVIDIA library are installed", ev)]
    return [r.finding("warn", "Mixed CUDA 12 and 13 NVIDIA wheels in one environment", ev)]


@rule(
    "DRV005",
    "driver_cuda",
    "torch's CUDA build runs on this driver",
    "PyTorch built for a CUDA newer than the driver supports refuses to start ('The NVIDIA driver on your "
    "system is too old (found version 12080)').",
    [
        "Upgrade the driver to one whose nvidia-smi 'CUDA Version' is at least torch's CUDA.",
        "Or install the torch/vLLM build for the driver's CUDA (e.g. the cu129 wheels on an r575 driver).",
    ],
    ["https://pytorch.org/get-started/locally/"],
    by_hand="`python -c 'import torch; print(torch.version.cuda)'` vs `nvidia-smi` 'CUDA Version'",
)
def torch_vs_driver(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    t = facts.snapshot.python.torch
    drv_cuda = facts.snapshot.driver.cuda_version
    if not t.cuda or not drv_cuda:
        return [
            r.finding(
                "info",
                "torch CUDA vs driver not compared (one side not collected)",
                [
                    f"torch {t.version or '?'} CUDA {t.cuda or 'unknown'}",
                    f"driver CUDA Version {drv_cuda or 'unknown'}",
                ],
                ["Check by hand: `python -c 'import torch; print(torch.version.cuda)'` vs nvidia-smi."],
            )
        ]
    ev = [f"torch {t.version or '?'} built with CUDA {t.cuda}", f"driver supports up to CUDA {drv_cuda}"]
    tv, dv = parse_version(t.cuda), parse_version(drv_cuda)
    if tv and dv and tv[0] > dv[0]:
        return [
            r.finding("fail", f"torch is built for CUDA {t.cuda}; this driver stops at CUDA {drv_cuda}", ev)
        ]
    if version_lt(drv_cuda, major_minor(t.cuda)):
        ev.append(minor_compat_limitation())
        return [
            r.finding(
                "warn",
                f"torch CUDA {t.cuda} runs on driver CUDA {drv_cuda} via minor-version compatibility",
                ev,
            )
        ]
    return [r.finding("pass", f"torch CUDA {t.cuda} runs on driver CUDA {drv_cuda}", ev)]
