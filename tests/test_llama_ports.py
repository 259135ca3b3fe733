"""GPT.from_llama and GPT.from_qwen3 compute exactly what transformers' LlamaForCausalLM and
Qwen3ForCausalLM compute, logits and greedy generation, on random tiny models built offline."""

import re

import pytest
import torch

from lit_attention.errors import ConfigError
from lit_attention.modeling import GPT

transformers = pytest.importorskip("transformers", reason="transformers is in the dev extra")  # always installed in CI
from transformers.models.llama import modeling_llama  # noqa: E402
from transformers.models.qwen3 import modeling_qwen3  # noqa: E402

VOCAB = 61


def config_of(family, **overrides):
    settings = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 500.0},
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=0,
    )
    if family == "Qwen3":
        settings["head_dim"] = 8
    return getattr(transformers, f"{family}Config")(**{**settings, **overrides})


def random_model(family="Llama", **overrides):
    torch.manual_seed(0)
    reference = getattr(transformers, f"{family}ForCausalLM")(config_of(family, **overrides)).double().eval()
    with torch.no_grad():  # every weight random, norms included: nothing hides behind ones
        for p in reference.parameters():
            p.copy_(torch.randn_like(p) * 0.3 + (0.5 if p.dim() == 1 else 0.0))
    return reference


def _rms_norm_in_input_dtype(self, hidden_states):
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


def _rotary_in_float64(self, x, position_ids):
    head_dim = self.inv_freq.shape[0] * 2
    base = self.config.rope_parameters["rope_theta"]
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    freqs = position_ids[..., None].to(torch.float64) * inv_freq
    angles = torch.cat((freqs, freqs), dim=-1)
    return angles.cos().to(x.dtype), angles.sin().to(x.dtype)


@pytest.fixture
def float64_reference(monkeypatch):
    """transformers computes RMSNorm and the RoPE tables in float32 even in a float64 model (about 3e-7
    on these logits): in float64 here, so that 1e-10 tests the function, not float32 rounding."""
    for module in (modeling_llama, modeling_qwen3):
        prefix = "Llama" if module is modeling_llama else "Qwen3"
        monkeypatch.setattr(getattr(module, f"{prefix}RMSNorm"), "forward", _rms_norm_in_input_dtype)
        monkeypatch.setattr(getattr(module, f"{prefix}RotaryEmbedding"), "forward", _rotary_in_float64)


def test_from_llama_computes_llama_for_causal_lm_logits(float64_reference):
    tokens = torch.randint(0, VOCAB, (3, 20))
    for kv_heads, tied in ((2, False), (4, True), (1, False)):
        reference = random_model(num_key_value_heads=kv_heads, tie_word_embeddings=tied)
        ours = GPT.from_llama(reference).eval()
        assert ours.config.tie_weights == tied and (ours.lm_head.weight is ours.token_embed.weight) == tied
        assert ours.blocks[0].attn.kv_heads == kv_heads
        torch.testing.assert_close(ours(tokens), reference(tokens).logits, rtol=0, atol=1e-10)
    # A state dict beside its config is the same model.
    reference = random_model()
    from_state = GPT.from_llama(reference.state_dict(), llama_config=reference.config).eval()
    torch.testing.assert_close(from_state(tokens), reference(tokens).logits, rtol=0, atol=1e-10)


def test_unpatched_transformers_differs_from_ours_by_float32_rounding_only():
    reference = random_model()
    tokens = torch.randint(0, VOCAB, (2, 12))
    gap = (GPT.from_llama(reference).eval()(tokens) - reference(tokens).logits).abs().max()
    assert 1e-12 < gap < 1e-5


@pytest.mark.slow  # transformers' generate takes about 3 s here
def test_from_llama_greedy_generation_is_transformers_generate(float64_reference):
    reference = random_model()
    ours = GPT.from_llama(reference).eval()
    prompts = torch.randint(1, VOCAB, (3, 5))
    expected = reference.generate(prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=8, do_sample=False)
    assert torch.equal(ours.generate(prompts, max_new_tokens=8, temperature=0.0), expected)
    # Ragged prompts, padded on the left (transformers' positions then start at each row's first token).
    padding = torch.tensor([[True, True, False, False, False], [False] * 5, [True, False, False, False, False]])
    ragged = prompts.masked_fill(padding, 0)
    expected = reference.generate(ragged, attention_mask=(~padding).long(), max_new_tokens=8, do_sample=False)
    assert torch.equal(ours.generate(ragged, max_new_tokens=8, temperature=0.0, padding_mask=padding), expected)


