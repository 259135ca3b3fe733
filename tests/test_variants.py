"""The registry of variants (modeling/variants.py): names that run folders and records depend on, the
counts each variant declares against the module's own, and the docs' tables it generates."""

import json
from dataclasses import fields, replace
from pathlib import Path

import pytest

from lit_attention.errors import ConfigError
from lit_attention.modeling.attention import MultiHeadAttention, count_attention_parameters
from lit_attention.modeling.costs import attention_flops, attention_parameters
from lit_attention.modeling.block_options import FAMILIES, OPTIONS, block_options_table, family_options
from lit_attention.modeling.variant_tables import (
    DOCUMENTS,
    TABLE_BEGIN,
    TABLE_END,
    documented_table,
    variants_table,
    write_tables,
)
from lit_attention.modeling.variant_tables import BLOCK_DOCUMENT, BLOCK_TABLE_BEGIN, BLOCK_TABLE_END, write_block_table
from lit_attention.modeling.variants import (
    PRESETS,
    REGISTRY,
    AttentionSpec,
    Variant,
    _registry,
    list_presets,
    presets_help,
    resolve_spec,
)

ROOT = Path(__file__).resolve().parents[1]

# Today's names, which run folders and records carry: a change to the registry or to AttentionSpec (a new
# axis, a new setting) must leave every one of them naming the same spec.
PINNED_NAMES = {
    "standard": AttentionSpec("linear", "linear", "linear"),
    "optimized": AttentionSpec("linear", "linear", "identity"),
    "efficient": AttentionSpec("linear", "identity", "identity"),
    "super": AttentionSpec("linear", "identity", "identity", value_mix=True),
    "identity_query": AttentionSpec("identity", "linear", "linear"),
    "residual_query": AttentionSpec("residual", "linear", "linear"),
    "nonlinear_query": AttentionSpec("residual_mlp", "linear", "linear"),
    "super,value_mix_init=xavier": AttentionSpec("linear", "identity", "identity", value_mix=True, value_mix_init="xavier"),
    "identity_query,query_scale=standard": AttentionSpec("identity", query_scale="standard"),
    "nonlinear_query,query_scale=standard,query_hidden=8": AttentionSpec("residual_mlp", query_scale="standard", query_hidden=8),
    "query=residual_mlp,key=identity,value=identity,value_mix=true": AttentionSpec("residual_mlp", "identity", "identity", True),
    "query=identity,key=linear,value=linear,value_mix=true": AttentionSpec("identity", value_mix=True),
    "query=linear,key=identity,value=linear,value_mix=false,query_scale=half": AttentionSpec(key="identity", query_scale="half"),
}


@pytest.mark.parametrize("name", PINNED_NAMES)
def test_existing_names_are_stable(name):
    assert PINNED_NAMES[name].name == name
    assert resolve_spec(name) == PINNED_NAMES[name]


def test_committed_records_keep_their_variant_names():
    """Every record under results/ was written with the spec's name of its day; it must still be its name."""
    pairs = set()
    for path in ROOT.glob("results/*/runs/**/record.json"):
        record = json.loads(path.read_text())
        pairs.add((record["variant"], json.dumps(record["attention"], sort_keys=True)))
    assert len(pairs) > len(REGISTRY), "the committed records under results/ were not found"
    for variant, attention in sorted(pairs):
        assert resolve_spec(json.loads(attention)).name == variant


def test_every_preset_is_its_own_name_and_listed_in_table_order():
    assert list_presets() == list(REGISTRY) == list(PRESETS)
    for name, variant in REGISTRY.items():
        assert variant.name == name and variant.spec.name == name and resolve_spec(name) == variant.spec
        assert resolve_spec(variant) == variant.spec
        assert variant.description and "\n" not in variant.description and "|" not in variant.description


def test_presets_help_names_every_preset_and_its_examples_resolve():
    text = presets_help()
    assert all(name in text for name in REGISTRY)
    for example in text.split("'")[1::2]:  # the quoted examples
        assert resolve_spec(example).name == example


@pytest.mark.parametrize(
    "variants, message",
    [
        ([Variant("a", AttentionSpec(), "x"), Variant("a", AttentionSpec(key="identity"), "y")], "'a' is taken"),
        ([Variant("Bad-Name", AttentionSpec(), "x")], "not lower_snake_case"),
        (
            [Variant("a", AttentionSpec(), "x"), Variant("b", AttentionSpec(query_scale="half"), "y")],
            "Preset 'b' has the axes of 'a'; write it as 'a' with settings",
        ),
    ],
)
def test_registry_rejects_ambiguous_presets(variants, message):
    with pytest.raises(ValueError, match=message):
        _registry(*variants)


# ------------------------------------------------------------------------------------ counts


@pytest.mark.parametrize("variant", REGISTRY)
def test_attention_parameters_are_those_of_the_built_module(variant):
    """Counted on the meta device, as the module would build them (the formulas: test_attention.py)."""
    for dim, heads, length, bias in ((64, 4, 16, False), (32, 1, 7, True)):
        built = MultiHeadAttention(dim, heads, variant, max_len=length, bias=bias)
        assert attention_parameters(variant, dim, num_heads=heads, max_len=length, bias=bias) == count_attention_parameters(built)


def test_parameters_with_biases_and_a_query_width():
    d = 32
    assert attention_parameters("standard", d, num_heads=4, bias=True) == 4 * d * d + 4 * d
    assert attention_parameters("nonlinear_query", d, num_heads=4, query_hidden=8) == 3 * d * d + 2 * d * 8 + 2 * d
    assert attention_parameters("nonlinear_query,query_hidden=8", d, num_heads=4) == 3 * d * d + 2 * d * 8 + 2 * d
    with pytest.raises(ConfigError, match="needs max_len"):
        attention_parameters("super", d, num_heads=4)


