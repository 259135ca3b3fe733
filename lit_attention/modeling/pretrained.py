"""A model as a folder a user can share, and back: `save_pretrained` writes `config.json` (the family, its
config and the attention variant) and `model.safetensors` (the weights, each tied tensor once), and
`from_pretrained` builds the plain nn.Module again from a folder, or from a Hugging Face Hub repository
through huggingface_hub's download (and its cache, so a repository pulled once loads offline).

    model = from_pretrained("exported/vit_digits_super")      # the VisionTransformer, in eval mode
    logits = model(images)

`lit-attention export` (lit_attention/sharing/) writes such a folder from a trained run, with the run's
tokenizer and a model card beside it. No Lightning here: the folder needs only this package and torch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from torch import nn

from lit_attention.atomic_files import replace_file
from lit_attention.errors import ConfigError
from lit_attention.modeling.gpt import GPT, GPTConfig
from lit_attention.modeling.seq2seq import Seq2SeqConfig, Seq2SeqTransformer
from lit_attention.modeling.text_encoder import TextEncoderClassifier, TextEncoderConfig
from lit_attention.modeling.variants import AttentionSpec, resolve_spec
from lit_attention.modeling.vit import ViTConfig, VisionTransformer

FORMAT = "lit-attention"
CONFIG_FILE, WEIGHTS_FILE = "config.json", "model.safetensors"
# The model classes a folder may hold, by the name config.json gives, each with its config class.
MODELS = {
    model.__name__: (model, config)
    for model, config in (
        (GPT, GPTConfig),
        (TextEncoderClassifier, TextEncoderConfig),
        (Seq2SeqTransformer, Seq2SeqConfig),
        (VisionTransformer, ViTConfig),
    )
}


def save_pretrained(
    model: nn.Module, attention: str | dict | AttentionSpec, folder: str | os.PathLike, about: dict | None = None
) -> Path:
    """Write `model` (one of MODELS, built with `attention`) into `folder`: config.json, with `about` (what
    the folder's maker adds: the run, the data, the version) under its own key, and model.safetensors."""
    from safetensors.torch import save

    model = getattr(model, "_orig_mod", model)  # a torch.compile'd model's own module
    if type(model).__name__ not in MODELS:
        raise ConfigError(f"save_pretrained takes one of {', '.join(MODELS)}, got {type(model).__name__}.")
    folder = Path(folder)
    config = {
        "format": FORMAT,
        "model": type(model).__name__,
        "config": model.config.to_dict(),
        "attention": resolve_spec(attention).to_dict(),
        "about": about or {},
    }
    replace_file(folder / CONFIG_FILE, lambda file: file.write((json.dumps(config, indent=1) + "\n").encode("utf-8")))
    weights = save(distinct_tensors(model), metadata={"format": "pt"})
    replace_file(folder / WEIGHTS_FILE, lambda file: file.write(weights))
    return folder


def distinct_tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    """The state dict with each tensor once: a tied head (GPT's lm_head, the token embedding's weight) is kept
    under the first name that holds it, as safetensors stores no tensor twice; the model ties it again."""
    found, seen = {}, set()
    for name, tensor in model.state_dict().items():
        key = storage_key(tensor)
        if key not in seen:
            seen.add(key)
            found[name] = tensor.detach().contiguous().cpu()
    return found


def storage_key(tensor: torch.Tensor) -> tuple:
    """What two names of one tied tensor share: its storage, where in it the tensor starts, and its shape."""
    return tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape)


def from_pretrained(source: str | os.PathLike, device: str | torch.device = "cpu") -> nn.Module:
    """The model a folder written by `save_pretrained` (or `lit-attention export`) holds, in eval mode on
    `device`. `source` is that folder, or a Hub repository's id (`user/name`) downloaded into the cache."""
    from safetensors.torch import load_file

    folder = _folder_of(source)
    try:
        config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ConfigError(
            f"{str(folder)!r} holds no readable {CONFIG_FILE} ({error}); give a folder that `lit-attention export` wrote."
        ) from None
    if config.get("format") != FORMAT or config.get("model") not in MODELS:
        raise ConfigError(
            f"{str(folder / CONFIG_FILE)!r} is not a lit-attention model's config (format "
            f"{config.get('format')!r}, model {config.get('model')!r}); models are {', '.join(MODELS)}."
        )
    model_class, config_class = MODELS[config["model"]]
    model = model_class(config_class.of(config["config"]), config["attention"])
    state = load_file(str(folder / WEIGHTS_FILE))
    missing, unexpected = model.load_state_dict(state, strict=False)
    # A name the file leaves out is fine where the model ties it to one the file holds (distinct_tensors).
    own = model.state_dict()
    held = {storage_key(own[name]) for name in state if name in own}
    tied = {name for name in missing if storage_key(own[name]) in held}
    if set(missing) - tied or unexpected:
        raise ConfigError(
            f"{str(folder / WEIGHTS_FILE)!r} does not fit {config['model']} with its config.json "
            f"(missing {sorted(set(missing) - tied)[:3]}, unexpected {sorted(unexpected)[:3]})."
        )
    return model.to(device).eval()


def _folder_of(source: str | os.PathLike) -> Path:
    """`source` as a local folder: itself, or the Hub repository it names, downloaded (or found in the cache)."""
    path = Path(source)
    if path.is_dir():
        return path
    text = str(source)
    if path.exists() or text.count("/") != 1 or text.startswith((".", "/", "~")):
        raise ConfigError(
            f"{text!r} is neither a folder nor a Hub repository's id (user/name); give the folder "
            "`lit-attention export` wrote, or the repository it was pushed to."
        )
    import huggingface_hub
    from huggingface_hub.errors import HfHubHTTPError, HFValidationError, LocalEntryNotFoundError

    try:
        return Path(
            huggingface_hub.snapshot_download(text, allow_patterns=[CONFIG_FILE, WEIGHTS_FILE, "tokenizer.json", "README.md"])
        )
    except HFValidationError:
        raise ConfigError(
            f"{text!r} is neither a folder nor a valid Hub repository's id (user/name); give the folder "
            "`lit-attention export` wrote, or the repository it was pushed to."
        ) from None
    except (LocalEntryNotFoundError, HfHubHTTPError, OSError) as error:
        raise ConfigError(
            f"Hub repository {text!r} could not be fetched ({type(error).__name__}), and it is not in "
            "the Hub's local cache; check the name, or go online once (HF_HUB_OFFLINE unset)."
        ) from None
