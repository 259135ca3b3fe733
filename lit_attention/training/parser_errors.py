"""jsonargparse's reports of a bad command line or recipe, as one sentence naming the value and the choices.

jsonargparse explains a bad value of a subclass argument (`--model.lr 0`) as a nested report: the
union of types `--model` accepts, the class path it tried, the inner key and its type. The user needs
the innermost part: which flag, which value, what is valid.
"""

from __future__ import annotations

import ast
import difflib
import importlib
import re
from argparse import ArgumentError
from lit_attention.modeling import CONFIG_FIELDS
from lit_attention.modeling.variants import AXES_EXAMPLE, SETTINGS, SPEC_FIELDS

# A variant with each setting, as --model.attention takes it.
SETTING_EXAMPLES = {
    "kv_heads": "standard,kv_heads=2",
    "query_scale": "identity_query,query_scale=standard",
    "query_hidden": "nonlinear_query,query_hidden=64",
    "value_mix_init": "super,value_mix_init=xavier",
}

# Each pattern reads words of jsonargparse's messages, which a release may change: tests/test_message_rewrites.py
# feeds every one the message the installed jsonargparse really gives (pyproject pins the tested range), and
# fails naming the pattern when one no longer matches, rather than letting the raw report through.
_KEY = re.compile(r'Parser key "([^"]+)"')
_CLASS_PATH = re.compile(r"Problem with given class_path '(?:[\w.]+\.)?(\w+)'")
_REQUIRED = re.compile(r"^:?\s*the following arguments are required: ([\w, ]+)")
_LITERAL = re.compile(r"Expected a typing\.Literal\[(.*?)\](?=[. ]|$)")
_GIVEN = re.compile(r"(?:Given value|Got value): (.+?)(?= Expected a | Given value|$)")
_TYPE = re.compile(r"Expected a <class '(\w+)'>")
_IMPORT_PATH = re.compile(r"Expected a dot import path string: (\S+)")
_UNKNOWN_OPTION = re.compile(r"Option '([^']+)' is not accepted|does not accept option '([^']+)'")
_OPTION_OWNER = re.compile(r"(?:accepted by|class_path) '?([\w.]+)")
_NESTED_KEY = re.compile(r"NestedArg\(key='net\.(\w+)'")
_FIELD_VALUE = re.compile(r'Parser key "net\.(\w+)"')  # a known field of the config, with a bad value
_NET_GROUP = re.compile(r"Group 'net' does not accept")  # a recipe's field of another family's config
PATTERNS = {
    "the parser key": _KEY,
    "the class path": _CLASS_PATH,
    "the Literal's choices": _LITERAL,
    "the given value": _GIVEN,
    "the expected type": _TYPE,
    "the import path": _IMPORT_PATH,
    "the unknown option": _UNKNOWN_OPTION,
    "the option's owner": _OPTION_OWNER,
    "the config field jsonargparse could not place": _NESTED_KEY,
    "the config field of a bad value": _FIELD_VALUE,
    "the config group": _NET_GROUP,
}
_TYPE_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string", "NoneType": "null"}


def flag_of(message: str) -> str | None:
    """`--model.lr` for a report about `model` -> class_path -> `lr` (short flags, without init_args)."""
    flat = " ".join(message.split())
    outer = _KEY.search(flat)
    if outer is None:
        return None
    key = outer.group(1)
    nested = _CLASS_PATH.search(flat, outer.end())
    if nested is not None:
        inner = _KEY.search(flat, nested.end())
        if inner is not None:
            key = f"{key}.{inner.group(1)}"
    return f"--{key}"


def abbreviation_sentence(words: list[str], known: set[str], message: str | None = None, owner: str = "") -> str | None:
    """A sentence for the first option in `words` that is not one of the `known` option names but begins
    one (`--seed` for `--seed_everything`): options are never expanded, so it is named in full. With a
    parser's error `message`, only an option that message is about; `owner` names whose options these are."""
    for word in words:
        option = word.partition("=")[0]
        if not option.startswith("--") or option in known:
            continue
        if message is not None and option[2:].split(".", 1)[-1] not in message:
            continue
        longer = sorted(name for name in known if name.startswith(option))
        if longer:
            return (
                f"{option} is not an option{owner}, and options are not abbreviated; write it in full: {' or '.join(longer[:4])}."
            )
    return None


def unknown_net_field(message: str) -> str | None:
    """The field of `--model.net.<field>` that jsonargparse could not place (it reports the value as a
    NestedArg that no type takes), or None for another error."""
    found = _NESTED_KEY.search(message)
    if found is None or any(field == found.group(1) for field in _FIELD_VALUE.findall(message)):
        return None  # a field it knows, given a bad value (`--model.net.pool max`): parser_error_sentence says it
    return found.group(1)


def unknown_field_sentence(field: str, config_class: type | None) -> str:
    """`--model.net.<field>` is no field of `config_class` (None: the task is unknown, so every family's
    fields are the choices): the valid fields, and the closest one when a name is near."""
    if field in SETTINGS:  # kv_heads, query_scale, ...: part of the variant, which a grid varies by arms
        return (
            f"`{field}` is a setting of the attention variant, not a field of the model config: write it after the "
            f"variant's name, as in --model.attention {SETTING_EXAMPLES[field]}; to compare values, make each a "
            f"variant, as in compare --variants {SETTING_EXAMPLES[field]},{SETTING_EXAMPLES[field].split(',')[0]}."
        )
    if field in SPEC_FIELDS:  # query, key, value, value_mix: the variant's axes
        return (
            f"`{field}` is an axis of the attention variant, not a field of the model config: give it in the variant, "
            f"as in --model.attention {AXES_EXAMPLE}."
        )
    names = config_class.field_names() if config_class is not None else sorted(CONFIG_FIELDS)
    owner = f"of {config_class.__name__}" if config_class is not None else "of the model configs"
    close = difflib.get_close_matches(field, names, n=1)
    guess = f"; did you mean `{close[0]}`?" if close else "."
    return f"Unknown option `--model.net.{field}`; the valid fields {owner} are {', '.join(names)}{guess}"


