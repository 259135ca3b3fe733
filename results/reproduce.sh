#!/usr/bin/env bash
# FIRST EDITION: this script and the tables it writes belong to commit abea12a. Since then `compare`
# became a sweep engine (grids, paired statistics, records on disk) and the helper scripts it calls
# were retired; run it from that commit: git worktree add ../first-edition abea12a.
# Reproduces every table in RESULTS.md with `lit-attention compare` on a CPU machine.
#   bash results/reproduce.sh [vit | vit_lr | vit_control | gpt | gpt_control | mqar | mqar_lr | mqar_init | all]
# Each section writes results/<section>/.../results.{md,csv,png} and TensorBoard runs next to them
# (the tensorboard/ subfolders, with checkpoints, are git-ignored). RESULTS.md states the wall time
# each section took.
set -euo pipefail
cd "$(dirname "$0")/.."
compare() { .venv/bin/lit-attention compare "$@"; }
VIT=recipes/quickstart/vit_digits.yaml
GPT=recipes/quickstart/gpt_stdlib.yaml
MQAR=recipes/diagnostics/mqar.yaml

vit() {          # ViT on the embedded digits: 7 presets x 3 seeds, the recipe as committed; --test adds
                 # the accuracy of each run's best checkpoint on the 360 held-out test images
    compare --config $VIT --variants all --seeds 3 --test --output results/vit_digits
}
vit_lr() {       # the same at three other peak learning rates (recipe: 4e-3), 2 seeds each
    for lr in 1e-3 2e-3 8e-3; do
        compare --config $VIT --variants all --seeds 2 --model.init_args.lr $lr --output results/vit_digits_lr/lr_$lr
    done
    # with the recipe's 4e-3 from the `vit` section (3 seeds)
    .venv/bin/python results/sweep_table.py results/vit_digits_lr/accuracy_vs_lr.png "peak learning rate" \
        results/vit_digits_lr/lr_* results/vit_digits=4e-3
}
vit_control() {  # standard attention with MLP width 1.0 d: the same parameter count as `efficient`
    compare --config $VIT --variants standard --seeds 3 --test --model.init_args.mlp_ratio 1.0 \
        --output results/vit_digits_control
}
gpt() {          # byte-level GPT on the stdlib sources: 300 steps x 32 x 128 = 1.2M tokens per run
    compare --config $GPT --variants all --seeds 3 --output results/gpt_stdlib
}
gpt_control() {  # standard attention with MLP width 3 d: the same parameter count as `efficient`
    compare --config $GPT --variants standard --seeds 3 --model.init_args.mlp_ratio 3.0 \
        --output results/gpt_stdlib_control
}
mqar() {         # associative recall as the number of key-value pairs grows (MQAR_PAIRS="2 4 8")
    for pairs in ${MQAR_PAIRS:-2 4 8}; do
        compare --config $MQAR --variants all --seeds 3 --data.init_args.num_kv_pairs $pairs \
            --output results/mqar/kv_$pairs
    done
    .venv/bin/python results/sweep_table.py results/mqar/accuracy_vs_pairs.png "key-value pairs" results/mqar/kv_*
}
mqar_lr() {      # 4 pairs at two other peak learning rates (recipe: 3e-3), 2 seeds each
    for lr in 1e-3 1e-2; do
        compare --config $MQAR --variants all --seeds 2 --model.init_args.lr $lr --output results/mqar_lr/lr_$lr
    done
    .venv/bin/python results/sweep_table.py results/mqar_lr/accuracy_vs_lr.png "peak learning rate" \
        results/mqar_lr/lr_* results/mqar/kv_4=3e-3
}
mqar_init() {    # a wider init, N(0, 1/sqrt(d)) instead of GPT-2's N(0, 0.02), 2 seeds: 4 pairs, then 8
    compare --config $MQAR --variants all --seeds 2 --model.init_args.init_std 0.125 \
        --output results/mqar_init/std_0.125
    .venv/bin/python results/sweep_table.py results/mqar_init/accuracy_vs_init.png "init std" \
        results/mqar_init/std_0.125 results/mqar/kv_4=0.02
    compare --config $MQAR --variants all --seeds 2 --model.init_args.init_std 0.125 \
        --data.init_args.num_kv_pairs 8 --output results/mqar_init/kv_8_std_0.125
    .venv/bin/python results/sweep_table.py results/mqar_init/accuracy_vs_init_8_pairs.png "init std" \
        results/mqar_init/kv_8_std_0.125 results/mqar/kv_8=0.02
}

sections=("${@:-all}")
[ "${sections[0]}" = all ] && sections=(vit vit_lr vit_control gpt gpt_control mqar mqar_lr mqar_init)
for section in "${sections[@]}"; do
    case $section in
        vit|vit_lr|vit_control|gpt|gpt_control|mqar|mqar_lr|mqar_init) ;;
        *) echo "error: unknown section '$section'; valid sections are vit, vit_lr, vit_control, gpt, gpt_control, mqar, mqar_lr, mqar_init, all." >&2; exit 2 ;;
    esac
done
for section in "${sections[@]}"; do
    start=$SECONDS
    "$section"
    echo "section $section took $((SECONDS - start)) s"
done
