"""Predictions under DDP, rank by rank (callbacks.PredictionWriter): each rank appends its rows to a file of
its own as they come, so no rank holds more than a batch and a stopped run keeps what each rank predicted;
at the end rank 0 merges them in input order, each input once. The DDP predict through the real command
(2 gloo processes) is in test_ddp_results.py; here the ranks' hooks are called in turn on one process,
with a trainer that has just what the writer reads of it."""

import json
from types import SimpleNamespace

from lit_attention.training.callbacks import PredictionWriter, rank_file


def trainer(rank: int, world: int, where: str):
    strategy = SimpleNamespace(
        broadcast=lambda value: where, barrier=lambda: None, reduce_boolean_decision=lambda decision, all=True: decision
    )
    return SimpleNamespace(
        world_size=world, global_rank=rank, is_global_zero=rank == 0, strategy=strategy, received_sigterm=False
    )


def test_each_rank_keeps_its_rows_as_they_come_and_rank_0_merges_them_in_input_order(tmp_path):
    predictions = tmp_path / "predictions.jsonl"
    rank_file(predictions, 2).write_text("[0, {}]\n")  # left by an earlier prediction on 3 ranks, stopped
    writers = [PredictionWriter(predictions), PredictionWriter(None)]
    ranks = [trainer(rank, 2, str(predictions)) for rank in (0, 1)]
    for writer, ranked in zip(writers, ranks):
        writer.on_predict_start(ranked, None)
    # 7 inputs over 2 ranks, one a batch: rank 0 gets 0, 2, 4, 6 and rank 1 gets 1, 3, 5 and the sampler's
    # padding, input 0 again.
    shares = {0: [0, 2, 4, 6], 1: [1, 3, 5, 0]}
    for step in range(4):
        for rank in (0, 1):
            index = shares[rank][step]
            writers[rank].write_on_batch_end(ranks[rank], None, [{"input": f"{index}.png"}], [index], None, step, 0)
        if step == 1:  # kept on disk as they come: what a SIGTERM now would leave
            kept = [json.loads(line)[0] for line in rank_file(predictions, 1).read_text().splitlines()]
            assert kept == [1, 3]
    for writer, ranked in zip(writers[::-1], ranks[::-1]):
        writer.on_predict_epoch_end(ranked, None)
    rows = [json.loads(line)["input"] for line in predictions.read_text().splitlines()]
    assert rows == [f"{i}.png" for i in range(7)] and writers[0].rows == 7
    assert sorted(p.name for p in tmp_path.iterdir()) == ["predictions.jsonl"]  # the ranks' files are merged away


def test_a_rank_that_cannot_write_beside_the_predictions_stops_every_rank_in_one_sentence(tmp_path):
    """Run folders not shared between nodes: a rank's file cannot be made, and every rank is told at the
    start (rank 0 would otherwise wait at the end for ever)."""
    import pytest

    from lit_attention.errors import ConfigError

    elsewhere = str(tmp_path / "not_on_this_node" / "predictions.jsonl")
    with pytest.raises(ConfigError, match="a file system every node sees"):
        PredictionWriter(None).on_predict_start(trainer(1, 2, elsewhere), None)
