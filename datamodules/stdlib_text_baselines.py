"""What the stdlib text task needs: two baselines a reader sets beside the text encoder's scores.

Both see exactly the windows the encoder sees (``stdlib_text.stdlib_windows``, the same options),
train on the training split and are scored on validation and test:

* unigram: each window's 256 byte counts;
* bigram: its counts of the 65,536 ordered byte pairs (those that occur in training).

Each is fitted by multinomial naive Bayes (add-one smoothing) and by logistic regression (on
log(1 + count), each window scaled to unit length; C = 1), with fixed settings: nothing is tuned,
on validation or test. A unigram model knows which bytes a window holds; a bigram model also knows
which follow which, the most a model without context can use. A Transformer that scores clearly
above the bigram line has learned something from longer context.

What they say (64-byte windows, --max_len 64; the default caps; CPython 3.11): byte counts reach about 0.36 test
accuracy and 0.33 macro-F1 (chance 0.17); byte pairs about 0.50-0.52 accuracy and 0.48-0.51
macro-F1, naive Bayes a little ahead of logistic regression. So single bytes already carry some of
the answer, pairs carry more, and half the windows stay wrong for any model without longer context.
Run:

    python -m datamodules.stdlib_text_baselines --max_len 128
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sparse
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, f1_score
from sklearn.naive_bayes import MultinomialNB
from sklearn.preprocessing import normalize

from lit_attention.errors import ConfigError
from lit_attention.markdown import markdown_table

from .stdlib_text import HELD_OUT, STDLIB_PACKAGES, WINDOWS_PER_CLASS, WINDOWS_PER_FILE, WindowSplit, stdlib_windows

EVALUATED = ("validation", "test")


@dataclass(frozen=True)
class Score:
    features: str
    model: str
    split: str
    accuracy: float
    macro_f1: float


def unigram_counts(windows: np.ndarray) -> sparse.csr_matrix:
    """(N, 256) counts of each byte value per window."""
    rows = np.repeat(np.arange(len(windows)), windows.shape[1])
    counts = sparse.csr_matrix((np.ones(windows.size), (rows, windows.ravel().astype(np.int64))), shape=(len(windows), 256))
    counts.sum_duplicates()
    return counts


def bigram_counts(windows: np.ndarray) -> sparse.csr_matrix:
    """(N, 65536) counts of each ordered pair of neighbouring bytes per window."""
    pairs = windows[:, :-1].astype(np.int64) * 256 + windows[:, 1:]
    rows = np.repeat(np.arange(len(windows)), pairs.shape[1])
    counts = sparse.csr_matrix((np.ones(pairs.size), (rows, pairs.ravel())), shape=(len(windows), 256 * 256))
    counts.sum_duplicates()
    return counts


FEATURES = {"unigram": unigram_counts, "bigram": bigram_counts}


def models() -> dict[str, tuple[object, bool]]:
    """Each model, and whether it reads log-scaled, length-normalised counts (else raw counts)."""
    return {
        "naive Bayes": (MultinomialNB(alpha=1.0), False),
        "logistic regression": (LogisticRegression(C=1.0, max_iter=2000), True),
    }


def baseline_scores(splits: dict[str, WindowSplit]) -> list[Score]:
    """Accuracy and macro-F1 of every feature set x model on validation and test."""
    scores = []
    for feature_name, featurize in FEATURES.items():
        counts = {name: featurize(split.windows) for name, split in splits.items()}
        seen = np.flatnonzero(counts["train"].getnnz(axis=0))  # features never seen in training carry nothing
        counts = {name: matrix[:, seen] for name, matrix in counts.items()}
        for model_name, (model, scaled) in models().items():
            inputs = {name: normalize(matrix.log1p()) if scaled else matrix for name, matrix in counts.items()}
            model.fit(inputs["train"], splits["train"].labels)
            for split in EVALUATED:
                predicted, truth = model.predict(inputs[split]), splits[split].labels
                scores.append(
                    Score(
                        feature_name,
                        model_name,
                        split,
                        accuracy_score(truth, predicted),
                        f1_score(truth, predicted, average="macro"),
                    )
                )
    return scores


def format_scores(scores: list[Score], splits: dict[str, WindowSplit], class_names: list[str]) -> str:
    """A Markdown table: one row per feature set x model, accuracy and macro-F1 per evaluated split."""
    sizes = ", ".join(f"{name} {len(split.labels)}" for name, split in splits.items())
    by_row: dict[tuple[str, str], dict[str, Score]] = {}
    for score in scores:
        by_row.setdefault((score.features, score.model), {})[score.split] = score
    header = ["features", "model", *(f"{s} {measure}" for s in EVALUATED for measure in ("acc", "macro-F1"))]
    rows = [
        [
            features,
            model,
            *(
                f"{by_split[s].accuracy:.3f}" if measure == "acc" else f"{by_split[s].macro_f1:.3f}"
                for s in EVALUATED
                for measure in ("acc", "macro-F1")
            ),
        ]
        for (features, model), by_split in by_row.items()
    ]
    return f"classes: {', '.join(class_names)} (chance {1 / len(class_names):.3f}); windows: {sizes}\n\n" + markdown_table(
        header, rows
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Byte and byte-pair baselines of the stdlib text task.")
    parser.add_argument("--max_len", type=int, default=256, help="window length in bytes (the DataModule's max_len)")
    parser.add_argument("--packages", nargs="+", default=list(STDLIB_PACKAGES), help="the classes")
    parser.add_argument("--windows_per_file", type=int, default=WINDOWS_PER_FILE)
    parser.add_argument("--windows_per_class", type=int, default=WINDOWS_PER_CLASS)
    parser.add_argument("--val_fraction", type=float, default=HELD_OUT, help="share of files in validation and in test")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        splits = stdlib_windows(args.packages, args.max_len, args.windows_per_file, args.windows_per_class, args.val_fraction)
    except ConfigError as error:  # one sentence, as the suite's commands print it
        parser.exit(2, f"{parser.prog}: {error}\n")
    print(format_scores(baseline_scores(splits), splits, sorted(args.packages)))
    print(f"\n({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
