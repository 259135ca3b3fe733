"""The training run (Lightning): the tasks (LightningModules), the `fit / validate / test / predict`
command line, its callbacks, checkpoints, run directories and run records. Depends on
`lit_attention.modeling` and `datamodules`, never on the sweep engine (stats, sweep, reports, scaling)."""
