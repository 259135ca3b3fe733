"""What Lightning costs: the same model and data through `Trainer.fit` and through a plain loop.

    python benchmarks/lightning_overhead.py
    python benchmarks/lightning_overhead.py --device cuda --steps 300

Both paths run the same LightningModule's training_step math (forward, cross-entropy, accuracy
update, backward, AdamW with the same warm-up cosine schedule) on the same in-memory batches. The Trainer runs
without logger, checkpoints, progress bar or validation, as a long run spends most of its time;
the ratio (plain time / Trainer time) is its throughput relative to the plain loop.
"""

from __future__ import annotations

import argparse
import statistics
import time

import lightning as L
import torch
import torch.nn.functional as F
from timing import hardware, synchronize
from torch.utils.data import DataLoader, TensorDataset

from lit_attention.training.tasks import CausalLanguageModel


def make_module(args) -> CausalLanguageModel:
    torch.manual_seed(0)
    return CausalLanguageModel(
        net=dict(vocab_size=args.vocab, max_len=args.context, dim=args.dim, depth=args.depth, num_heads=args.heads),
        warmup_steps=10,
    )


def loader(args) -> DataLoader:
    tokens = torch.randint(0, args.vocab, (args.steps * args.batch, args.context + 1), generator=torch.Generator().manual_seed(0))
    return DataLoader(TensorDataset(tokens[:, :-1], tokens[:, 1:]), batch_size=args.batch)


def plain_loop(args, device) -> float:
    module = make_module(args).to(device)
    optimizer, scheduler = module.optimizer_and_schedule(args.steps)  # what configure_optimizers builds
    synchronize(device)
    start = time.perf_counter()
    for inputs, targets in loader(args):
        inputs, targets = inputs.to(device), targets.to(device)
        logits = module.model(inputs)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
        module.train_accuracy.update(logits.detach().argmax(dim=-1), targets)  # as training_step does
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
    synchronize(device)
    return time.perf_counter() - start


def lightning_fit(args, device) -> float:
    module = make_module(args)
    trainer = L.Trainer(
        accelerator=device.type,
        devices=1,
        max_steps=args.steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
    )
    start = time.perf_counter()
    trainer.fit(module, loader(args))
    synchronize(device)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--dim", type=int, default=192)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    device = torch.device(args.device)
    lightning_fit(args, device)  # warm-up: imports, kernel selection, allocator
    plain, fit = [], []
    for _ in range(args.repeats):
        plain.append(plain_loop(args, device))
        fit.append(lightning_fit(args, device))
    plain_s, fit_s = statistics.median(plain), statistics.median(fit)
    print(
        f"# Trainer.fit vs plain loop, {args.steps} steps of GPT d={args.dim} depth={args.depth} "
        f"T={args.context} B={args.batch}, on {hardware(device)}; median of {args.repeats}"
    )
    print()
    print("| path | seconds | steps/s | throughput vs plain loop |")
    print("|---|---|---|---|")
    print(f"| plain PyTorch loop | {plain_s:.2f} | {args.steps / plain_s:.1f} | 1.00 |")
    print(f"| Lightning Trainer.fit | {fit_s:.2f} | {args.steps / fit_s:.1f} | {plain_s / fit_s:.2f} |")


if __name__ == "__main__":
    main()
