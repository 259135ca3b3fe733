"""Where a variant sits on the query / key / value axes, its settings, the named presets, and the
strings and mappings a recipe or the command line names them with (`super,value_mix_init=xavier`).
The math of each axis is in attention.py."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from lit_attention.errors import ConfigError

QUERY_OPTIONS = ("linear", "identity", "residual", "residual_mlp")
KEY_OPTIONS = ("linear", "identity")
VALUE_OPTIONS = ("linear", "identity")
QUERY_SCALES = ("standard", "half")
VALUE_MIX_INITS = ("identity", "xavier", "orthogonal", "normal")
AXES = ("query", "key", "value", "value_mix")


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
    """

    query: str = "linear"
    key: str = "linear"
    value: str = "linear"
    value_mix: bool = False
    query_scale: str | None = None  # None: the query axis' default (see above)
    query_hidden: int | None = None
    value_mix_init: str = "identity"

    def __post_init__(self) -> None:
        for axis, options in (("query", QUERY_OPTIONS), ("key", KEY_OPTIONS), ("value", VALUE_OPTIONS),
                              ("query_scale", (None, *QUERY_SCALES)), ("value_mix_init", VALUE_MIX_INITS)):
            choice = getattr(self, axis)
            if choice not in options:
                valid = ", ".join(o for o in options if o is not None)
                raise ConfigError(f"Unknown {axis} option {choice!r}; valid {axis} options are {valid}.")
        if not isinstance(self.value_mix, bool):
            raise ConfigError(f"value_mix must be true or false, got {self.value_mix!r}.")
        if self.query_hidden is not None and (isinstance(self.query_hidden, bool) or not isinstance(self.query_hidden, int)
                                              or self.query_hidden < 1):
            raise ConfigError(f"query_hidden={self.query_hidden!r} is invalid; give a positive width r (or leave it unset for d/2).")
        if self.query_scale is None:  # frozen: fill the default in place once
            object.__setattr__(self, "query_scale", "standard" if self.query == "linear" else "half")

    @property
    def name(self) -> str:
        """The preset's name, followed by the settings that differ from it (`super,value_mix_init=xavier`);
        for axes no preset has, every axis and the settings that differ from their defaults.
        `resolve_spec(spec.name) == spec`."""
        for preset, spec in PRESETS.items():
            if all(getattr(spec, axis) == getattr(self, axis) for axis in AXES):
                return ",".join([preset, *_changed_settings(self, spec)])
        axes = [f"{axis}={str(getattr(self, axis)).lower()}" for axis in AXES]
        return ",".join(axes + _changed_settings(self, AttentionSpec(**{a: getattr(self, a) for a in AXES})))

    def to_dict(self) -> dict:
        return asdict(self)


def _changed_settings(spec: AttentionSpec, reference: AttentionSpec) -> list[str]:
    return [f"{f.name}={getattr(spec, f.name)}" for f in fields(spec)
            if f.name not in AXES and getattr(spec, f.name) != getattr(reference, f.name)]


PRESETS: dict[str, AttentionSpec] = {
    "standard": AttentionSpec("linear", "linear", "linear"),
    "optimized": AttentionSpec("linear", "linear", "identity"),
    "efficient": AttentionSpec("linear", "identity", "identity"),
    "super": AttentionSpec("linear", "identity", "identity", value_mix=True),
    "identity_query": AttentionSpec("identity", "linear", "linear"),
    "residual_query": AttentionSpec("residual", "linear", "linear"),
    "nonlinear_query": AttentionSpec("residual_mlp", "linear", "linear"),
}
SPEC_FIELDS = tuple(f.name for f in fields(AttentionSpec))


def list_presets() -> list[str]:
    """Names of the named variants, in the order of the variants table (docs/DESIGN.md)."""
    return list(PRESETS)


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "on", "1", "yes"):
        return True
    if lowered in ("false", "off", "0", "no"):
        return False
    raise ConfigError(f"value_mix must be true or false, got {text!r}.")


def _parse_int(name: str, text: str) -> int | None:
    if text.strip().lower() in ("none", "null"):
        return None
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {text!r}.") from None


SPEC_EXAMPLES = "'nonlinear_query', 'super,value_mix_init=xavier' or 'query=residual_mlp,key=identity,value=identity,value_mix=true'"


def resolve_spec(variant: str | dict | AttentionSpec) -> AttentionSpec:
    """Turn a preset name, an `[preset,]axis=option,...` string, a dict or a spec into an AttentionSpec.

    A preset may be followed by settings that change it: `identity_query,query_scale=standard`.
    A dict may name its preset under the key `preset`.
    """
    if isinstance(variant, AttentionSpec):
        return variant
    if isinstance(variant, dict):
        settings = dict(variant)
        base = settings.pop("preset", None)
        unknown = set(settings) - set(SPEC_FIELDS)
        if unknown:
            raise ConfigError(
                f"Unknown attention axis {sorted(unknown)[0]!r}; valid axes are query, key, value, value_mix "
                f"(and the settings query_scale, query_hidden, value_mix_init, or preset)."
            )
        if isinstance(settings.get("value_mix"), str):
            settings["value_mix"] = _parse_bool(settings["value_mix"])
        if isinstance(settings.get("query_hidden"), str):
            settings["query_hidden"] = _parse_int("query_hidden", settings["query_hidden"])
        if base is None:
            return AttentionSpec(**settings)
        preset = _preset(base)
        if any(axis in settings for axis in AXES):
            raise ConfigError(f"Attention spec {variant!r} changes an axis of preset {base!r}; "
                              "give either a preset with settings or every axis without a preset.")
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
            settings[key] = value
        return resolve_spec(settings)
    raise ConfigError(
        f"Attention variant must be a preset name, a dict or an AttentionSpec, got {type(variant).__name__}."
    )


def _preset(name: str) -> AttentionSpec:
    if name not in PRESETS:
        raise ConfigError(
            f"Unknown attention variant {name!r}; valid presets are {', '.join(PRESETS)} (or a spec such as {SPEC_EXAMPLES})."
        )
    return PRESETS[name]


def attention_flops(variant: str | dict | AttentionSpec, seq_len: int, dim: int, query_hidden: int | None = None) -> int:
    """Forward FLOPs of one self-attention layer on one sequence (docs/DESIGN.md §2, cost model).

    2·T·d² per kept matrix among W_Q, W_K, W_V, W_O (the residual MLP query: 2·T·d·r·2),
    4·T²·d for the scores and the weighted sum, 2·T²·d for the W_A value mix.
    """
    spec = resolve_spec(variant)
    t, d = seq_len, dim
    kept = 1 + (spec.query in ("linear", "residual")) + (spec.key == "linear") + (spec.value == "linear")
    flops = kept * 2 * t * d * d + 4 * t * t * d
    if spec.query == "residual_mlp":
        flops += 2 * t * d * (query_hidden or d // 2) * 2
    if spec.value_mix:
        flops += 2 * t * t * d
    return flops
