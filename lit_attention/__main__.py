"""`python -m lit_attention` is the `lit-attention` command."""

from lit_attention.main import main

main()
