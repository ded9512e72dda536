"""image_dependency: the right image, a vLLM new enough for the model, flags the model's code needs."""

from __future__ import annotations

import fnmatch

from vllm_medic.checks.facts import Facts
from vllm_medic.checks.registry import Rule, rule
from vllm_medic.model import Finding
from vllm_medic.recipes.model import Recipe
from vllm_medic.recipes.versions import is_dev_build, parse_version, version_lt

DOCKER_DOCS = "https://docs.vllm.ai/en/latest/deployment/docker.html"


def _image(facts: Facts) -> tuple[str | None, str]:
    img = facts.snapshot.image
    if img.tag:
        return img.tag, f"{facts.where('docker-image-inspect', img.tag)} image {img.tag}"
    launch_image = facts.snapshot.launch.image
    if launch_image:
        return launch_image, f"{facts.launch_where(launch_image)} launch image {launch_image}"
    return None, facts.missing("docker-image-inspect") or "no image inspected and none in the launch"


def _inspected(facts: Facts) -> str | None:
    """Evidence that the image exists (an inspect with an Id or digest), or None."""
    img = facts.snapshot.image
    if not (img.id or img.digest):
        return None
    shown = img.digest or img.id or ""
    return f"{facts.where('docker-image-inspect', shown[:19])} inspected: {shown[:80]}"


def _not_inspected(facts: Facts, image: str) -> str:
    why = facts.missing("docker-image-inspect")
    if why is not None:
        return why
    if facts.snapshot.image.present is False:
        return f"{facts._file_of('docker-image-inspect')}: empty list: image not present locally where it was inspected"
    return f"{image} not inspected (no docker-image-inspect.json)"


def _split_tag(image: str) -> tuple[str, str]:
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        repo, tag = ref.rsplit(":", 1)
        return repo, tag
    return ref, "latest"