def parser_error_sentence(message: str, classes: dict[str, list[str]] | None = None) -> str:
    """One sentence for a jsonargparse error `message`; `classes` maps `model`/`data` to their valid
    short class names, for a class name that does not exist."""
    flat = " ".join(message.split())
    unknown = _UNKNOWN_OPTION.search(flat)
    if unknown:
        owner = _OPTION_OWNER.search(flat)
        where = f" by {owner.group(1)}" if owner else ""
        option = unknown.group(1) or unknown.group(2)
        if _NET_GROUP.search(flat):  # a field of another family's config
            return unknown_field_sentence(option, config_class_of(owner.group(1)) if owner else None)
        if option in CONFIG_FIELDS:  # the flat arguments of earlier versions
            return (
                f"Option {option!r} is not accepted{where}: the model's architecture is its config `net`, so "
                f"write --model.net.{option} (in a recipe, under model.init_args.net)."
            )
        return f"Option {option!r} is not accepted{where}."
    flag = flag_of(flat)
    if flag is None:  # about no key: jsonargparse's own sentence (`unrecognized arguments: --x`) names the words
        return flat.rstrip(".") + "."
    missing_class = _IMPORT_PATH.search(flat)
    if missing_class and flag.lstrip("-") in (classes or {}):
        choices = ", ".join(classes[flag.lstrip("-")])
        return f"{flag} {missing_class.group(1)!r} is not one of this suite's classes; valid choices are {choices}."
    given = _leaf(_given_value(flat), flag.lstrip("-").split(".")[1:])
    if flag == "--seed_everything":
        return (
            f"--seed_everything {given!r} is invalid; give a whole number from 0 (a run is kept, resumed and compared "
            "under seed_<n>, so its seed is chosen before it starts: `fit --seed_everything true` on the command "
            "line draws one, a recipe or a run whose ranks torchrun or srun start gives the number)."
        )
    nested = _CLASS_PATH.search(flat)
    required = _REQUIRED.search(flat[nested.end() :]) if nested is not None else None
    if required:  # a class given without an argument it has no default for (a CSVLogger without save_dir)
        names = [name.strip() for name in required.group(1).split(",")]
        return (
            f"{flag} {nested.group(1)} needs {', '.join(names)}, which it has no default for; add "
            + " and ".join(f"{flag}.{name} <value>" for name in names)
            + " (or set it under init_args in the recipe)."
        )
    if nested is not None:  # what follows is about the inner key; the NoneType there is the class's own option
        flat = flat[nested.end() :].replace("Expected a <class 'NoneType'>", "")
    literals = _LITERAL.findall(flat)
    if literals:
        choices = list(dict.fromkeys(choice.strip().strip("'\"") for group in literals for choice in group.split(",")))
        if "NoneType" in flat:
            choices.append("null")
        return f"{flag} {given!r} is invalid; valid choices are {', '.join(choices)}."
    types = [name for name in dict.fromkeys(_TYPE.findall(flat)) if name != "NestedArg"]
    if types:
        wanted = " or ".join(_TYPE_WORDS.get(name, f"a {name}") for name in types)
        return f"{flag} {given!r} is invalid; it must be {wanted}."
    return f"{flag} is invalid: {flat.rstrip('.')}."


def config_class_without(parser, words: list[str], field: str) -> type | None:
    """The task's config class, from the command line `words` parsed again without `--model.net.<field>`
    (None when that still fails: the choices are then every family's fields)."""
    option = re.compile(rf"--model\.(?:init_args\.)?net\.{field}(=|$)")
    kept = [
        w
        for i, w in enumerate(words)
        if not option.match(w) and not (i and option.fullmatch(words[i - 1]) and not w.startswith("--"))
    ]
    try:
        config = parser.parse_args(kept)
    except ArgumentError:
        return None
    subcommand = config.get("subcommand")
    model = (config[subcommand] if subcommand else config).get("model")
    return config_class_of(model.class_path) if model is not None and model.get("class_path") else None


def config_class_of(task_path: str) -> type | None:
    """The config dataclass of the task class at `task_path` (`lit_attention.training.tasks.GPT...`)."""
    module, _, name = task_path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name).config_class
    except (ImportError, AttributeError, ValueError):
        return None


def _leaf(given: str | None, path: list[str]) -> str | None:
    """The value at `path` (["net", "dim"]) when jsonargparse reports a recipe's whole block
    ({'init_args': {'net': {'dim': 'sixty-four'}}}) as the given value; else `given` as it is."""
    if not given or not given.startswith("{"):
        return given
    try:
        tree = ast.literal_eval(given)
    except (ValueError, SyntaxError):
        return given
    for key in path:
        while isinstance(tree, dict) and key not in tree and "init_args" in tree:
            tree = tree["init_args"]
        if not isinstance(tree, dict) or key not in tree:
            return given
        tree = tree[key]
    return str(tree)


def _given_value(flat: str) -> str | None:
    found = _GIVEN.findall(flat)
    if not found:
        return None
    value = found[-1].strip()
    nested = re.fullmatch(r"NestedArg\(key='[^']*', val='(.*)'\)", value)
    return nested.group(1) if nested else value
