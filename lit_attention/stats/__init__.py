"""The numbers behind every claim a report makes, as plain functions of plain values: paired intervals,
sign-flip and exact tests, Holm (statistics); intervals over seeds and test items (item_statistics);
slopes over sizes (trend_statistics); scaling-law fits (scaling_laws); the compute a baseline needs to reach
a variant's loss, read from its ladder of budgets (compute_multiplier); which grid point each arm is scored at
(selection); and whether two arms may be compared at all (validity).

May import: nothing of the project but lit_attention.errors (numpy and the standard library only), so
that each function can be read and tested alone."""