@rule(
    "IMG001",
    "image_dependency",
    "Image tag exists and is the recipe's",
    "A tag that does not exist fails the pull ('manifest unknown'); a different image than the recipe's "
    "is an untested combination of vLLM, CUDA and kernels.",
    ["Use the recipe's image tag (see `vllm-medic recipes`).", "Pin it by digest once it works."],
    [DOCKER_DOCS],
    by_hand="`docker inspect --format '{{.Config.Image}}' CONTAINER` and compare with `vllm-medic recipes`",
)
def image_tag(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    image, ev = _image(facts)
    if image is None:
        return [
            r.not_checked(
                "Image not checked: no image known",
                [ev],
                ["Pass --image to collect, or bundle docker-image-inspect.json."],
            )
        ]
    for bad in recipe.known_bad_images:
        if bad.matches(image):
            return [
                r.finding(
                    "fail",
                    f"Image {image}: {bad.reason.split(':')[0]}",
                    [ev, bad.reason, f"source: {bad.source}"],
                    list(bad.fix),
                )
            ]
    inspected = _inspected(facts)
    if not recipe.images:
        if inspected is None:
            return [
                r.not_checked(
                    f"Image {image}: no known-bad tag, but whether it exists was not checked",
                    [ev, f"recipe {recipe.name} pins no image", _not_inspected(facts, image)],
                    [f"Inspect it where it runs: `docker image inspect {image}` (or `docker pull {image}`)."],
                )
            ]
        return [
            r.finding(
                "pass",
                f"Image {image} exists where it was inspected and matches no known-bad tag",
                [ev, inspected, f"recipe {recipe.name} pins no image"],
            )
        ]
    repo, tag = _split_tag(image)
    for spec in recipe.images:
        srepo, stag = _split_tag(spec.tag)
        if repo == srepo and tag == stag:
            return [
                r.finding(
                    "pass",
                    f"Image {image} is the recipe's {spec.platform} image",
                    [ev, f"recipe: {spec.source}"],
                )
            ]
    wanted = ", ".join(s.tag for s in recipe.images)
    return [
        r.finding(
            "info",
            f"Image {image} is not the recipe's ({wanted})",
            [ev, f"recipe images: {wanted}"],
            [f"If the launch fails, retry with the recipe image ({wanted}) before debugging further."],
        )
    ]


@rule(
    "IMG002",
    "image_dependency",
    "Image and wheels are a verified build, not a floating experiment",
    "`latest`, `nightly` and cu129 variants move under you or were never verified with the recipe: the "
    "next pull can bring another vLLM, CUDA or FlashInfer.",
    [
        "Pin the image by version and digest (`docker images --digests`).",
        "Record the exact tag in the deployment; treat latest/nightly as an experiment.",
    ],
    [DOCKER_DOCS],
    by_hand="`docker images --digests` and `vllm --version` inside the image",
)
def unverified_image(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    image, ev = _image(facts)
    ut = recipe.unverified_tags or {}
    patterns = ut.get("patterns", [])
    findings_ev: list[str] = []
    if image is not None:
        _, tag = _split_tag(image)
        hit = [p for p in patterns if fnmatch.fnmatchcase(tag, p)]
        if hit:
            findings_ev += [
                ev,
                f"tag '{tag}' matches {', '.join(hit)}: {ut.get('reason', '')}",
                f"source: {ut.get('source', '')}",
            ]
    v, v_ev = facts.server_vllm()
    if (
        v.variant
        and "cu129" in v.variant
        and recipe.driver is not None
        and (recipe.driver.cuda or "").startswith("13")
    ):
        findings_ev += [
            f"{v_ev[0].split(' vLLM ')[0].rstrip(':') if v_ev else 'vLLM version'} vLLM {v.raw} is a cu129 build",
            *v_ev[1:],
            f"recipe {recipe.name} ships CUDA {recipe.driver.cuda} builds only: {ut.get('source', recipe.driver.source)}",
        ]
    if findings_ev:
        return [r.finding("warn", "Unverified experiment: floating tag or cu129 build", findings_ev)]
    if image is None and not v.raw:
        return [r.not_checked("Image/build not checked: neither image nor vLLM build known", [ev])]
    launch = facts.snapshot.launch
    bare_metal = facts.launch_known and not launch.image and launch.source in ("argv", "file")
    if image is None and not bare_metal:
        return [
            r.not_checked(
                f"vLLM {v.raw} is not a cu129 build; the image it runs in was not identified",
                [*v_ev, ev],
                [
                    "Name the image: bundle `docker image inspect IMAGE` or the launch (`docker run ... IMAGE`)."
                ],
            )
        ]
    digest = facts.snapshot.image.digest
    pin = (
        [f"digest {digest}"] if digest else ["not pinned by digest: record it with `docker images --digests`"]
    )
    if image is None:
        return [
            r.finding(
                "pass",
                f"vLLM {v.raw} is a release build, not cu129, run without a container image",
                [*v_ev, f"{facts.launch_where('vllm')}: the launch runs vLLM directly (no image)"],
            )
        ]
    return [r.finding("pass", f"{image} is not a floating/nightly/cu129 build", [ev, *pin])]


@rule(
    "IMG003",
    "image_dependency",
    "vLLM meets the recipe's version floor",
    "Model support lands in a given vLLM release; older builds fail with 'Model architectures [...] are "
    "not supported' or load the model wrong.",
    ["Use the recipe's image, or upgrade vLLM to at least the floor.", "Confirm with `vllm --version`."],
    ["https://github.com/vllm-project/vllm/releases"],
    by_hand="`docker run --rm IMAGE vllm --version`",
)
def vllm_floor(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    v, v_ev = facts.server_vllm()
    ver = v.version or v.raw
    ev_v = v_ev or [f"vLLM {v.raw or ver}"]
    floors = [f"{f.version} ({f.source})" for f in recipe.vllm_floors]
    if not ver:
        server_env, env_ev = facts.python_env()
        why = facts.missing("vllm-version") or "no vLLM version"
        return [
            r.not_checked(
                "vLLM version not collected: floor not checked",
                [why, *([env_ev] if server_env is False else []), *floors],
                [
                    "Run `vllm --version` (or `python -c 'import vllm; print(vllm.__version__)'`) in the image."
                ],
            )
        ]
    if not recipe.vllm_floors:
        return [r.not_applicable(f"vLLM {ver}: recipe {recipe.name} sets no version floor", ev_v)]
    if is_dev_build(v.raw or ver) and (parse_version(ver) or (0,))[0:2] < (0, 2):
        return [
            r.not_checked(
                f"vLLM {v.raw or ver} is a dev build: floor not checked",
                [*ev_v, *floors],
                ["Check the build's git sha contains the model's support, or use a release image."],
            )
        ]
    below = [f for f in recipe.vllm_floors if version_lt(ver, f.version)]
    if not below:
        return [r.finding("pass", f"vLLM {ver} meets every floor", [*ev_v, *floors])]
    if len(below) == len(recipe.vllm_floors):
        return [
            r.finding(
                "fail",
                f"vLLM {ver} is below the recipe floor {max(f.version for f in below)}",
                [*ev_v, *floors],
            )
        ]
    return [
        r.finding(
            "warn",
            f"vLLM {ver} meets one floor but not {below[0].version}",
            [*ev_v, *floors, f"sources disagree: {below[0].version} per {below[0].source}"],
        )
    ]


_HYBRID_ARCH_HINTS = ("mamba", "linear", "hybrid", "jamba", "zamba", "nemotronh", "kimik3", "qwen3next")


@rule(
    "IMG004",
    "image_dependency",
    "The installed vLLM knows the model's architecture",
    "config.json names an architecture class; a vLLM that does not register it stops with 'Model "
    "architectures [...] are not supported for now'.",
    [
        "Use a vLLM at or above the version that added the architecture (the recipe's floor).",
        "Check by hand: `python -c 'from vllm import ModelRegistry; print(ModelRegistry.get_supported_archs())'`.",
    ],
    ["https://docs.vllm.ai/en/latest/models/supported_models.html"],
    by_hand="`python -c 'from vllm import ModelRegistry; print(ModelRegistry.get_supported_archs())'` inside the image",
)
def architecture_known(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    cfg = facts.model_config
    if cfg is None:
        return [
            r.not_checked(
                "Model architecture not checked: no config.json",
                ["pass --model PATH (a model directory or its config.json)"],
                ["Re-run with `--model /path/to/model`."],
            )
        ]
    archs = [str(a) for a in cfg.get("architectures") or []]
    if not archs:
        return [
            r.finding(
                "warn",
                "config.json names no architectures",
                ["config.json: 'architectures' missing or empty"],
            )
        ]
    v, v_ev = facts.server_vllm()
    ver = v.version or v.raw
    known = {a.name: a for a in recipe.architectures}
    ev = [f"config.json architectures: {', '.join(archs)}", *(v_ev or ["installed vLLM: unknown"])]
    for name in archs:
        a = known.get(name)
        if a is None or not a.min_vllm:
            continue
        ev.append(f"{name} needs vLLM >= {a.min_vllm} ({a.source})")
        if not ver:
            return [r.not_checked(f"{name} not checked: installed vLLM unknown", ev)]
        if is_dev_build(v.raw or ver) and (parse_version(ver) or (0,))[0:2] < (0, 2):
            return [r.not_checked(f"{name} not checked: vLLM {v.raw} is a dev build", ev)]
        if version_lt(ver, a.min_vllm):
            return [r.finding("fail", f"vLLM {ver} does not know {name} (needs >= {a.min_vllm})", ev)]
        return [r.finding("pass", f"vLLM {ver} registers {name}", ev)]
    return [
        r.not_checked(
            f"Architecture {', '.join(archs)} not checked: not in recipe {recipe.name}'s data",
            ev,
            [r.fix[1]],
        )
    ]


@rule(
    "IMG005",
    "image_dependency",
    "torch's CUDA build matches the image's CUDA",
    "A torch wheel for another CUDA major inside the image means the environment was re-resolved by pip: "
    "vLLM's kernels and torch then load different CUDA libraries.",
    [
        "Use the image's own torch (do not `pip install torch` on top).",
        "Or rebuild the image from one CUDA index.",
    ],
    [DOCKER_DOCS],
    by_hand="`python -c 'import torch; print(torch.version.cuda)'` and `echo $CUDA_VERSION` inside the image",
)
def torch_vs_image(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    t = facts.snapshot.python.torch
    cuda = facts.snapshot.image.cuda_version
    src = facts.where("docker-image-inspect", "CUDA_VERSION")
    if not cuda:
        spec = recipe.image_for("nvidia")
        if spec and spec.cuda and facts.snapshot.launch.image == spec.tag:
            cuda, src = spec.cuda, f"recipe image {spec.tag}"
    server_env, env_ev = facts.python_env()
    if t.cuda and server_env is False:
        return [
            r.not_checked(
                "torch CUDA vs image CUDA not checked: the inspected Python is not the server's environment",
                [env_ev, f"torch {t.version or '?'} CUDA {t.cuda} there", f"image CUDA {cuda or 'unknown'}"],
            )
        ]
    if not t.cuda or not cuda:
        return [
            r.not_checked(
                "torch CUDA vs image CUDA not checked: "
                + ("torch's CUDA build unknown" if not t.cuda else "the image's CUDA unknown"),
                [
                    f"torch CUDA {t.cuda or 'unknown'} ({env_ev})",
                    f"image CUDA {cuda or 'unknown'}"
                    + ("" if cuda else f" ({facts.unread('docker-image-inspect') or 'no CUDA_VERSION'})"),
                ],
            )
        ]
    ev = [f"torch {t.version or '?'} built with CUDA {t.cuda}", f"{src} image CUDA {cuda}"]
    tv, iv = parse_version(t.cuda), parse_version(cuda)
    if tv and iv and tv[0] != iv[0]:
        return [r.finding("fail", f"torch is a CUDA {tv[0]} build inside a CUDA {iv[0]} image", ev)]
    return [r.finding("pass", f"torch CUDA {t.cuda} matches image CUDA {cuda}", ev)]


@rule(
    "IMG006",
    "image_dependency",
    "Flags the model's code needs are on the command line",
    "Some models ship their own code or config handling; without the flag (e.g. --trust-remote-code) the "
    "config or tokenizer cannot be loaded.",
    ["Add the missing flags to the launch command (see the recipe's base_args)."],
    by_hand="read the server's command line (`ps -o args= -C vllm` or `docker inspect`)",
)
def required_flags(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    flags = [f for f in recipe.required_flags if f.category != "prefix_cache"]
    if not flags:
        return [
            r.not_applicable(
                f"Recipe {recipe.name} requires no model-code flags",
                [f"recipe {recipe.name}: no required_flags outside prefix caching"],
            )
        ]
    if not facts.launch_known:
        return [
            r.not_checked(
                "Launch command not known: required flags not checked",
                [f"needs {f.flag} ({f.source})" for f in flags],
                [
                    "Pass the launch with --launch 'vllm serve ...' (or a file, docker inspect JSON, a manifest)."
                ],
            )
        ]
    missing = [f for f in flags if not facts.arg(f.dest)]
    if missing:
        return [
            r.finding(
                "fail",
                f"Missing {', '.join(f.flag for f in missing)}",
                [f"{f.flag} absent from the launch: {f.why} ({f.source})" for f in missing],
                [f"Add {' '.join(f.flag for f in missing)} to the launch command."],
            )
        ]
    return [
        r.finding(
            "pass",
            f"Launch has {', '.join(f.flag for f in flags)}",
            [f"{facts.launch_where(f.flag)}: {f.flag}" for f in flags],
        )
    ]
