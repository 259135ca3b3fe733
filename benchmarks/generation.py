"""Per-token latency of greedy generation: our cached GPT against transformers' GPT-2 with its cache.

    pip install -e ".[bench]"                      # transformers
    python benchmarks/generation.py                # d=128, 4 layers, 4 heads, prompt 32 + 256 and + 1024 tokens

Both sides compute the same function: ours is `GPT.from_gpt2` of the transformers model's weights
(biases, tanh GELU, tied head), and the prompt's logits are checked to agree before timing. Batch 1,
float32, one thread (torch.set_num_threads(1)), greedy. Per-token latency is the wall time of one
whole generation (prompt forward included) over the number of new tokens. Paths:

  transformers generate      GPT2LMHeadModel.generate(do_sample=False, use_cache=True), the call users make
  transformers forward loop  the same model called token by token with its cache, no generate() bookkeeping
  ours cached / uncached     GPT.generate(temperature=0) with use_cache=True / False (False re-runs the context)
  ours super cached          a `super` GPT of the same sizes (random weights), cached

Repeats alternate between the paths and the medians are reported, with ratios measured in the same run.
"""

from __future__ import annotations

import argparse
import os

import torch
from timing import hardware, median_interleaved

from lit_attention.modeling import GPT
from lit_attention.modeling import GPTConfig


def load_average() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def build_models(args):
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging

    logging.set_verbosity_error()  # generate() itself trips a deprecation notice on every call

    max_len = args.prompt + max(args.new_tokens)
    config = GPT2Config(
        vocab_size=args.vocab,
        n_positions=max_len,
        n_embd=args.dim,
        n_layer=args.depth,
        n_head=args.heads,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=None,
        pad_token_id=0,
        attn_implementation="sdpa",
    )
    reference = GPT2LMHeadModel(config).eval()
    reference.generation_config.eos_token_id = None  # generate exactly max_new_tokens, as ours does
    ours = GPT.from_gpt2(reference.state_dict(), num_heads=args.heads).eval()
    sup = GPT(
        GPTConfig(
            vocab_size=args.vocab,
            max_len=max_len,
            dim=args.dim,
            depth=args.depth,
            num_heads=args.heads,
            bias=True,
            activation="gelu_tanh",
        ),
        attention="super",
    ).eval()
    return reference, ours, sup


def reference_loop(model, prompt, new_tokens):
    """Greedy decoding with transformers' cache, calling the model directly."""
    tokens = [prompt]
    out = model(prompt, use_cache=True)
    for i in range(new_tokens):
        token = out.logits[:, -1].argmax(dim=-1, keepdim=True)
        tokens.append(token)
        if i + 1 < new_tokens:
            out = model(token, cache=out.past_key_values, use_cache=True)
    return torch.cat(tokens, dim=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--prompt", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device("cpu")
    before = load_average()

    reference, ours, sup = build_models(args)
    prompt = torch.randint(0, args.vocab, (1, args.prompt))
    with torch.no_grad():
        difference = (ours(prompt) - reference(prompt).logits).abs().max().item()
    assert difference < 1e-4, f"ours and transformers disagree on the prompt's logits by {difference}"

    import transformers

    print(f"# greedy generation, batch 1, prompt {args.prompt}, float32, on {hardware(device)}")
    print(
        f"# torch {torch.__version__}, transformers {transformers.__version__}; median of {args.repeats} "
        "interleaved repeats; ms per new token (whole generate call / new tokens)"
    )
    print(
        f"# d={args.dim}, {args.depth} layers, {args.heads} heads, vocab {args.vocab}, max_len {ours.max_len}; "
        f"prompt logits agree with transformers (max |difference| {difference:.1e})"
    )
    print()
    print("| new tokens | path | ms / token | vs transformers generate | vs transformers forward loop |")
    print("|---|---|---|---|---|")

    def paths(n: int) -> dict:
        return {
            "transformers generate": lambda: reference.generate(prompt, max_new_tokens=n, do_sample=False, use_cache=True),
            "transformers forward loop": lambda: reference_loop(reference, prompt, n),
            "ours standard, cached": lambda: ours.generate(prompt, n, temperature=0),
            "ours standard, uncached": lambda: ours.generate(prompt, n, temperature=0, use_cache=False),
            "ours super, cached": lambda: sup.generate(prompt, n, temperature=0),
        }

    summary = []
    for new_tokens in args.new_tokens:
        steps = paths(new_tokens)
        with torch.no_grad():
            for step in paths(min(new_tokens, 16)).values():  # warm-up, short
                step()
            outputs = {
                name: steps[name]() for name in ("transformers generate", "transformers forward loop", "ours standard, cached")
            }
            seconds = median_interleaved(steps, warmup=0, calls=1, repeats=args.repeats, device=device)
        ms = {name: 1e3 * s / new_tokens for name, s in seconds.items()}
        for name, value in ms.items():
            print(
                f"| {new_tokens} | {name} | {value:.3f} | {value / ms['transformers generate']:.2f} | "
                f"{value / ms['transformers forward loop']:.2f} |",
                flush=True,
            )
        same = all(torch.equal(out, outputs["ours standard, cached"]) for out in outputs.values())
        summary.append((new_tokens, ms, same))

    print()
    print(
        "| new tokens | ours cached / transformers generate (target ≤ 1.0) | ours cached / transformers loop | "
        "uncached / cached | super / standard, both cached (target ≤ 1.2) | same greedy tokens as transformers |"
    )
    print("|---|---|---|---|---|---|")
    for new_tokens, ms, same in summary:
        cached = ms["ours standard, cached"]
        print(
            f"| {new_tokens} | {cached / ms['transformers generate']:.2f} | "
            f"{cached / ms['transformers forward loop']:.2f} | {ms['ours standard, uncached'] / cached:.1f} | "
            f"{ms['ours super, cached'] / cached:.2f} | {'yes' if same else 'no'} |"
        )
    print()
    print(f"# load average (1, 5, 15 min) before: {before}; after: {load_average()}")


if __name__ == "__main__":
    main()
