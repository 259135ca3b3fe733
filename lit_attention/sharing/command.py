"""`lit-attention export RUN --to DIR`: a trained run as a folder a user can share and load without this
suite's runs or data: model.safetensors and config.json (modeling/pretrained.py), the tokenizer the run
encoded its text with (tokenizer.json, where the run kept one), and README.md, a model card that states
the variant, the recipe, the data and what the run's record measured (model_card.py).

    lit-attention export runs/quickstart/vit_digits/super/seed_0/version_0 --to exported/vit_digits_super

`--to` is a new or empty folder, or one an earlier export wrote (its files are replaced, and those this export
does not write again removed); any other folder is refused before anything is read, so no user file is
overwritten. `--push USER/NAME` then uploads the folder to the Hugging Face Hub (sharing/hub.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import lit_attention
from lit_attention.analysis.command import SentenceParser
from lit_attention.atomic_files import replace_file
from lit_attention.errors import ConfigError
from lit_attention.modeling.pretrained import CONFIG_FILE, FORMAT, save_pretrained
from lit_attention.sharing.hub import check_repo_id, push
from lit_attention.sharing.model_card import model_card
from lit_attention.training.run_config import TOKENIZER_FILE

CARD_FILE = "README.md"
TRANSFORMERS = "transformers"  # the transformers copy of --transformers


def parser() -> argparse.ArgumentParser:
    found = SentenceParser(
        prog="lit-attention export",
        description=__doc__.split("\n\n")[0],
        allow_abbrev=False,
        epilog="example:\n  lit-attention export runs/quickstart/vit_digits/super/seed_0/version_0 "
        "--to exported/vit_digits_super",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    found.add_argument(
        "run",
        metavar="RUN_OR_CKPT",
        help="a trained run's directory (its best checkpoint, else "
        "last.ckpt), a seed's directory (its newest run) or a .ckpt file",
    )
    found.add_argument("--to", required=True, metavar="DIR", help="the folder to write: new, empty, or an earlier export")
    found.add_argument(
        "--transformers",
        action="store_true",
        help="also write DIR/transformers/, the model as "
        "transformers' GPT2LMHeadModel (a GPT of GPT-2's shape: standard attention, learned positions, "
        "LayerNorm, the GELU MLP, a tied head) or LlamaForCausalLM (Llama's: rope, rmsnorm, swiglu, no "
        "biases; Qwen3ForCausalLM with qk_norm)",
    )
    found.add_argument(
        "--push",
        metavar="USER/NAME",
        help="then upload DIR to this Hugging Face Hub model repository (created if missing; needs `hf auth "
        "login`), from which from_pretrained('USER/NAME') loads it",
    )
    found.add_argument("--private", action="store_true", help="with --push: create the repository private")
    return found


def check_destination(folder: Path) -> None:
    """A new or empty folder, or an earlier export's; anything else holds files this command must not replace."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--to {str(folder)!r} is a file; give a folder to export into.")
    if not folder.is_dir() or not any(folder.iterdir()):
        return
    try:
        earlier = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8")).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        earlier = False
    if not earlier:
        raise ConfigError(
            f"--to {str(folder)!r} holds files that no export wrote; give a new or empty folder (or an "
            "earlier export's, whose files are replaced)."
        )


def tokenizer_of(run_dir: Path | None, data_arguments: dict, folder: Path) -> str | None:
    """Copy the run's tokenizer.json into `folder` where it kept one; what the card says of the tokenizer."""
    kept = None if run_dir is None else run_dir / TOKENIZER_FILE
    if kept is not None and kept.is_file():
        text = kept.read_bytes()
        replace_file(folder / TOKENIZER_FILE, lambda file: file.write(text))
        return f"`{TOKENIZER_FILE}` (the `tokenizers` file the run encoded its text with)"
    name = data_arguments.get("tokenizer")
    if name is None:
        return None
    if name == "bytes":
        return "bytes: ids 0-255 are the bytes of UTF-8 text (no file needed)"
    return (
        f"`{name}`, not kept: the run was trained before runs kept their tokenizer; the data's folder holds it "
        "(data_dir/tokenizers)"
    )


def run(argv: list[str]) -> None:
    from lit_attention.analysis.loading import load_run

    args = parser().parse_args(argv)
    folder = Path(args.to)
    if not Path(args.run).exists():  # said here in export's words (load_run's name inspect's --ckpt_path)
        raise ConfigError(
            f"export: {args.run!r} does not exist; pass a trained run's directory "
            "(runs/<recipe>/<variant>/seed_<n>/version_<k>), a seed's directory or a .ckpt file."
        )
    check_destination(folder)
    if args.private and not args.push:
        raise ConfigError("export: --private applies to --push; add --push USER/NAME, or drop --private.")
    if args.push:
        check_repo_id(args.push)
    loaded = load_run(args.run)
    model = getattr(loaded.task.model, "_orig_mod", loaded.task.model)
    reference = None
    if args.transformers:  # refused before anything is written when the model has no GPT-2 counterpart
        from lit_attention.modeling.transformers_export import to_transformers

        reference = to_transformers(model)
    record_file = None if loaded.run_dir is None else loaded.run_dir / "record.json"
    record = json.loads(record_file.read_text()) if record_file is not None and record_file.is_file() else None
    if record is not None and record.get("optimizer_steps") != loaded.step:
        record = None  # the record describes the run's end, not the checkpoint exported
    folder.mkdir(parents=True, exist_ok=True)
    # An earlier export's files that this one may not write again go first: a folder never mixes two models.
    (folder / TOKENIZER_FILE).unlink(missing_ok=True)
    shutil.rmtree(folder / TRANSFORMERS, ignore_errors=True)
    about = {
        "lit_attention": lit_attention.__version__,
        "model": type(model).__name__,
        "variant": loaded.task.spec.name,
        "task": loaded.hyper_parameters.get("_class_path"),
        "checkpoint": str(loaded.checkpoint),
        "step": loaded.step,
        "data": {"class": loaded.data_class, "arguments": loaded.data_arguments},
        "tokenizer": tokenizer_of(loaded.run_dir, loaded.data_arguments, folder),
        "record": record,
    }
    save_pretrained(model, loaded.task.spec, folder, about)
    card = model_card(about, loaded.task.config.to_dict(), str(folder))
    replace_file(folder / CARD_FILE, lambda file: file.write(card.encode("utf-8")))
    if reference is not None:
        reference.save_pretrained(folder / TRANSFORMERS)  # transformers' own files: config.json, model.safetensors
        if (folder / TOKENIZER_FILE).is_file():
            replace_file(folder / TRANSFORMERS / TOKENIZER_FILE, lambda file: file.write((folder / TOKENIZER_FILE).read_bytes()))
    print(
        f"Exported {loaded.checkpoint} (step {loaded.step}) to {folder}: {', '.join(sorted(p.name for p in folder.iterdir()))}; "
        f"load it with lit_attention.modeling.pretrained.from_pretrained({str(folder)!r}).",
        flush=True,
    )
    if args.push:
        address = push(folder, args.push, args.private, owned=[TOKENIZER_FILE, f"{TRANSFORMERS}/*"])
        print(f"Pushed {folder} to {address}; load it anywhere with from_pretrained({args.push!r}).", flush=True)
