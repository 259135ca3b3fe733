"""The resolved `config.yaml` of every run, what a resume with other settings keeps of the old one, and the
tokenizer the run's text was encoded with (`tokenizer.json`), so that a copied run can still decode text."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import yaml
from lightning.pytorch.cli import SaveConfigCallback

from datamodules.text_tokenizers import HFTokenizer
from lit_attention.atomic_files import replace_file

# Settings whose change on resume is not worth a warning.
RESUME_IGNORED_SETTINGS = ("ckpt_path", "config")


class RunConfigSaver(SaveConfigCallback):
    """Lightning's config writer, writing `config.yaml` into the run directory `run_dir` (Lightning's own
    writes into the first logger's directory, which a user's CSVLogger or MLflow logger puts elsewhere).
    Resuming with other settings is allowed (more steps, more GPUs, a lower learning rate) but never
    silent: before the run's config.yaml is replaced, the changes are printed and the earlier file is
    kept next to it as `config.before_resume_<n>.yaml`."""

    def __init__(self, parser, config, run_dir: str | Path | None = None, **kwargs) -> None:
        super().__init__(parser, config, **{**kwargs, "save_to_log_dir": False})
        self.run_dir = run_dir

    def save_config(self, trainer, pl_module, stage: str) -> None:  # rank 0 only
        if self.run_dir is None:
            return
        run_dir = Path(self.run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        config = self.parser.dump(self.config, skip_none=False)
        keep_config_on_change(run_dir, config)
        (run_dir / self.config_filename).write_text(config)
        save_tokenizer(run_dir, trainer.datamodule)


TOKENIZER_FILE = "tokenizer.json"


def save_tokenizer(run_dir: Path, datamodule) -> Path | None:
    """The data's tokenizer as `run_dir/tokenizer.json` when it is a `tokenizers` file (a trained BPE, a
    pretrained one), which otherwise lives only in the data folder; the byte tokenizer needs no file. The
    DataModule has set up by now (Lightning sets it up before the callbacks)."""
    # A language model's data encodes its files before setup and loads its tokenizer only when asked.
    tokenizer = datamodule.text_tokenizer() if hasattr(datamodule, "text_tokenizer") else getattr(datamodule, "tokenizer", None)
    if not isinstance(tokenizer, HFTokenizer):
        return None
    text = tokenizer.tokenizer.to_str(pretty=True)
    return replace_file(run_dir / TOKENIZER_FILE, lambda file: file.write(text.encode("utf-8")))


def keep_config_on_change(run_dir: Path, new_config: str) -> Path | None:
    """If `run_dir/config.yaml` exists and differs from `new_config` (beyond the ignored settings), copy
    it to `config.before_resume_<n>.yaml`, print what changed, and return the copy."""
    saved = run_dir / "config.yaml"
    if not saved.is_file():
        return None
    before = _flatten(yaml.safe_load(saved.read_text()) or {})
    now = _flatten(yaml.safe_load(new_config) or {})
    changed = [
        key
        for key in sorted(before.keys() | now.keys())
        if key.split(".")[0] not in RESUME_IGNORED_SETTINGS and before.get(key) != now.get(key)
    ]
    if not changed:
        return None
    number = 1
    while (kept := run_dir / f"config.before_resume_{number}.yaml").exists():
        number += 1
    shutil.copy2(saved, kept)
    listed = ", ".join(f"{key} {before.get(key)!r} -> {now.get(key)!r}" for key in changed[:8])
    print(
        f"warning: resuming {run_dir} with changed settings: {listed}; the earlier config is kept as {kept.name}.",
        file=sys.stderr,
    )
    return kept


def _flatten(tree, prefix: str = "") -> dict:
    """{"a.b.c": leaf} for nested dicts (lists stay leaves)."""
    if not isinstance(tree, dict):
        return {prefix: tree}
    flat = {}
    for key, value in tree.items():
        flat.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat
