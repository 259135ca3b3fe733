"""The model card (README.md) of an exported run: what the model is (family, sizes, the attention variant),
how it was trained (recipe, data, seed, steps, version and commit) and what its record measured, each
number as the record holds it; a run without a record says so rather than guessing."""

from __future__ import annotations

from lit_attention.markdown import markdown_table


def model_card(about: dict, config: dict, folder: str) -> str:
    """The card's Markdown from `about` (what export gathers: variant, model, data, record) and the config;
    `folder`: where the export was written, as the load line names it."""
    record = about.get("record") or {}
    lines = [
        f"# {about['model']} with `{about['variant']}` attention",
        "",
        f"Trained with lit-attention {about['lit_attention']} and exported by `lit-attention export`. Load it with:",
        "",
        "```python",
        "from lit_attention.modeling.pretrained import from_pretrained",
        "",
        f'model = from_pretrained("{folder}")  # or the Hub repository it was pushed to, "user/name"',
        "```",
        "",
    ]
    model_rows = [["family", about["model"]], ["attention", f"`{about['variant']}`"]]
    model_rows += [[name, f"`{value}`"] for name, value in config.items() if value is not None]
    lines += ["## The model", "", markdown_table(["", "value"], model_rows), ""]
    data = about.get("data") or {}
    training = [
        ["recipe", f"`{record.get('recipe', about.get('recipe') or 'unknown')}`"],
        ["data", f"`{data.get('class', 'unknown')}`"],
        *([[f"data: {k}", f"`{v}`"] for k, v in sorted((data.get("arguments") or {}).items()) if v is not None]),
        ["tokenizer", about.get("tokenizer") or "none (images)"],
        ["seed", str(record.get("seed", "unknown"))],
        ["optimizer steps", str(record.get("optimizer_steps", about.get("step", "unknown")))],
        ["commit", f"`{(record.get('provenance') or {}).get('commit') or 'not recorded'}`"],
    ]
    lines += ["## How it was trained", "", markdown_table(["", "value"], training), ""]
    if not record:
        lines += [
            "## What it measured",
            "",
            "No record describes these weights (the run did not finish, or the "
            "checkpoint exported is not the one its record.json was written at), so no metric is given here.",
            "",
        ]
        return "\n".join(lines)
    measured = []
    if record.get("best"):
        best = record["best"]
        measured.append(
            [f"best {record.get('monitor', 'validation value')}", f"{best['value']:.6g}", f"at step {best.get('step')}"]
        )
    scored = f"the {record.get('test_checkpoint') or 'best'} checkpoint, test split"
    measured += [[name, f"{value:.6g}", scored] for name, value in sorted((record.get("test") or {}).items())]
    measured += [[f"parameters ({kind})", f"{count:,}", ""] for kind, count in (record.get("params") or {}).items()]
    lines += [
        "## What it measured",
        "",
        "From the run's record.json, one seed: a comparison between variants needs several (`lit-attention compare`).",
        "",
        markdown_table(["measure", "value", "where"], measured),
        "",
    ]
    return "\n".join(lines)