def test_from_qwen3_computes_qwen3_for_causal_lm_logits_with_qk_norm(float64_reference):
    reference = random_model("Qwen3")
    ours = GPT.from_qwen3(reference).eval()
    assert ours.config.qk_norm and ours.blocks[0].attn.q_norm is not None
    tokens = torch.randint(0, VOCAB, (3, 16))
    expected = reference(tokens).logits
    torch.testing.assert_close(ours(tokens), expected, rtol=0, atol=1e-10)
    prompts = torch.randint(1, VOCAB, (2, 4))
    generated = reference.generate(prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=6, do_sample=False)
    assert torch.equal(ours.generate(prompts, max_new_tokens=6, temperature=0.0), generated)
    # The per-head norms are part of the function: with their weights at one the logits move.
    with torch.no_grad():
        for block in ours.blocks:
            block.attn.q_norm.weight.fill_(1.0)
    assert (ours(tokens) - expected).abs().max() > 1e-6


def test_llama_features_this_gpt_cannot_compute_are_refused():
    refused = {
        "rope_type 'linear' (rope_scaling)": dict(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0}),
        "attention_bias=True": dict(attention_bias=True),
        "mlp_bias=True": dict(mlp_bias=True),
        "hidden_act 'gelu'": dict(hidden_act="gelu"),
    }
    for reason, overrides in refused.items():
        with pytest.raises(ConfigError, match=re.escape(f"The Llama config has {reason}")):
            GPT.from_llama(transformers.LlamaForCausalLM(config_of("Llama", **overrides)))
    with pytest.raises(ConfigError, match="The Qwen3 config has sliding-window layers"):
        GPT.from_qwen3(
            transformers.Qwen3ForCausalLM(config_of("Qwen3", use_sliding_window=True, sliding_window=8, max_window_layers=1))
        )
    state_dict = transformers.LlamaForCausalLM(config_of("Llama")).state_dict()
    with pytest.raises(ConfigError, match="A Llama state dict does not say its heads"):
        GPT.from_llama(state_dict)
    with pytest.raises(ConfigError, match="Unexpected Llama weight 'layers.0.mlp.w3.weight'"):
        GPT.from_llama({**state_dict, "model.layers.0.mlp.w3.weight": torch.zeros(1)}, llama_config=config_of("Llama"))


def tiny(config_class, **fields):
    settings = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=0,
    )
    return getattr(transformers, config_class)(**{**settings, **fields})


def test_a_mistral_without_a_window_shorter_than_its_context_computes_as_transformers(float64_reference, monkeypatch):
    from transformers.models.mistral import modeling_mistral

    monkeypatch.setattr(modeling_mistral.MistralRMSNorm, "forward", _rms_norm_in_input_dtype)
    monkeypatch.setattr(modeling_mistral.MistralRotaryEmbedding, "forward", _rotary_in_float64)
    for window in (None, 32):  # no window, or one as long as the context
        torch.manual_seed(0)
        reference = transformers.MistralForCausalLM(tiny("MistralConfig", sliding_window=window)).double().eval()
        ours = GPT.from_llama(reference).double().eval()
        tokens = torch.randint(0, VOCAB, (2, 12))
        torch.testing.assert_close(ours(tokens), reference(tokens).logits, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    "config_class, fields, said",
    [
        (
            "MistralConfig",
            {"sliding_window": 4},
            "The mistral config has sliding_window=4, which Llama's own config does not have",
        ),
        ("GemmaConfig", {"head_dim": 8}, "A 'gemma' model is not one GPT.from_llama computes"),
        ("Qwen2Config", {}, "A 'qwen2' model is not one GPT.from_llama computes"),
        ("Phi3Config", {"pad_token_id": 0}, "A 'phi3' model is not one GPT.from_llama computes"),
        ("GPT2Config", None, "A 'gpt2' model is not one GPT.from_llama computes (llama, mistral); use GPT.from_gpt2"),
    ],
)
def test_a_model_from_llama_would_take_by_its_names_but_not_compute_is_refused(config_class, fields, said):
    """Found from the config classes: a model type the port does not compute, and a field Llama's own config
    does not have (Mistral's window shorter than the context gave logits 0.34 away from transformers')."""
    config = (
        transformers.GPT2Config(vocab_size=VOCAB, n_positions=16, n_embd=32, n_layer=1, n_head=4)
        if fields is None
        else tiny(config_class, **fields)
    )
    with pytest.raises(ConfigError, match=re.escape(said)):
        GPT.from_llama(transformers.AutoModelForCausalLM.from_config(config))


def test_a_llama_config_with_metadata_of_its_own_is_ported(float64_reference):
    """Keys a config.json carries besides the class's fields (SmolLM2's is_llama_config, an older conversion's
    max_sequence_length) change nothing and are not refused."""
    reference = random_model("Llama")
    reference.config.is_llama_config, reference.config.max_sequence_length = True, 2048
    ours = GPT.from_llama(reference).double().eval()
    tokens = torch.randint(0, VOCAB, (2, 12))
    torch.testing.assert_close(ours(tokens), reference(tokens).logits, rtol=1e-10, atol=1e-10)
