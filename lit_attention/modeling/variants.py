"""The registry of attention variants, the one place where they are declared: the axes a variant sits on
(query / key / value / value_mix), what each option computes and the parameters it adds, the settings that
shape a variant without changing what it can represent, and the named presets (REGISTRY: one `Variant`
line each, in table order, with a one-line description). The command line's `--help` (`presets_help`),
`--variants all`, the docs' tables (variant_tables.py), the benchmarks and the tests read it. The math of
each axis is in attention.py; costs.py counts a variant's parameters and FLOPs on that module itself
(`attention_parameters`, `attention_flops`).

A preset that combines existing axes is one line in REGISTRY. A new axis is a field of AttentionSpec, its
options in AXIS_OPTIONS (and its part of `head_formulas`), its math in attention.py and its tests; the
names of existing specs, hence their run folders and records, stay the same (see AttentionSpec.name).
`python -m lit_attention.modeling.variant_tables --write` then regenerates the tables in README.md and
docs/DESIGN.md; tests/test_variants.py fails until they match.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field, fields, replace

from lit_attention.errors import ConfigError


@dataclass(frozen=True)
class Option:
    """One option of an axis: what it makes of the input per head i (README's table) and the attention
    parameters it adds without biases, {monomial: coefficient} over MONOMIALS (tests check them against
    the module's own count)."""

    formula: str
    parameters: dict = field(default_factory=dict)


# The monomials a parameter count is made of, in the order the tables print them; d the width, h the
# heads, length = max_len (ℓ, the size of W_A), kv = kv_heads (None: h); d_kv = kv·d/h is the width of
# grouped keys and values.
MONOMIALS = {
    "d²": lambda d, h, length, kv=None: d * d,
    "d·d_kv": lambda d, h, length, kv=None: d * (d // h) * (kv or h),
    "d": lambda d, h, length, kv=None: d,
    "ℓ²": lambda d, h, length, kv=None: length * length,
}
W_O = {"d²": 1}  # kept in every variant

AXIS_OPTIONS: dict[str, dict] = {
    "query": {
        "linear": Option("X W_Q,i", {"d²": 1}),
        "identity": Option("X_i"),
        "residual": Option("(X + X W_Q)_i", {"d²": 1}),
        # W_1 and W_2 at the default r = d/2, and the weights of RMSNorm and LN.
        "residual_mlp": Option("(X + LN(GELU(RMSNorm(X) W_1) W_2))_i", {"d²": 1, "d": 2}),
    },
    "key": {"linear": Option("X W_K,i", {"d²": 1}), "identity": Option("X_i")},
    "value": {"linear": Option("X W_V,i", {"d²": 1}), "identity": Option("X_i")},
    "value_mix": {False: Option("V_i"), True: Option("W_A V_i (W_A ∈ ℝ^{ℓ×ℓ} mixes positions)", {"ℓ²": 1})},
}
AXES = tuple(AXIS_OPTIONS)
QUERY_OPTIONS, KEY_OPTIONS, VALUE_OPTIONS = (tuple(AXIS_OPTIONS[axis]) for axis in ("query", "key", "value"))
QUERY_SCALES = {"standard": "1/√d_h", "half": "1/(2√d_h)"}  # the score scale s each setting gives
VALUE_MIX_INITS = ("identity", "xavier", "orthogonal", "normal")
# The axes every name spells out. Any other axis (one added to AttentionSpec) appears in a name only
# where it differs from its default, so that run folders and records of existing specs keep their names.
NAMED_AXES = ("query", "key", "value", "value_mix")


@dataclass(frozen=True)
class AttentionSpec:
    """How one attention variant is built: where it sits on the query / key / value axes, whether
    W_A mixes values, and the three settings that shape it without changing what it can represent.

    query_scale: `standard` multiplies the scores by 1/sqrt(d_h), `half` by 1/(2 sqrt(d_h)). The
        nonlinear-query authors use `half` for every query that is not X W_Q (identity, residual and
        residual_mlp: their (X + f(X))/2), so that is the default there; `linear` defaults to `standard`.
    query_hidden: r, the hidden width of the `residual_mlp` query (None: d/2).
    value_mix_init: W_A's initialisation: `identity` (`super` starts out as `efficient`), `xavier`
        (uniform), `orthogonal` or `normal` (N(0, 1/l)).
    kv_heads: g, the key/value heads (None: as many as the query heads). W_K and W_V then make g heads
        of d_h columns and query head i reads key/value head i // (h / g): grouped-query attention,
        multi-query at g = 1. It must divide h and needs linear keys and values (an identity key or
        value has no shared head: X_i is one slice of X per query head).
    """

    query: str = "linear"
    key: str = "linear"
    value: str = "linear"
    value_mix: bool = False
    query_scale: str | None = None  # None: the query axis' default (see above)
    query_hidden: int | None = None
    value_mix_init: str = "identity"
    kv_heads: int | None = None

    def __post_init__(self) -> None:
        choices = {**AXIS_OPTIONS, "query_scale": (None, *QUERY_SCALES), "value_mix_init": VALUE_MIX_INITS}
        for name, options in choices.items():
            choice = getattr(self, name)
            if all(isinstance(o, bool) for o in options):
                if not isinstance(choice, bool):
                    raise ConfigError(f"{name} must be true or false, got {choice!r}.")
            elif choice not in options:
                valid = ", ".join(o for o in options if o is not None)
                raise ConfigError(f"Unknown {name} option {choice!r}; valid {name} options are {valid}.")
        if self.query_hidden is not None and (
            isinstance(self.query_hidden, bool) or not isinstance(self.query_hidden, int) or self.query_hidden < 1
        ):
            raise ConfigError(
                f"query_hidden={self.query_hidden!r} is invalid; give a positive width r (or leave it unset for d/2)."
            )
        if self.kv_heads is not None and (
            isinstance(self.kv_heads, bool) or not isinstance(self.kv_heads, int) or self.kv_heads < 1
        ):
            raise ConfigError(
                f"kv_heads={self.kv_heads!r} is invalid; give a positive number of key/value heads "
                "that divides num_heads (or leave it unset for one per query head)."
            )
        if self.query_scale is None:  # frozen: fill the default in place once
            object.__setattr__(self, "query_scale", "standard" if self.query == "linear" else "half")

    @property
    def name(self) -> str:
        """The preset's name, followed by the settings that differ from it (`super,value_mix_init=xavier`);
        for axes no preset has, the NAMED_AXES and whatever else differs from its default. Run folders
        and records are named by it. `resolve_spec(spec.name) == spec`."""
        for preset, spec in PRESETS.items():
            if all(getattr(spec, axis) == getattr(self, axis) for axis in AXES):
                return ",".join([preset, *_differences(self, spec)])
        axes = [f"{axis}={str(getattr(self, axis)).lower()}" for axis in NAMED_AXES]
        return ",".join(axes + _differences(self, AttentionSpec(**{a: getattr(self, a) for a in NAMED_AXES})))

    def to_dict(self) -> dict:
        return asdict(self)


def _differences(spec: AttentionSpec, reference: AttentionSpec) -> list[str]:
    """`field=value` for every field outside NAMED_AXES where `spec` differs from `reference`, in field order."""
    return [
        f"{f.name}={getattr(spec, f.name)}"
        for f in fields(spec)
        if f.name not in NAMED_AXES and getattr(spec, f.name) != getattr(reference, f.name)
    ]


SPEC_FIELDS = tuple(f.name for f in fields(AttentionSpec))
SETTINGS = tuple(name for name in SPEC_FIELDS if name not in AXES)


@dataclass(frozen=True)
class Variant:
    """A preset: its name (its run folders' too), its spec, and what it is in one line."""

    name: str
    spec: AttentionSpec
    description: str


def _registry(*variants: Variant) -> dict[str, Variant]:
    """The presets by name, in the given order, checked: names that parse as presets, and one preset per
    point on the axes (a preset that differs from another only in settings is that one with settings)."""
    registry: dict[str, Variant] = {}
    for variant in variants:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", variant.name) or variant.name in registry:
            raise ValueError(f"Preset name {variant.name!r} is taken or not lower_snake_case.")
        twin = next(
            (v.name for v in registry.values() if all(getattr(v.spec, a) == getattr(variant.spec, a) for a in AXES)), None
        )
        if twin:
            raise ValueError(f"Preset {variant.name!r} has the axes of {twin!r}; write it as {twin!r} with settings.")
        registry[variant.name] = variant
    return registry


REGISTRY = _registry(
    Variant("standard", AttentionSpec(), "the Transformer's attention: W_Q, W_K, W_V and W_O"),
    Variant("optimized", AttentionSpec(value="identity"), "no W_V (arXiv 2403.01643)"),
    Variant("efficient", AttentionSpec(key="identity", value="identity"), "no W_K, no W_V (arXiv 2403.01643)"),
    Variant(
        "super",
        AttentionSpec(key="identity", value="identity", value_mix=True),
        "efficient plus W_A, a learned mix of positions (arXiv 2403.01643)",
    ),
    Variant("identity_query", AttentionSpec(query="identity"), "no W_Q (arXiv 2603.13381)"),
    Variant("residual_query", AttentionSpec(query="residual"), "a linear residual query X + X W_Q (arXiv 2603.13381)"),
    Variant(
        "nonlinear_query",
        AttentionSpec(query="residual_mlp"),
        "a nonlinear residual query X + f(X), f a small MLP (arXiv 2603.13381)",
    ),
)
PRESETS: dict[str, AttentionSpec] = {name: variant.spec for name, variant in REGISTRY.items()}


def list_presets() -> list[str]:
    """Names of the named variants, in the order of the variants table."""
    return list(PRESETS)


# ---------------------------------------------------------------------------------------- parsing

SETTINGS_EXAMPLE = "super,value_mix_init=xavier"
AXES_EXAMPLE = "query=residual_mlp,key=identity,value=identity,value_mix=true"
SPEC_EXAMPLES = f"'nonlinear_query', '{SETTINGS_EXAMPLE}' or '{AXES_EXAMPLE}'"


def presets_help() -> str:
    """What a variant may be, in one sentence, for docstrings and `--help`."""
    return (
        f"one of the presets {', '.join(PRESETS)}; a preset with settings ('{SETTINGS_EXAMPLE}'); "
        f"or every axis ('{AXES_EXAMPLE}')"
    )


def _parse_bool(name: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "on", "1", "yes"):
        return True
    if lowered in ("false", "off", "0", "no"):
        return False
    raise ConfigError(f"{name} must be true or false, got {text!r}.")


def _parse_int(name: str, text: str) -> int | None:
    if text.strip().lower() in ("none", "null"):
        return None
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {text!r}.") from None


def resolve_spec(variant: str | dict | AttentionSpec | Variant) -> AttentionSpec:
    """Turn a preset name, an `[preset,]axis=option,...` string, a dict, a Variant or a spec into an
    AttentionSpec.

    A preset may be followed by settings that change it: `identity_query,query_scale=standard`.
    A dict may name its preset under the key `preset`.
    """
    if isinstance(variant, AttentionSpec):
        return variant
    if isinstance(variant, Variant):
        return variant.spec
    if isinstance(variant, dict):
        settings = dict(variant)
        base = settings.pop("preset", None)
        unknown = set(settings) - set(SPEC_FIELDS)
        if unknown:
            raise ConfigError(
                f"Unknown attention axis {sorted(unknown)[0]!r}; valid axes are {', '.join(AXES)} "
                f"(and the settings {', '.join(SETTINGS)}, or preset)."
            )
        for axis in AXES:
            if isinstance(settings.get(axis), str) and all(isinstance(o, bool) for o in AXIS_OPTIONS[axis]):
                settings[axis] = _parse_bool(axis, settings[axis])
        for name in ("query_hidden", "kv_heads"):
            if isinstance(settings.get(name), str):
                settings[name] = _parse_int(name, settings[name])
        if base is None:
            return AttentionSpec(**settings)
        preset = _preset(base)
        if any(axis in settings for axis in AXES):
            raise ConfigError(
                f"Attention spec {variant!r} changes an axis of preset {base!r}; "
                "give either a preset with settings or every axis without a preset."
            )
        # A preset's scale follows its query axis unless it is set explicitly.
        return replace(preset, **settings)
    if isinstance(variant, str):
        items = [item.strip() for item in variant.split(",") if item.strip()]
        if not items:
            raise ConfigError(f"The attention variant is empty; valid presets are {', '.join(PRESETS)}.")
        settings: dict = {}
        if "=" not in items[0]:
            settings["preset"] = items.pop(0)
            if settings["preset"] not in PRESETS:
                _preset(settings["preset"])  # raises the unknown-preset sentence
        for item in items:
            if "=" not in item:
                raise ConfigError(
                    f"Malformed attention spec {variant!r}: {item!r} is not an axis=option pair; "
                    f"write for example {SPEC_EXAMPLES}."
                )
            key, value = (part.strip() for part in item.split("=", 1))
            if key in settings:  # the second would silently win, as a YAML key given twice would
                raise ConfigError(
                    f"Attention spec {variant!r} sets {key} twice ({key}={settings[key]} and {key}={value}); "
                    "give each axis or setting once."
                )
            settings[key] = value
        return resolve_spec(settings)
    raise ConfigError(f"Attention variant must be a preset name, a dict or an AttentionSpec, got {type(variant).__name__}.")


def _preset(name: str) -> AttentionSpec:
    if name not in PRESETS:
        raise ConfigError(
            f"Unknown attention variant {name!r}; valid presets are {', '.join(PRESETS)} (or a spec such as {SPEC_EXAMPLES})."
        )
    return PRESETS[name]


# ------------------------------------------------------------------------------ what the docs print


def head_formulas(spec: AttentionSpec) -> tuple[str, str, str]:
    """Q_i, K_i and V_i of `spec` as README's table writes them."""
    value = AXIS_OPTIONS["value_mix"][spec.value_mix].formula.replace("V_i", AXIS_OPTIONS["value"][spec.value].formula)
    return AXIS_OPTIONS["query"][spec.query].formula, AXIS_OPTIONS["key"][spec.key].formula, value


def parameter_terms(spec: AttentionSpec) -> Counter:
    """The attention parameters of `spec` without biases (r = d/2), {monomial: coefficient}. With kv_heads
    set, the linear key and value are d × d_kv (the MONOMIALS read kv_heads)."""
    terms = Counter(W_O)
    for axis, options in AXIS_OPTIONS.items():
        parameters = options[getattr(spec, axis)].parameters
        if spec.kv_heads is not None and axis in ("key", "value"):
            parameters = {"d·d_kv" if m == "d²" else m: n for m, n in parameters.items()}
        terms.update(parameters)
    return terms


def parameter_formula(spec: AttentionSpec) -> str:
    terms = parameter_terms(spec)
    return " + ".join(f"{'' if terms[m] == 1 else terms[m]}{m}" for m in MONOMIALS if terms[m])
