"""A zoo of ``transformers`` architectures that no other test names (encoders, decoders, seq2seq, vision, audio,
CLIP), each from a tiny config with seeded random weights and the library's defaults otherwise, compiled as a user
would (``torch.compile(model, backend="luminal_lab")``, called with keyword inputs) and checked against eager PyTorch
on its main output; every graph must compile (the backend's "runs in torch" warning fails the test).

Each model's first compiled call (dynamo's capture, export, translation and kernel builds: wall seconds) is recorded
as the test's ``first_call_s`` property and in ``build/zoo_first_calls.json`` (name -> seconds), for compile-speed
work."""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

VOCAB = 100
TOKENS = 8
IMAGE = 32
FIRST_CALLS = Path(__file__).resolve().parents[2] / "build" / "zoo_first_calls.json"
IN_TORCH = "luminal_lab: a graph runs in torch"
# token ids inside the vocabulary for configs whose defaults lie outside it
SPECIAL = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
# a decoder layer's usual sizes
DECODER = {"vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
           "num_attention_heads": 4, "max_position_embeddings": 64, **SPECIAL}
# an encoder's
ENCODER = {"vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
           "num_attention_heads": 4, "max_position_embeddings": 64}
VISION = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
          "image_size": IMAGE, "patch_size": 8}

Built = tuple[nn.Module, dict[str, torch.Tensor]]


def _model(model_class: str, config_class: str, **config: Any) -> nn.Module:
    """``model_class`` of ``config_class(**config)``, its weights drawn under seed 0, in eval mode."""
    import transformers

    made = getattr(transformers, config_class)(**config)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return getattr(transformers, model_class)(made).eval()


def _ids(length: int = TOKENS, seed: int = 1) -> torch.Tensor:
    """Two rows of seeded token ids, clear of the special ids."""
    return torch.randint(3, VOCAB, (2, length), generator=torch.Generator().manual_seed(seed))


def _noise(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(1))


def _causal_lm(prefix: str, **sizes: Any) -> Callable[[], Built]:
    return lambda: (_model(f"{prefix}ForCausalLM", f"{prefix}Config", **sizes), {"input_ids": _ids()})


def _encoder(prefix: str, **sizes: Any) -> Callable[[], Built]:
    return lambda: (_model(f"{prefix}Model", f"{prefix}Config", **sizes), {"input_ids": _ids()})


def _seq2seq(model_class: str, config_class: str, **sizes: Any) -> Callable[[], Built]:
    return lambda: (_model(model_class, config_class, **sizes),
                    {"input_ids": _ids(), "decoder_input_ids": _ids(length=4, seed=2)})


def _vision(model_class: str, config_class: str, **sizes: Any) -> Callable[[], Built]:
    return lambda: (_model(model_class, config_class, **sizes), {"pixel_values": _noise(2, 3, IMAGE, IMAGE)})


WAV2VEC2 = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
            "conv_dim": (16,), "conv_stride": (5,), "conv_kernel": (10,), "num_conv_pos_embeddings": 16,
            "num_conv_pos_embedding_groups": 4}


def _whisper_encoder() -> Built:
    """Whisper's audio encoder, as ``WhisperModel.get_encoder()`` gives it (32 frames of 16 mel bins)."""
    model = _model("WhisperModel", "WhisperConfig", vocab_size=VOCAB, num_mel_bins=16, d_model=32, encoder_layers=1,
                   decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                   decoder_ffn_dim=64, max_source_positions=16, max_target_positions=16, **SPECIAL,
                   decoder_start_token_id=1)
    return model.get_encoder(), {"input_features": _noise(2, 16, 32)}


