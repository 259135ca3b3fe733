"""Hub datasets and tokenizers that are neither cached nor reachable fail in one sentence.

No test here touches the network: offline mode is on (as `HF_HUB_OFFLINE=1` in a fresh process, or
the libraries' own flags in this one), or the hub endpoint points at a closed local port.
"""

import os
import re
import subprocess
import sys
import textwrap
import time

import datasets
import huggingface_hub
import pytest

from lit_attention.errors import ConfigError
from datamodules import LanguageModelingDataModule, TextClassificationDataModule, TranslationDataModule

OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
DEAD_ENDPOINT = "http://127.0.0.1:9"  # the discard port: nothing listens, connections are refused at once


@pytest.fixture
def empty_caches(tmp_path, monkeypatch):
    """Nothing cached, whatever this machine has downloaded before."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    return str(tmp_path / "datasets")


@pytest.fixture
def offline(monkeypatch, empty_caches):
    """What HF_HUB_OFFLINE=1 in the environment makes of the libraries when they are imported."""
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return empty_caches


@pytest.fixture
def unreachable_hub(monkeypatch, empty_caches):
    """Offline mode off, but the hub's host refuses connections (a machine without internet)."""
    for name in OFFLINE_VARIABLES + PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", DEAD_ENDPOINT)
    monkeypatch.setattr(datasets.config, "HF_ENDPOINT", DEAD_ENDPOINT)
    return empty_caches


def fails_fast(make, *fragments):
    start = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        make()
    elapsed = time.monotonic() - start
    message = str(caught.value)
    assert elapsed < 20, f"took {elapsed:.1f} s"
    assert "\n" not in message and message.endswith(".") and not re.search(r"\.\s+[A-Z]", message), message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_text_classification_hub_name_offline(offline):
    dm = TextClassificationDataModule(dataset="stanfordnlp/imdb", hf_cache_dir=offline)  # init needs no data
    assert dm.model_sizes()["num_classes"] == 2
    message = fails_fast(dm.prepare_data, "'stanfordnlp/imdb'", "not cached", "offline", "data_files")
    assert message.startswith("Dataset 'stanfordnlp/imdb' is not cached and the hub cannot be reached")


@pytest.mark.parametrize("name, config", [("roneneldan/TinyStories", None), ("Salesforce/wikitext", "wikitext-103-raw-v1")])
def test_language_modeling_hub_name_offline(offline, tmp_path, name, config):
    dm = LanguageModelingDataModule(dataset=name, data_dir=str(tmp_path / "data"), hf_cache_dir=offline)
    assert dm.config == config  # WikiText gets its 103M-token raw configuration by default
    fails_fast(dm.prepare_data, f"'{name}'", "offline", "data_files")
    assert not any((tmp_path / "data").rglob("meta.json"))  # no half-built cache left behind


def test_translation_hub_name_offline(offline):
    dm = TranslationDataModule(hf_cache_dir=offline)
    fails_fast(dm.setup, "'Helsinki-NLP/opus_books' (config 'en-es')", "offline", "data_files")


def test_pretrained_tokenizer_offline(offline):
    fails_fast(
        lambda: LanguageModelingDataModule(tokenizer="gpt2").model_sizes(), "Tokenizer 'gpt2'", "offline", "tokenizer='bytes'"
    )


def test_unreachable_hub_without_offline_mode_fails_at_once(unreachable_hub):
    """No offline flag set, the hub's port closed: one sentence within seconds (the libraries' own
    retries took about 25 s), and the libraries' flags are as the user left them afterwards."""
    dm = TextClassificationDataModule(dataset="fancyzhx/ag_news", hf_cache_dir=unreachable_hub)
    assert dm.model_sizes()["num_classes"] == 4 and dm.text_column == "text"  # known without the hub
    start = time.monotonic()
    fails_fast(dm.prepare_data, "'fancyzhx/ag_news' is not cached and the hub", DEAD_ENDPOINT, "does not answer")
    fails_fast(
        lambda: LanguageModelingDataModule(tokenizer="gpt2").model_sizes(), "Tokenizer 'gpt2'", DEAD_ENDPOINT, "tokenizer='bytes'"
    )
    assert time.monotonic() - start < 5
    assert datasets.config.HF_HUB_OFFLINE is False and huggingface_hub.constants.HF_HUB_OFFLINE is False


def test_unreachable_hub_still_loads_a_cached_dataset(unreachable_hub, monkeypatch):
    """The same dead hub: the load runs with the libraries' offline flags on, so a cached dataset loads."""
    flags_seen = []

    def cached(*args, **kwargs):
        flags_seen.append((datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE))
        return datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["a"], "label": [0]})})

    monkeypatch.setattr(datasets, "load_dataset", cached)
    from datamodules.hub import load_hub_dataset

    assert list(load_hub_dataset("fancyzhx/ag_news", None, unreachable_hub)) == ["train"]
    assert flags_seen == [(True, True)]
    assert datasets.config.HF_HUB_OFFLINE is False and huggingface_hub.constants.HF_HUB_OFFLINE is False


def test_offline_variable_set_after_import_is_honoured_without_asking_the_hub(unreachable_hub, monkeypatch):
    """HF_HUB_OFFLINE set in a process that imported the libraries already (an in-process run): offline,
    and the hub is never asked."""
    import datamodules.hub

    def never(endpoint):
        raise AssertionError(f"asked {endpoint} while offline")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datamodules.hub, "hub_answers", never)
    dm = TextClassificationDataModule(dataset="stanfordnlp/imdb", hf_cache_dir=unreachable_hub)
    fails_fast(dm.prepare_data, "'stanfordnlp/imdb' is not cached and the hub cannot be reached (offline)")
    assert datasets.config.HF_HUB_OFFLINE is False and huggingface_hub.constants.HF_HUB_OFFLINE is False


@pytest.mark.slow  # a fresh interpreter each: what it reads at start-up is what is tested
@pytest.mark.parametrize(
    "variables, reason",
    [
        ({"HF_HUB_OFFLINE": "1"}, "cannot be reached (offline)"),
        ({"HF_ENDPOINT": DEAD_ENDPOINT}, f"({DEAD_ENDPOINT}) does not answer"),
    ],
)
def test_offline_variable_set_before_start(tmp_path, variables, reason):
    """As a user runs it: HF_HUB_OFFLINE exported in the shell (or a hub that does not answer), then a
    fresh Python process."""
    script = textwrap.dedent("""
        import time
        from datamodules import TextClassificationDataModule
        from lit_attention.errors import ConfigError
        dm = TextClassificationDataModule(dataset="stanfordnlp/sst2")
        start = time.monotonic()
        try:
            dm.prepare_data()
        except ConfigError as error:
            print(f"{time.monotonic() - start:.2f}|{error}")
    """)
    env = {name: value for name, value in os.environ.items() if name not in OFFLINE_VARIABLES + PROXY_VARIABLES}
    env.update(variables, HF_HOME=str(tmp_path / "hf_home"))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    elapsed, message = done.stdout.strip().splitlines()[-1].split("|", 1)
    assert float(elapsed) < 5
    assert message.startswith(f"Dataset 'stanfordnlp/sst2' is not cached and the hub {reason}"), message
