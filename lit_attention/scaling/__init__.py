"""Model size as an axis: the sizes of `compare --scale` and their budgets (sizes), one sweep per size
(sweep), the scaling-law fits and multipliers over sizes (fits, from each size's tuned runs: size_runs),
the tuned learning rate against size (rates), the scaling section and figure (fit_section), the report
over every size (report), and `compare --trend`, how a difference changes with size over separate
sweeps (trend).

May import: lit_attention.reports, lit_attention.sweep, lit_attention.stats, lit_attention.analysis,
lit_attention.training, lit_attention.modeling, datamodules. Never the compare command."""