MODELS: dict[str, Callable[[], Built]] = {
    # encoders
    "roberta": _encoder("Roberta", **ENCODER),
    "albert": _encoder("Albert", **ENCODER, embedding_size=16),
    "electra": _encoder("Electra", **ENCODER, embedding_size=16),
    "clip_text": _encoder("CLIPText", **(ENCODER | {"max_position_embeddings": 16}), **SPECIAL),
    # decoders
    "opt": _causal_lm("OPT", vocab_size=VOCAB, hidden_size=32, ffn_dim=64, num_hidden_layers=1, num_attention_heads=4,
                      max_position_embeddings=64, word_embed_proj_dim=32, **SPECIAL),
    "gptj": _causal_lm("GPTJ", vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=4, n_positions=64, rotary_dim=4,
                       **SPECIAL),
    "codegen": _causal_lm("CodeGen", vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=4, n_positions=64, n_ctx=64,
                          rotary_dim=4, **SPECIAL),
    "gpt_bigcode": _causal_lm("GPTBigCode", vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=4, n_positions=64,
                              **SPECIAL),
    "mpt": _causal_lm("Mpt", vocab_size=VOCAB, d_model=32, n_heads=4, n_layers=1, expansion_ratio=2, max_seq_len=64),
    "starcoder2": _causal_lm("Starcoder2", **DECODER, num_key_value_heads=2),
    "cohere": _causal_lm("Cohere", **DECODER, num_key_value_heads=2),
    "olmo": _causal_lm("Olmo", **DECODER),
    "qwen3": _causal_lm("Qwen3", **DECODER, num_key_value_heads=2, head_dim=8),
    # a Mamba layer then an attention layer (transformers' reference scan)
    "jamba": _causal_lm("Jamba", **(DECODER | {"num_hidden_layers": 2}), num_key_value_heads=2, num_experts=1,
                        attn_layer_period=2, attn_layer_offset=1, mamba_d_state=8, mamba_dt_rank=4,
                        use_mamba_kernels=False),
    # seq2seq
    "t5": _seq2seq("T5ForConditionalGeneration", "T5Config", vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64,
                   num_layers=1, num_heads=4, relative_attention_num_buckets=8, decoder_start_token_id=0),
    # vision
    "vit": _vision("ViTModel", "ViTConfig", **VISION),
    "clip_vision": _vision("CLIPVisionModel", "CLIPVisionConfig", **VISION),
    "convnext": _vision("ConvNextModel", "ConvNextConfig", num_stages=2, hidden_sizes=[8, 16], depths=[1, 1]),
    "resnet": _vision("ResNetModel", "ResNetConfig", embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                      layer_type="basic"),
    "beit": _vision("BeitModel", "BeitConfig", **VISION, use_relative_position_bias=True),
    # audio
    "wav2vec2": lambda: (_model("Wav2Vec2Model", "Wav2Vec2Config", **WAV2VEC2), {"input_values": _noise(2, 200)}),
    "whisper_encoder": _whisper_encoder,
}


def _main_output(output: Any) -> torch.Tensor:
    """A model's main output: its logits, else its last hidden state."""
    logits = getattr(output, "logits", None)
    return logits if logits is not None else output.last_hidden_state


def _write_first_call(name: str, seconds: float) -> None:
    """``name``'s first-call seconds added to ``FIRST_CALLS`` (this module's tests run in one worker, in turn)."""
    FIRST_CALLS.parent.mkdir(parents=True, exist_ok=True)
    times = json.loads(FIRST_CALLS.read_text()) if FIRST_CALLS.exists() else {}
    times[name] = round(seconds, 3)
    FIRST_CALLS.write_text(json.dumps(times, indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize("name", MODELS)
def test_a_zoo_model_compiles_whole_and_matches_eager(name: str, record_property: Callable[[str, Any], None]) -> None:
    model, inputs = MODELS[name]()
    compiled = torch.compile(model, backend="luminal_lab")
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expected = _main_output(model(**inputs))
        start = time.perf_counter()
        got = _main_output(compiled(**inputs))
        seconds = time.perf_counter() - start
    record_property("first_call_s", round(seconds, 3))
    _write_first_call(name, seconds)
    in_torch = [str(w.message) for w in caught if str(w.message).startswith(IN_TORCH)]
    assert not in_torch, f"{name}: {in_torch}"
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
