"""`lit-attention export`: a trained run as a folder a user can share (weights in safetensors, config.json,
the tokenizer, a model card), loadable with `lit_attention.modeling.pretrained.from_pretrained`.

May import: lit_attention.analysis (a run's checkpoint, loaded), lit_attention.training,
lit_attention.modeling, datamodules."""
