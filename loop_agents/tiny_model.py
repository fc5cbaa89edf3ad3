"""Build a tiny Qwen2-architecture causal LM with a locally trained tokenizer.

The directory written is a normal Hugging Face model directory (config.json, model.safetensors,
tokenizer.json, tokenizer_config.json with a real Qwen chat template, generation_config.json), so
that `AutoModelForCausalLM`, `AutoTokenizer`, peft and vLLM all load it exactly as they load a
real Qwen checkpoint. Nothing is downloaded: the byte-level BPE tokenizer is trained on a
corpus generated here, and the weights are a seeded random initialisation.

Choices: head_dim is 32 because the vLLM CPU attention kernels reject 16 (docs/stack.md); the
special tokens and their order follow Qwen2.5 (`<|endoftext|>`, `<|im_start|>`, `<|im_end|>`),
with `<think>`/`</think>` and the tool-call tags as ordinary added tokens as in Qwen3.
"""

from __future__ import annotations

import hashlib
import json
import keyword
import string
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

QWEN_PRETOKENIZE_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
CHAT_TEMPLATES = ("qwen2_5", "qwen3")

_WORDS = """
the a an of to in for on with at by from as is are was were be been it this that these those you your
we our they their he she his her i my me do does did done not no yes and or but if then else when
while task answer complete completed apis api app apps docs doc show description descriptions name
names email phone password login access token user users supervisor account accounts page index limit
list lists get set add remove create delete update find search count number total sum max min first
last next previous today date time day week month year playlist playlists song songs album artist
spotify venmo gmail amazon splitwise todoist note notes simple file system files folder directory
message messages contact contacts friend friends payment payments transaction balance money amount
price order orders product cart item items review rating title content text result results output
error errors execution failed success print return def import from class self none true false
code python block step steps turn observation action actions done reward go move pick up drop open
close door key ball box red green blue yellow purple grey left right forward back north south east
west craft crafting recipe inventory using wood plank stick stone iron gold table look around inside
room kitchen go to goal reach agent environment variable variables value values call calls function
functions argument arguments response request requests please now generate actual following here
what which who how many much more less than equal each every all any some only also again still
"""

_CODE_SNIPPETS = [
    "print(apis.api_docs.show_app_descriptions())",
    "print(apis.api_docs.show_api_descriptions(app_name='spotify'))",
    "print(apis.api_docs.show_api_doc(app_name='spotify', api_name='login'))",
    "login_result = apis.spotify.login(username='user@example.com', password='secret')",
    "access_token = login_result['access_token']",
    "playlists = apis.spotify.show_playlist_library(access_token=access_token, page_index=0)",
    "num_playlists = len(playlists)",
    "apis.supervisor.complete_task(answer=num_playlists)",
    "for page_index in range(10):\n    page = fetch(page_index)\n    if not page:\n        break",
    "result = {'name': name, 'value': value, 'count': 3}",
    "```python\nx = 1\nprint(x)\n```",
    "Execution failed. Traceback (most recent call last):\nNameError: name 'x' is not defined",
    "Action: move forward\nObservation: You see a red ball.",
]


@dataclass(frozen=True)
class TinyModelSpec:
    """Size of the tiny model; the defaults give about 0.25 M parameters."""

    vocab_size: int = 2048
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 2
    num_kv_heads: int = 1
    intermediate_size: int = 192
    max_position_embeddings: int = 32768
    chat_template: str = "qwen2_5"
    seed: int = 0


def chat_template_text(name: str) -> str:
    """Return the Jinja chat template shipped with the package (`qwen2_5` or `qwen3`)."""
    if name not in CHAT_TEMPLATES:
        raise ValueError(f"chat_template must be one of {CHAT_TEMPLATES}, got {name!r}")
    return (resources.files("loop_agents.rollout") / "templates" / f"{name}.jinja").read_text()


def _training_corpus() -> list[str]:
    words = _WORDS.split()
    lines = [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]
    lines += [" ".join(w.capitalize() for w in words[i : i + 8]) for i in range(0, len(words), 8)]
    lines += [" ".join(keyword.kwlist), string.printable, " ".join(str(i) for i in range(200))]
    lines += _CODE_SNIPPETS * 20
    for name in CHAT_TEMPLATES:
        lines += chat_template_text(name).splitlines()
    return lines


def build_tokenizer(vocab_size: int):
    """Train a byte-level BPE tokenizer with Qwen's pre-tokenizer regex (deterministic)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PRETOKENIZE_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    n_added = len(SPECIAL_TOKENS) + len(ADDED_TOKENS)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - n_added,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_training_corpus(), trainer=trainer)
    tok.add_special_tokens(SPECIAL_TOKENS)
    tok.add_tokens(ADDED_TOKENS)
    return tok


def build_tiny_model(out_dir: str | Path, spec: TinyModelSpec = TinyModelSpec()) -> Path:
    """Write the tiny model directory and return its path. Same spec → identical files."""
    import torch
    from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    raw = build_tokenizer(spec.vocab_size)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        model_max_length=spec.max_position_embeddings,
        clean_up_tokenization_spaces=False,
        chat_template=chat_template_text(spec.chat_template),
        split_special_tokens=False,
    )
    tokenizer.save_pretrained(out)

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        head_dim=spec.hidden_size // spec.num_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        torch_dtype="float32",
        use_cache=True,
    )
    torch.manual_seed(spec.seed)
    model = Qwen2ForCausalLM(config).to(torch.float32)
    model.generation_config = GenerationConfig(
        eos_token_id=[config.eos_token_id, config.pad_token_id],
        pad_token_id=config.pad_token_id,
        do_sample=True,
    )
    model.save_pretrained(out, safe_serialization=True)
    return out


def directory_fingerprint(path: str | Path) -> str:
    """SHA-256 over the files of a model directory, for determinism checks."""
    digest = hashlib.sha256()
    for file in sorted(Path(path).iterdir()):
        if file.is_file():
            digest.update(file.name.encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()


def describe(path: str | Path) -> dict:
    """Small summary (parameters, vocab, template) printed by the build script."""
    config = json.loads((Path(path) / "config.json").read_text())
    return {
        "path": str(path),
        "vocab_size": config["vocab_size"],
        "hidden_size": config["hidden_size"],
        "layers": config["num_hidden_layers"],
    }
