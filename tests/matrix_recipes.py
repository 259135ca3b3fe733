"""The recipes tests/test_multiprocess_matrix.py trains, resumes and tests as they ship, on one process, DDP
and FSDP: every quickstart and one study recipe of each family (the translation recipe on offline pairs).
test_recipes_run.py leaves them out of its fast_dev_run list."""

MATRIX = [
    "quickstart/vit_digits.yaml",
    "quickstart/text_stdlib.yaml",
    "quickstart/gpt_stdlib.yaml",
    "quickstart/gpt_llama_stdlib.yaml",
    "studies/vit_digits_500.yaml",
    "studies/text_stdlib.yaml",
    "studies/gpt_stdlib_small.yaml",
    "super_attention/translation_en_es.yaml",
]
