"""Write a random-weight tiny Llama + byte-level BPE tokenizer to DIR (used only to capture a real vLLM log).

Run with the real vLLM CPU venv's python: `python make_tiny_model.py DIR`.
"""

import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
corpus = ["The quick brown fox jumps over the lazy dog. " * 20, "vLLM serves language models fast. " * 20]
tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=512, special_tokens=["<s>", "</s>", "<unk>"]))
fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
fast.chat_template = (
    "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
fast.save_pretrained(out)
cfg = LlamaConfig(
    vocab_size=len(fast),
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    max_position_embeddings=4096,
    bos_token_id=0,
    eos_token_id=1,
)
LlamaForCausalLM(cfg).save_pretrained(out)
print("model written to", out)