def test_flops_follow_the_cost_model():
    t, d = 256, 512
    flops = {name: attention_flops(name, t, d, num_heads=8) for name in ("standard", "optimized", "efficient", "super")}
    assert flops["standard"] == 4 * 2 * t * d * d + 4 * t * t * d
    ratios = {name: round(f / flops["standard"], 2) for name, f in flops.items()}
    assert ratios == {"standard": 1.0, "optimized": 0.8, "efficient": 0.6, "super": 0.7}  # docs/DESIGN.md §2
    r = 8
    mlp = 3 * 2 * t * d * d + 2 * t * d * r * 2 + 4 * t * t * d  # W_O, W_K, W_V, then W_1 and W_2 at width r
    assert attention_flops("nonlinear_query", t, d, num_heads=8, query_hidden=r) == mlp
    assert attention_flops(f"nonlinear_query,query_hidden={r}", t, d, num_heads=8) == mlp
    assert attention_flops("super", 2 * d + 64, d, num_heads=8) > attention_flops("standard", 2 * d + 64, d, num_heads=8)


# ------------------------------------------------------------------------------------ docs


@pytest.mark.parametrize("document", DOCUMENTS)
def test_documents_show_the_generated_table(document):
    table = documented_table((ROOT / document).read_text())
    assert table is not None, f"{document} lost its variants table markers ({TABLE_BEGIN!r} ... {TABLE_END!r})"
    assert table == variants_table(DOCUMENTS[document]), (
        f"{document}'s variants table is not the registry's; regenerate it with "
        "`python -m lit_attention.modeling.variant_tables --write`"
    )


def test_tables_have_a_row_per_preset_and_write_touches_only_the_table(tmp_path):
    for style in ("readme", "design"):
        lines = variants_table(style).splitlines()
        assert [line.split(" | ")[0] for line in lines[2:]] == [f"| `{name}`" for name in REGISTRY]
        assert len({line.count("|") for line in lines}) == 1  # every row has the header's columns
    for name in DOCUMENTS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(f"before\n{TABLE_BEGIN}\n| old |\n{TABLE_END}\nafter\n")
    assert write_tables(tmp_path) == list(DOCUMENTS)
    assert write_tables(tmp_path) == []
    for name, style in DOCUMENTS.items():
        assert (tmp_path / name).read_text() == f"before\n{TABLE_BEGIN}\n{variants_table(style)}\n{TABLE_END}\nafter\n"
    (tmp_path / "README.md").write_text("no markers\n")
    with pytest.raises(ConfigError, match="has no variants table markers"):
        write_tables(tmp_path)


def test_design_shows_the_generated_block_options_table():
    table = documented_table((ROOT / BLOCK_DOCUMENT).read_text(), BLOCK_TABLE_BEGIN, BLOCK_TABLE_END)
    assert table is not None, f"{BLOCK_DOCUMENT} lost its block options table markers ({BLOCK_TABLE_BEGIN!r} ...)"
    assert table == block_options_table(), (
        f"{BLOCK_DOCUMENT}'s block options table is not the configs'; regenerate it with "
        "`python -m lit_attention.modeling.variant_tables --write`"
    )


def test_block_options_table_is_read_from_the_configs_and_write_touches_only_the_table(tmp_path):
    lines = block_options_table().splitlines()
    header = lines[0].strip("| ").split(" | ")
    assert header == ["option", *FAMILIES, "what it is"] and len({line.count("|") for line in lines}) == 1
    # An option's name is its first word (`kv_heads` says where it is written after it).
    rows = {line.split(" | ")[0].strip("| `").split("`")[0]: line.split(" | ")[1:-1] for line in lines[2:]}
    assert {"norm", "mlp"} <= set(rows) <= set(OPTIONS)
    for column, config_class in enumerate(FAMILIES.values()):
        for name, values in family_options(config_class).items():
            cell = rows[name][column]  # every value the config's Literal declares, its default in bold
            default = next(f.default for f in fields(config_class) if f.name == name)
            assert cell.replace("**", "").split(", ") == [str(v).lower() if isinstance(v, bool) else v for v in values]
            assert f"**{str(default).lower() if isinstance(default, bool) else default}**" in cell, (name, cell)
    (tmp_path / BLOCK_DOCUMENT).parent.mkdir(parents=True)
    (tmp_path / BLOCK_DOCUMENT).write_text(f"before\n{BLOCK_TABLE_BEGIN}\n| old |\n{BLOCK_TABLE_END}\nafter\n")
    assert write_block_table(tmp_path) and not write_block_table(tmp_path)
    assert (
        tmp_path / BLOCK_DOCUMENT
    ).read_text() == f"before\n{BLOCK_TABLE_BEGIN}\n{block_options_table()}\n{BLOCK_TABLE_END}\nafter\n"
    (tmp_path / BLOCK_DOCUMENT).write_text(f"{TABLE_BEGIN}\n| only the variants |\n{TABLE_END}\n")
    with pytest.raises(ConfigError, match="has no block options table markers"):
        write_block_table(tmp_path)


def test_replace_keeps_a_presets_name_with_its_settings():
    spec = replace(PRESETS["super"], value_mix_init="orthogonal", query_scale="half")
    assert spec.name == "super,query_scale=half,value_mix_init=orthogonal"
    assert resolve_spec(spec.name) == spec
