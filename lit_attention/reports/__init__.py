"""What a sweep's report says, written from the records on disk only: results.md, results.csv,
timings.csv and results.png (report), the comparison tables over seeds (comparisons) and over seeds and
test items (item_comparisons), the cross-fit tables (cross_fits), the budget and n-gram-floor notes
(budget, floors), the re-run check of --verify (verification), --inspect's section (inspection), and
how numbers are written (tables).

May import: lit_attention.sweep, lit_attention.stats, lit_attention.analysis, lit_attention.training,
lit_attention.modeling, datamodules. Never scaling/ or the compare command."""
