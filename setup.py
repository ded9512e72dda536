"""Only the optional native part of the build; everything else is in pyproject.toml.

`vllm_medic.triage._lines` counts newlines for triage's scan (see its source). It is optional: where no C
compiler is found the install goes on without it and triage uses the same arithmetic in Python
(`vllm_medic.triage.lines`), with the same results, slower."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "vllm_medic.triage._lines",
            ["src/vllm_medic/triage/_lines.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
