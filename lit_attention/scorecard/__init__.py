"""`lit-attention scorecard`: one command that says what an attention variant is worth on a declared, versioned
set of offline tasks: the protocol (protocol.py, protocols/), the compare commands a card runs (plan.py), the
card's numbers from the records (card.py), its page and figure (report.py) and the command (command.py).

May import: everything below it (stats, sweep, reports, training, modeling) and lit_attention.compare, whose
sweeps it runs; nothing imports it but lit_attention.main."""
