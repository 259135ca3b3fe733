#!/bin/bash
# Two nodes x 8 GPUs with SLURM: sbatch recipes/slurm_multi_node.sh recipes/nonlinear_query/gpt3_small.yaml
# One task per GPU; Lightning's SLURM environment plugin reads the ranks SLURM assigns. A recipe that states
# run.global_batch_size (gpt3_small.yaml) keeps it: the per-GPU batch and accumulation follow the layout.
#SBATCH --job-name=lit-attention
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=8
#SBATCH --time=48:00:00
#SBATCH --output=%x-%j.out
set -euo pipefail
RECIPE=${1:?usage: sbatch recipes/slurm_multi_node.sh <recipe.yaml> [extra lit-attention arguments]}
shift
# Tokenize the corpus once, in this one process, before the tasks start: they would wait for it at a
# barrier that gives up after 30 minutes (a prepared corpus is found at once).
.venv/bin/lit-attention prepare --config "$RECIPE" "$@"
srun .venv/bin/lit-attention fit --config "$RECIPE" --config recipes/trainer/multi_node.yaml \
    --trainer.num_nodes "$SLURM_NNODES" --trainer.devices "$SLURM_GPUS_PER_NODE" "$@"
