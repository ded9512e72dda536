"""vllm-medic: from a failed vLLM launch to a signed-off acceptance sheet."""

__version__ = "0.1.0"
