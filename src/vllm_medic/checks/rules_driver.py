"""driver_cuda: is there a working driver, and is it new enough for the CUDA the image and wheels need?"""

from __future__ import annotations

import re

from vllm_medic.checks.facts import Facts
from vllm_medic.checks.registry import Rule, rule
from vllm_medic.model import Finding
from vllm_medic.recipes.cuda import family_floor, forward_compat, minor_compat_limitation, native_requirement
from vllm_medic.recipes.model import Recipe
from vllm_medic.recipes.versions import major_minor, parse_version, version_lt

CUDA_COMPAT_DOCS = "https://docs.nvidia.com/deploy/cuda-compatibility/index.html"
RELEASE_NOTES = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"


def _driver_where(facts: Facts, version: str | None) -> str:
    """``file:line`` of the driver version in whichever nvidia-smi output (or NVML dump) carried it."""
    if version:
        for source in ("nvidia-smi", "nvidia-smi-q", "nvidia-smi-query-gpu", "nvml.json", "vllm-collect-env"):
            hit = facts.find(source, version)
            if hit is not None:
                return hit[0]
    return facts.gpus_where("Driver Version")


def _driver_version(facts: Facts) -> tuple[str | None, str]:
    d = facts.snapshot.driver
    if d.version:
        return d.version, f"{_driver_where(facts, d.version)} Driver Version: {d.version}"
    if d.kernel_module_version:
        where = facts.where("proc-driver-nvidia-version", "Kernel Module")
        return (
            d.kernel_module_version,
            f"{where} kernel module {d.kernel_module_version} (nvidia-smi gave no version)",
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
    ev = [f"nvidia-smi status: {d.status}"] + _failure_lines(facts, d.status, detail)
    if (d.status == "ok" or d.status in ("unknown", "")) and d.version:
        cuda = f", CUDA Version {d.cuda_version}" if d.cuda_version else ""
        return [
            r.finding(
                "pass",
                f"NVIDIA driver {d.version} loaded{cuda}",
                [f"{_driver_where(facts, d.version)} Driver Version: {d.version}{cuda}"],
            )
        ]
    if d.status == "ok":  # a GPU list came back, but no line carried the driver version
        return [
            r.not_checked(
                "Driver version not checked: the output lists GPUs but no driver version",
                [facts.gpus_where("GPU"), *ev],
                ["Capture the whole `nvidia-smi` table (its header carries 'Driver Version')."],
            )
        ]
    handler = _DRV001_BY_STATUS.get(d.status)
    if handler is None and err is not None:
        handler = {"missing": _not_found, "timeout": _hung, "permission": _permission}.get(err.kind)
    if handler is not None:
        return [handler(facts, r, ev)]
    if d.status == "error" and "unknown error" in " ".join(ev).lower():
        return [_nvml_unknown_error(facts, r, ev)]
    if d.status == "error" or (err is not None and err.kind in ("nonzero", "error")):
        return [
            r.finding(
                "fail",
                f"nvidia-smi failed: {detail or (err.kind if err else 'error')}",
                ev
                + ([f"exit code {err.exit_code}"] if err is not None and err.exit_code is not None else []),
                [
                    "Read the kernel log for the cause: `sudo dmesg -T | grep -iE 'NVRM|xid'`.",
                    "Check the modules are loaded and match: `lsmod | grep nvidia`, `cat /proc/driver/nvidia/version`.",
                    "If the driver is wedged: drain the node, reload the modules "
                    "(`sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia`) or reboot.",
                ],
            )
        ]
    if err is not None:  # captured but not readable (unparsable, not applicable): nothing proven either way
        return [
            r.not_checked(
                f"Driver not checked: the nvidia-smi output could not be read ({err.kind})",
                [facts.missing("nvidia-smi") or f"nvidia-smi: {err.kind}"],
                ["Capture the whole `nvidia-smi` output (not an excerpt) as nvidia-smi.txt."],
            )
        ]
    return [
        r.not_checked(
            "Driver not checked: no nvidia-smi output",
            [facts.unread("nvidia-smi") or "nvidia-smi: not captured", *ev],
            ["Capture `nvidia-smi > nvidia-smi.txt` on the node and re-run with `--from DIR`."],
        )
    ]


# Phrases of nvidia-smi's failure messages, per driver.status, for file:line evidence.
_FAILURE_NEEDLES: dict[str, tuple[str, ...]] = {
    "no_driver": ("NVIDIA-SMI has failed", "communicate with the NVIDIA driver"),
    "version_mismatch": ("Driver/library version mismatch", "NVML library version"),
    "gpu_lost": ("GPU is lost", "Unable to determine the device handle"),
    "no_devices": ("No devices were found",),
    "permission": ("Insufficient Permissions", "permission denied"),
    "error": ("Failed to initialize NVML", "Unable to determine the device handle"),
}


def _failure_lines(facts: Facts, status: str, detail: str) -> list[str]:
    """``file:line text`` of nvidia-smi's own failure message(s); the parsed detail when not captured."""
    out: list[str] = []
    for needle in _FAILURE_NEEDLES.get(status, ()):
        for source in ("nvidia-smi", "nvidia-smi-q", "nvidia-smi-query-gpu", "nvidia-smi-topo-m"):
            hit = facts.find(source, needle, ignore_case=True)
            if hit is not None:
                line = f"{hit[0]} {hit[1]}"
                if line not in out:
                    out.append(line)
                break
    if status == "version_mismatch":
        hit = facts.find("proc-driver-nvidia-version", "Kernel Module")
        if hit is not None:
            out.append(f"{hit[0]} {hit[1]}")
    if not out and detail:
        out.append(detail)
    return out


def _not_found(facts: Facts, r: Rule, ev: list[str]) -> Finding:
    in_container = facts.snapshot.container.in_container
    where = "this container" if in_container else "this machine"
    fix = [
        "Check the machine has NVIDIA GPUs: `lspci | grep -i nvidia`.",
        "Install the NVIDIA data-center driver for this kernel (r580+ for CUDA 13 images).",
        "In a container: run it with `--gpus all` (NVIDIA Container Toolkit) so nvidia-smi and "
        "the driver libraries are mounted in.",
    ]
    if in_container:
        fix = [
            fix[2],
            "On Kubernetes: request `nvidia.com/gpu: N` in the pod's limits (the NVIDIA device "
            "plugin mounts the driver); check `runtimeClassName: nvidia` where the cluster needs it.",
            "On the host: `nvidia-smi` must work there first (`lspci | grep -i nvidia`, install the driver).",
        ]
        ev = ev + [f"running in a container ({facts.snapshot.container.runtime or 'runtime unknown'})"]
    return r.finding("fail", f"No NVIDIA driver reachable in {where}: nvidia-smi not found", ev, fix)


def _no_driver(facts: Facts, r: Rule, ev: list[str]) -> Finding:
    return r.finding(
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


def _version_mismatch(facts: Facts, r: Rule, ev: list[str]) -> Finding:
    d = facts.snapshot.driver
    lib = d.nvml_library_version or "not printed"
    kmod = d.kernel_module_version or "not captured (`cat /proc/driver/nvidia/version`)"
    return r.finding(
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


def _hung(facts: Facts, r: Rule, ev: list[str]) -> Finding:
    return r.finding(
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


_BUS_ID = re.compile(r"GPU\s*(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])")


def _gpu_lost(facts: Facts, r: Rule, ev: list[str]) -> Finding:
    m = _BUS_ID.search(" ".join(ev))
    gpu = f"GPU {m.group('bus')}" if m else "A GPU"
    bus = m.group("bus") if m else "<bus id>"
    return r.finding(
        "fail",
        f"{gpu} is lost (fallen off the bus or wedged): this node cannot serve",
        ev,
        [
            "Find why in the kernel log: `sudo dmesg -T | grep -iE 'xid|fallen off the bus'` (Xid 79 = fallen "
            "off the bus; 48/63/64/94/95 = memory/ECC; 119/120 = GSP).",
            f"Check the GPU is still on the PCI bus: `lspci -s {bus} -vv` (absent, or `rev ff`, means it is "
            "gone from the bus).",
            f"Drain the node (cordon it / take it out of the scheduler), stop the GPU jobs, then reset the GPU "
            f"(`sudo nvidia-smi -r -i {bus}`) or reboot, as nvidia-smi says.",
            "If it fails again after the reset (repeated Xid 79 or ECC errors), replace the GPU (RMA with the "
            "serial from `nvidia-smi -q`).",
        ],
    )


def _no_devices(facts: Facts, r: Rule, ev: list[str]) -> Finding:
    nvd, nvd_ev = facts.env("NVIDIA_VISIBLE_DEVICES")
    if nvd is not None:
        ev = ev + [nvd_ev]
    if facts.snapshot.container.in_container:
        ev = ev + [f"running in a container ({facts.snapshot.container.runtime or 'runtime unknown'})"]
    if facts.snapshot.driver.open_kernel_module is False:
        hit = facts.find("proc-driver-nvidia-version", "Kernel Module")
        ev = ev + [
            f"{hit[0] + ' ' if hit else ''}proprietary kernel modules: Blackwell and Grace Hopper GPUs are driven "
            "only by the open modules (DRV007)"
        ]
    return r.finding(
        "fail",
        "nvidia-smi found no GPU: the driver answers but no device is usable",
        ev,
        [
            "In a container: it was given no GPU. Start it with `--gpus all` (Docker), `--device "
            "nvidia.com/gpu=all` (CDI/podman), or request `nvidia.com/gpu: N` in the pod's limits (the "
            "device plugin sets NVIDIA_VISIBLE_DEVICES); NVIDIA_VISIBLE_DEVICES=void or none hides every GPU.",
            "On the host: are the GPUs on the bus? `lspci -nn | grep -i nvidia` (none: BIOS, riser or VM "
            "passthrough problem).",
            "If they are listed: `lspci -k -d 10de:` must say 'Kernel driver in use: nvidia' (vfio-pci or "
            "nouveau claimed them otherwise), and `sudo dmesg -T | grep -iE 'NVRM|xid'` shows "
            "`RmInitAdapter failed` when this driver branch does not support the GPU or the BIOS lacks "
            "Above 4G decoding / resizable BAR.",
        ],
    )


def _permission(facts: Facts, r: Rule, ev: list[str]) -> Finding:
    return r.finding(
        "fail",
        "nvidia-smi has no permission to the GPU device files",
        ev,
        [
            "Check the device files: `ls -l /dev/nvidia*`; /dev/nvidiactl and /dev/nvidia0.. must be "
            "read/write for the user that runs vLLM (driver default crw-rw-rw-; NVreg_DeviceFileMode / "
            "NVreg_DeviceFileGID in /etc/modprobe.d narrow it).",
            "Run vLLM as a user of the owning group (`id`; often `video`), or fix the modprobe options and "
            "reload the driver.",
            "In a container: pass the GPUs through the NVIDIA Container Toolkit (`--gpus all`, CDI `--device "
            "nvidia.com/gpu=all`) rather than bind-mounting /dev/nvidia*; rootless podman needs the CDI "
            "spec's device gid or `--group-add keep-groups`; check SELinux denials (`sudo ausearch -m avc`).",
        ],
    )


def _nvml_unknown_error(facts: Facts, r: Rule, ev: list[str]) -> Finding:
    """`Failed to initialize NVML: Unknown Error`: typically a container that lost its device access."""
    inside = facts.snapshot.container.in_container
    if inside:
        ev = ev + [f"running in a container ({facts.snapshot.container.runtime or 'runtime unknown'})"]
    return r.finding(
        "fail",
        "NVML 'Unknown Error': "
        + ("this container has lost its GPU devices" if inside else "GPU devices unreachable")
        + " (a systemd cgroup reload under a running container, or a wedged driver)",
        ev,
        [
            "If `nvidia-smi` works on the host but not in the container: a `systemctl daemon-reload` (often from "
            "unattended upgrades) removed the container's device access; delete and recreate the container / "
            "restart the pod, which gets the GPUs back.",
            "Stop it recurring (NVIDIA notice nvidia-docker#1730): create the /dev/char symlinks on the host "
            "(`sudo nvidia-ctk system create-dev-char-symlinks --create-all`, kept by a udev rule) or switch to "
            "CDI device injection.",
            "If it fails on the host too: `sudo dmesg -T | grep -iE 'NVRM|xid'`, then drain the node and reload "
            "the modules or reboot.",
        ],
        docs=["https://github.com/NVIDIA/nvidia-docker/issues/1730", *r.docs],
    )


_DRV001_BY_STATUS = {
    "not_found": _not_found,
    "no_driver": _no_driver,
    "version_mismatch": _version_mismatch,
    "hung": _hung,
    "gpu_lost": _gpu_lost,
    "no_devices": _no_devices,
    "permission": _permission,
}


_ASSUMED = "no image inspected or in the launch: the recipe image is"


def _image_cuda(facts: Facts, recipe: Recipe) -> tuple[str | None, str]:
    img = facts.snapshot.image
    if img.cuda_version:
        where = facts.where("docker-image-inspect", "CUDA_VERSION")
        return img.cuda_version, f"{where} image {img.tag or '?'} CUDA_VERSION={img.cuda_version}"
    tag = img.tag or facts.snapshot.launch.image
    for spec in recipe.images:
        if spec.cuda and tag == spec.tag:
            return spec.cuda, f"launch image {spec.tag} is CUDA {spec.cuda} ({spec.source})"
    v, v_ev = facts.server_vllm()
    variant_cuda = _variant_cuda(v.variant)
    if variant_cuda:
        where = v_ev[0].split(" vLLM ")[0].rstrip(":") if v_ev else "vLLM version"
        return variant_cuda, f"{where} vLLM {v.raw} is a CUDA {variant_cuda} build (its own CUDA runtime)"
    torch = facts.snapshot.python.torch
    server_env, env_ev = facts.python_env()
    if tag is None and torch.cuda and server_env is not False:
        return (
            torch.cuda,
            f"no image: the Python environment's torch {torch.version or '?'} is built with CUDA {torch.cuda} "
            f"({env_ev})",
        )
    for spec in recipe.images:
        if spec.cuda and tag is None:
            return (
                spec.cuda,
                f"{_ASSUMED} {spec.tag} (CUDA {spec.cuda}; {spec.source}), not the image in use",
            )
    if tag is not None and ("docker-image-inspect.json" in facts.raw):
        return None, (
            f"image {tag}: docker-image-inspect.json has no CUDA_VERSION / NVIDIA_REQUIRE_CUDA "
            "(a truncated paste, or not a CUDA image)"
        )
    if tag is not None:
        return None, f"image {tag} not inspected: its CUDA is unknown (collect --image {tag})"
    return None, "image CUDA unknown: no image inspected or in the launch, no vLLM/torch CUDA build known"


def _variant_cuda(variant: str | None) -> str | None:
    """`cu129` -> "12.9", `cu130` -> "13.0" (vLLM's and torch's local version tags)."""
    if not variant or not variant.startswith("cu") or not variant[2:].isdecimal() or len(variant) < 5:
        return None
    digits = variant[2:]
    return f"{digits[:-1]}.{digits[-1]}"


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
            r.not_applicable(
                "AMD hardware: no NVIDIA driver/CUDA pairing to check",
                [f"hardware {facts.hardware()}" + (" (--hardware)" if facts.hardware_override else "")],
            )
        ]
    cuda, cuda_ev = _image_cuda(facts, recipe)
    assumed = cuda_ev.startswith(_ASSUMED)
    floor = recipe.driver
    if drv is None:
        return [
            r.not_checked(
                "Driver vs CUDA not checked: driver version unknown",
                [drv_ev, cuda_ev],
                ["Fix DRV001 first, or capture `nvidia-smi` output into the bundle."],
            )
        ]
    ev = [drv_ev, cuda_ev]
    if floor is not None and version_lt(drv, floor.min_version):
        return [_below_recipe_floor(recipe, r, drv, ev)]
    if floor is not None:
        ev.append(f"recipe {recipe.name} floor {floor.min_version} ({floor.branch}): met")
    if cuda is None or assumed:
        return [_image_cuda_unknown(recipe, r, drv, cuda, ev)]
    return [_driver_for_image_cuda(facts, r, drv, cuda, ev)]


def _below_recipe_floor(recipe: Recipe, r: Rule, drv: str, ev: list[str]) -> Finding:
    floor = recipe.driver
    assert floor is not None
    ev.append(f"recipe {recipe.name} needs driver {floor.branch}+ >= {floor.min_version} ({floor.source})")
    fix = list(floor.compliant_paths) or list(r.fix)
    if floor.paths_source:
        ev.append(f"compliant paths: {floor.paths_source}")
    return r.finding(
        "fail", f"Driver {drv} is below the recipe's floor {floor.min_version} ({floor.branch})", ev, fix
    )


def _image_cuda_unknown(recipe: Recipe, r: Rule, drv: str, cuda: str | None, ev: list[str]) -> Finding:
    """The floor (if any) is met, but the image's CUDA is unknown or only the recipe's assumption."""
    floor = recipe.driver
    title = (
        f"Driver {drv} meets the recipe floor {floor.min_version}; the image's CUDA not checked"
        if floor
        else "Driver vs image CUDA not checked: the image's CUDA is unknown"
    )
    if cuda is not None:
        title += f" (the recipe image would need CUDA {cuda})"
    return r.not_checked(
        title, ev, ["Bundle `docker image inspect IMAGE` (or pass --image to collect) for the image in use."]
    )


def _driver_for_image_cuda(facts: Facts, r: Rule, drv: str, cuda: str, ev: list[str]) -> Finding:
    """The driver against NVIDIA's table for the image's CUDA: native, minor-version compatible, or too old."""
    native, fam = native_requirement(cuda), family_floor(cuda)
    if native is None and fam is None:
        return r.not_checked(
            f"Driver vs CUDA {cuda} not checked: CUDA {cuda} is not in the shipped driver table", ev
        )
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
        return r.finding("fail", f"Driver {drv} is too old for the image's CUDA {cuda}", ev, generic_fix)
    if native is not None and version_lt(drv, native.min_driver):
        ev.append(f"{fam.cuda if fam else ''} minor-version compatibility: {minor_compat_limitation()}")
        return r.finding(
            "warn",
            f"Driver {drv} runs CUDA {cuda} only under minor-version compatibility",
            ev,
            generic_fix[:1] + ["Or accept the limitations after a smoke test of the exact image."],
        )
    return r.finding("pass", f"Driver {drv} supports CUDA {cuda}", ev)


def _toolkit_version(facts: Facts) -> tuple[str | None, str]:
    tk = facts.snapshot.toolkit
    for key, v in (("nvcc_version", tk.nvcc_version), ("cuda_toolkit_version", tk.cuda_version)):
        if v and parse_version(v):
            hit = facts.find("nvcc-version", "release")
            return v, f"{hit[0]} {hit[1]}" if hit else f"{key}: {v}"
    v, where = facts.env("CUDA_VERSION")
    if v and parse_version(v):
        return v, where
    missing = facts.missing("nvcc-version")
    return (
        None,
        f"no local CUDA toolkit found ({missing or 'no nvcc --version output'}; CUDA_VERSION not set)",
    )


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
    d = facts.snapshot.driver
    drv_cuda = d.cuda_version
    need = native_requirement(tk) if tk else None
    need_ev = (
        [f"CUDA {need.cuda} needs driver >= {need.min_driver} ({need.release}; {need.source})"]
        if need
        else []
    )
    if tk is not None and drv_cuda is None and not d.version:
        # a toolkit with no working driver: the common "I installed CUDA 13, why does nothing run" case
        return [
            r.finding(
                "info",
                f"CUDA toolkit {major_minor(tk)} is installed, but no NVIDIA driver answers: the toolkit "
                "is not a driver",
                [
                    tk_ev,
                    f"driver: {d.status} ({d.status_detail or facts.missing('nvidia-smi') or 'no version'})",
                ]
                + need_ev,
                [
                    "Fix DRV001 first: the driver is a separate install (the data-center driver package, or the "
                    "`cuda-drivers` meta-package); `cuda-toolkit-*` packages never install or upgrade it.",
                    f"For CUDA {major_minor(tk)} programs the driver must be >= "
                    f"{need.min_driver if need else 'the version NVIDIA lists for it'}.",
                ],
            )
        ]
    nvcc_err = facts.snapshot.error_for("nvcc-version")
    if tk is None and nvcc_err is not None and nvcc_err.kind == "missing":
        return [
            r.not_applicable(
                "No CUDA toolkit on PATH (nvcc not found): nothing to mistake for the driver",
                [facts.missing("nvcc-version") or "nvcc-version: missing", "CUDA_VERSION not set"],
            )
        ]
    if tk is None or drv_cuda is None:
        return [
            r.not_checked(
                "Toolkit vs driver not checked: "
                + ("no toolkit version" if tk is None else "the driver's CUDA Version is unknown"),
                [tk_ev, f"driver CUDA Version: {drv_cuda or facts.unread('nvidia-smi') or 'unknown'}"],
            )
        ]
    ev = [
        tk_ev,
        f"{facts.where('nvidia-smi', 'CUDA Version')} driver {d.version or '?'} supports up to CUDA {drv_cuda}",
    ]
    tv, dv = parse_version(tk), parse_version(drv_cuda)
    if tv and dv and tv[0] > dv[0]:
        return [
            r.finding(
                "warn",
                f"Toolkit CUDA {major_minor(tk)} is installed, but driver {d.version or '?'} supports CUDA "
                f"{drv_cuda}: installing the toolkit never upgrades the driver",
                ev + need_ev,
                [
                    f"To run CUDA {major_minor(tk)} code (binaries built with this nvcc, cu{tv[0]}x wheels, a "
                    f"CUDA {tv[0]} image), upgrade the driver to >= "
                    f"{need.min_driver if need else 'the version NVIDIA lists'}.",
                    f"Or build with a toolkit <= {drv_cuda} (e.g. /usr/local/cuda-{drv_cuda}/bin/nvcc).",
                    f"Or, on data-center GPUs, add the forward-compatibility package {forward_compat()['package']}.",
                ],
            )
        ]
    if version_lt(drv_cuda, major_minor(tk)):
        return [
            r.finding(
                "info",
                f"Toolkit CUDA {major_minor(tk)} is newer than the driver's CUDA {drv_cuda} (same major: "
                "minor-version compatibility)",
                ev + [minor_compat_limitation()],
                [
                    "Works for most code; if PTX JIT or a new API fails, upgrade the driver or build with an older nvcc."
                ],
            )
        ]
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
    server_env, env_ev = facts.python_env()
    if not facts.snapshot.python.packages and not us:
        return [r.not_checked("CUDA wheels not checked: no Python package list", [env_ev])]
    majors = sorted(us)
    seen = [f"cu{m}: {', '.join(us[m][:4])}{' ...' if len(us[m]) > 4 else ''}" for m in majors]
    if server_env is False:
        return [
            r.not_checked(
                "CUDA wheels of the server not checked: the inspected Python has no vLLM (not the server's "
                "environment)",
                [env_ev, *seen],
                [
                    "Put the server's `vllm` on PATH when collecting (its interpreter is then inspected), or run "
                    "`pip list | grep -E 'nvidia-.*-cu1[23]'` with the server's Python.",
                    "For a container: `vllm-medic collect --image IMAGE` lists the image's wheels (HLT-IMG004).",
                ],
            )
        ]
    if len(majors) <= 1:
        partial = facts.unread("pip-freeze", True) or facts.incomplete("vllm-collect-env")
        counted = [f"{len(us.get(m, []))} cu{m} wheels" for m in majors]
        if partial:
            return [
                r.not_checked(
                    f"Only cu{majors[0]} wheels in a partial package list: the other major may be in the part "
                    "not shown"
                    if majors
                    else "No nvidia-*-cu12/13 wheel in a partial package list: not checked",
                    [env_ev, partial, *counted],
                    ["Capture the whole `pip freeze` (or `vllm collect-env`) of the serving environment."],
                )
            ]
        title = (
            f"NVIDIA wheels: cu{majors[0]} only"
            if majors
            else "No nvidia-*-cu12/13 wheel in the package list"
        )
        return [r.finding("pass", title, [env_ev, *counted])]
    ev = [env_ev, *seen]
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
    server_env, env_ev = facts.python_env()
    if t.cuda and server_env is False:
        return [
            r.not_checked(
                "torch CUDA vs driver not checked: the inspected Python is not the server's environment",
                [env_ev, f"torch {t.version or '?'} CUDA {t.cuda} there"],
                ["Check with the server's Python: `python -c 'import torch; print(torch.version.cuda)'`."],
            )
        ]
    if not t.cuda or not drv_cuda:
        return [
            r.not_checked(
                "torch CUDA vs driver not checked: "
                + ("torch's CUDA build unknown" if not t.cuda else "the driver's CUDA Version unknown"),
                [
                    f"torch {t.version or '?'} CUDA {t.cuda or 'unknown'} ({env_ev})",
                    f"driver CUDA Version {drv_cuda or facts.unread('nvidia-smi') or 'unknown'}",
                ],
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


@rule(
    "DRV006",
    "driver_cuda",
    "No GPU row in nvidia-smi shows ERR!",
    "nvidia-smi prints ERR! where it cannot read a GPU's sensor or state (fan, power, temperature, ECC); "
    "a transient read failure is harmless, a persistent one is often the first sign of a GPU falling off "
    "the bus or a board fault.",
    [
        "See which field fails: `nvidia-smi -q -i N` (ERR! or 'Unknown Error' in the field).",
        "Look for Xid errors on that GPU: `sudo dmesg -T | grep -i xid`.",
        "If it persists across reads: drain the node, reset the GPU (`sudo nvidia-smi -r -i N`) or reboot; "
        "replace the board if it returns.",
    ],
    ["https://docs.nvidia.com/deploy/xid-errors/index.html"],
    by_hand="`nvidia-smi | grep -n 'ERR!'`",
)
def gpu_rows_show_err(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    bad = facts.snapshot.gpus_showing_err
    if not bad:
        table = facts.find("nvidia-smi", "MiB")
        why = facts.incomplete("nvidia-smi") or (
            None if table is not None else "nvidia-smi.txt: no GPU table among the evidence"
        )
        if why is not None or not facts.snapshot.gpus:
            return [
                r.not_checked(
                    "GPU rows not checked for ERR!: no whole nvidia-smi table",
                    [why or facts.unread("nvidia-smi") or "no GPUs listed"],
                )
            ]
        return [
            r.finding(
                "pass",
                f"No ERR! in the nvidia-smi table's {len(facts.snapshot.gpus)} GPU rows",
                [f"{facts._file_of('nvidia-smi')}: {len(facts.snapshot.gpus)} GPU rows, none with ERR!"],
            )
        ]
    ev = []
    hit = facts.find("nvidia-smi", "ERR!")
    if hit is not None:
        ev.append(f"{hit[0]} {hit[1]}")
    ev.append(f"GPU(s) showing ERR!: {', '.join(str(i) for i in bad)}")
    idx = str(bad[0])
    fix = [step.replace("-i N", f"-i {idx}") for step in r.fix]
    return [r.finding("warn", f"nvidia-smi shows ERR! for GPU {', '.join(str(i) for i in bad)}", ev, fix)]


OPEN_MODULES_BLOG = (
    "https://developer.nvidia.com/blog/nvidia-transitions-fully-towards-open-source-gpu-kernel-modules/"
)


@rule(
    "DRV007",
    "driver_cuda",
    "The kernel module flavour supports the GPUs (open modules on Blackwell)",
    "Since r560 the open GPU kernel modules are NVIDIA's default; Grace Hopper and Blackwell data-center "
    "GPUs are supported only by the open flavour (NVIDIA, 'transitions fully towards open-source GPU kernel "
    "modules'). The proprietary flavour on a B200/GB200 leaves the GPUs unusable.",
    [
        "Install the open flavour of the same driver branch (e.g. `nvidia-open` / `nvidia-driver-580-open`, "
        "or the .run installer with `--kernel-module-type=open`), then reboot.",
        "Confirm with `cat /proc/driver/nvidia/version` ('NVIDIA UNIX Open Kernel Module').",
    ],
    [
        OPEN_MODULES_BLOG,
        "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html",
    ],
    by_hand="`cat /proc/driver/nvidia/version` ('Open Kernel Module' or not) and the GPU model",
)
def kernel_module_flavour(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    open_module = facts.snapshot.driver.open_kernel_module
    hit = facts.find("proc-driver-nvidia-version", "Kernel Module")
    where = f"{hit[0]} {hit[1]}" if hit else "proc-driver-nvidia-version.txt"
    family = facts.family()
    needs_open = family == "blackwell" or any("GH200" in n.upper() for n in facts.gpu_names)
    if open_module is None:
        why = facts.unread("proc-driver-nvidia-version") or "no /proc/driver/nvidia/version captured"
        if needs_open:
            return [
                r.not_checked(
                    f"Kernel module flavour not checked: {facts.hardware() or 'these'} GPUs need the open modules",
                    [why, f"hardware: {facts.hardware()}"],
                )
            ]
        if not facts.snapshot.gpus:
            return [r.not_checked("Kernel module flavour not checked: no GPU seen", [why])]
        if family in ("hopper", "ampere"):
            names = sorted(set(facts.gpu_names))
            return [
                r.finding(
                    "pass",
                    f"{facts.hardware()} GPUs run on either kernel module flavour",
                    [
                        f"{facts.gpus_where(names[0])} GPU {', '.join(names)} ({family}: open and proprietary "
                        "modules both support it)",
                        why,
                    ],
                )
            ]
        return [
            r.not_checked(
                "Kernel module flavour not checked: this GPU's supported flavours are not in the tool's data",
                [why, f"GPU {', '.join(sorted(set(facts.gpu_names)))}"],
            )
        ]
    flavour = "open" if open_module else "proprietary"
    ev = [f"{where} ({flavour} kernel modules)", f"hardware: {facts.hardware() or 'unknown'}"]
    if needs_open and not open_module:
        return [
            r.finding(
                "fail",
                f"Proprietary kernel modules on {facts.hardware() or 'Grace Hopper'} GPUs: only the open "
                "modules support them",
                ev,
            )
        ]
    return [r.finding("pass", f"{flavour.capitalize()} kernel modules", ev)]
