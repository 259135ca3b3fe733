"""Which grid point each arm is scored at, and whether that choice can be trusted:

* `tuned_points`: each arm's grid point with the best mean validation value over its seeds, a tie (equal
  means, to rounding) going to the lower setting (TIE_RULE, printed under a table where it decided);
* `edge_flags`: a choice at an end of a numeric grid axis says the optimum may lie past the grid, and
  every difference built on it inherits that; `extension` proposes the next point past that end, at
  the ratio of the grid's last step, which `compare --extend-edges` runs;
* `cross_fit`: the point chosen on one half of the seeds and scored on the other, both ways, so that
  the seeds that choose a point never also score it.

A point is a tuple of (key, value) pairs as `--grid` gave them (values stay the strings a run was
given, so a point names the same run directory whatever the arithmetic).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass


@dataclass
class Cell:
    """The runs of one arm at one grid point."""

    arm: str
    point: tuple
    states: list  # of runs.RunState

    @property
    def records(self) -> list[dict]:
        return [s.record for s in self.states if s.record is not None]

    def by_seed(self, value) -> dict[int, float]:
        return {
            state.run.seed: found
            for state in self.states
            if state.record is not None and (found := value(state.record)) is not None
        }

    def records_by_seed(self) -> dict[int, dict]:
        return {state.run.seed: state.record for state in self.states if state.record is not None}


def cells_of(plan, states) -> dict[tuple[str, tuple], Cell]:
    """{(arm, point): Cell} for every point each arm ran at, holding the states of its runs."""
    cells = {(arm, point): Cell(arm, point, []) for arm in plan.arms for point in plan.points_of(arm)}
    for state in states:
        cells[(state.run.arm, state.run.point)].states.append(state)
    return cells


@dataclass(frozen=True)
class Edge:
    """The tuned point's value of `key` is the `side` ("lowest" or "highest") the arm tried."""

    key: str
    side: str
    value: str

    def __str__(self) -> str:
        return f"{self.key.split('.')[-1]}={self.value} is the {self.side} tried"


def mean_best(cell, seeds=None) -> float | None:
    """The mean best validation value of a cell's runs (of `seeds` only, when given); None without any."""
    values = [v for seed, v in cell.by_seed(best_value).items() if seeds is None or seed in seeds]
    return statistics.fmean(values) if values else None


def best_value(record: dict) -> float | None:
    return record["best"]["value"] if record.get("best") else None


def choose_point(cells: dict, points: list[tuple], mode: str, seeds=None) -> tuple | None:
    """The point of `cells` ({point: Cell} of one arm) with the best mean validation value over `seeds`
    (all when None), ties broken by TIE_RULE. Only points where every one of those seeds finished take
    part (a learning rate that diverged on some seeds must not win on its survivors), unless no point is
    complete."""
    return choose_point_and_ties(cells, points, mode, seeds)[0]


def choose_point_and_ties(cells: dict, points: list[tuple], mode: str, seeds=None) -> tuple[tuple | None, list]:
    """`choose_point`'s point, and the other points that tied with it (empty when none did)."""

    def complete(point) -> bool:
        return all(s.record is not None for s in cells[point].states if seeds is None or s.run.seed in seeds)

    candidates = [p for p in points if complete(p)] or points
    scored = [(m, p) for p in candidates if (m := mean_best(cells[p], seeds)) is not None]
    return best_of(scored, mode)


# Records hold float32 metrics (about 7 digits), so the same number of correct items over the seeds,
# split differently between them, can average to means that differ near 1e-8. Closer than this
# (relative), means are equal; distinct accuracies over a few hundred validation items differ by 1e-4
# or more.
TIE_TOLERANCE = 1e-6
TIE_RULE = (
    "grid points whose mean validation values agree within 1e-6 (relative: the records keep float32 "
    "values) are equal, and the "
    "lower setting is chosen (the lower value of the grid's first key, then of the next): where validation "
    "cannot tell two rates apart, the lower is the conservative one, and the rule does not depend on the "
    "order the points were listed or extended in. No test value takes part."
)


def best_of(scored: list[tuple[float, tuple]], mode: str) -> tuple[tuple | None, list]:
    """(the point with the best score of `scored` [(score, point)], the others tied with it), the tie
    going to the lowest point by `setting_order`; (None, []) for nothing scored."""
    if not scored:
        return None, []
    best = (max if mode == "max" else min)(m for m, _ in scored)
    tied = [p for m, p in scored if abs(m - best) <= TIE_TOLERANCE * max(abs(m), abs(best))]
    chosen = min(tied, key=setting_order)
    return chosen, [p for p in tied if p != chosen]


def setting_order(point: tuple) -> tuple:
    """A point's settings in order, numbers as numbers (before words, which go alphabetically)."""
    return tuple((0, number, "") if (number := _number(value)) is not None else (1, 0.0, value) for _, value in point)


def tuned_points(plan, cells: dict, mode: str) -> dict[str, tuple]:
    """{arm: its grid point with the best mean best-validation value over its seeds}."""
    return {arm: point for arm, (point, _) in tuned_choices(plan, cells, mode).items()}


def tuned_choices(plan, cells: dict, mode: str) -> dict[str, tuple[tuple, list]]:
    """{arm: (its tuned point, the points that tied with it)}."""
    tuned = {}
    for arm in plan.arms:
        points = plan.points_of(arm)
        point, ties = choose_point_and_ties({p: cells[(arm, p)] for p in points}, points, mode)
        if point is not None:
            tuned[arm] = (point, ties)
    return tuned


def ties_note(ties: dict[str, tuple[tuple, list]], label) -> str:
    """The tie rule and the choices it decided ({who: (chosen, tied points)}), or "" when none tied."""
    decided = {who: (point, others) for who, (point, others) in ties.items() if others}
    if not decided:
        return ""
    names = "; ".join(f"{who}: {label(point)} over {', '.join(map(label, others))}" for who, (point, others) in decided.items())
    return f"\n**Ties:** {TIE_RULE} Decided here: {names}.\n"


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def axis_line(point: tuple, key: str, points: list[tuple]) -> list[str]:
    """The values of `key` among `points` that agree with `point` on every other key: the grid axis
    through `point`."""
    others = [(k, v) for k, v in point if k != key]
    return list(dict.fromkeys(dict(p)[key] for p in points if [(k, v) for k, v in p if k != key] == others))


def edge_flags(point: tuple, points: list[tuple]) -> list[Edge]:
    """The numeric axes along which `point` is the lowest or highest value tried (an axis of one value,
    or of words such as an optimizer's name, has no edge)."""
    edges = []
    for key, value in point:
        line = axis_line(point, key, points)
        numbers = [_number(v) for v in line]
        if len(line) < 2 or None in numbers:
            continue
        if _number(value) == max(numbers):
            edges.append(Edge(key, "highest", value))
        elif _number(value) == min(numbers):
            edges.append(Edge(key, "lowest", value))
    return edges


def extension(point: tuple, edge: Edge, points: list[tuple]) -> tuple | None:
    """The point one step past `edge`: the ratio of the axis's last step when its values are positive
    (3e-3 after 1e-3, 3e-3 gives 9e-3), the difference otherwise; None when that would cross zero or
    round back onto the edge (an integer axis)."""
    line = sorted((_number(v), v) for v in axis_line(point, edge.key, points))
    (near, _), (end, end_text) = (line[-2], line[-1]) if edge.side == "highest" else (line[1], line[0])
    beyond = end * (end / near) if near * end > 0 else end + (end - near)
    numbers = [n for n, _ in line]
    if (min(numbers) >= 0 > beyond) or (max(numbers) <= 0 < beyond):  # past zero: another kind of value
        return None
    integers = all(v.lstrip("+-").isdigit() for _, v in line)
    text = str(round(beyond)) if integers else f"{beyond:.4g}"
    if _number(text) == end or text == end_text:
        return None
    if min(numbers) > 0 >= _number(text) or max(numbers) < 0 <= _number(text):  # rounded onto or past zero
        return None
    return tuple((k, text if k == edge.key else v) for k, v in point)


@dataclass(frozen=True)
class CrossFit:
    """One arm's cross-fitted choice: the point chosen on each half of the seeds, and each seed's value
    at the point the *other* half chose."""

    first_half: tuple[int, ...]
    second_half: tuple[int, ...]
    chosen_on_first: tuple | None
    chosen_on_second: tuple | None
    values: dict[int, float]
    tied_on_first: tuple = ()  # the points that tied with chosen_on_first (TIE_RULE chose among them)
    tied_on_second: tuple = ()


def cross_fit(cells: dict, points: list[tuple], seeds: list[int], mode: str, value) -> CrossFit | None:
    """Seeds split in two halves (the first ⌊n/2⌋ in order, then the rest); each half's seeds are scored
    with `value` at the point the other half chose on validation. None with fewer than two seeds.
    `points`: the candidates, the grid's own for the strict table (points --extend-edges added exist
    because every seed chose an edge, the scoring half's among them) or every point the arm ran."""
    if len(seeds) < 2:
        return None
    first, second = tuple(seeds[: len(seeds) // 2]), tuple(seeds[len(seeds) // 2 :])
    on_first, tied_first = choose_point_and_ties(cells, points, mode, set(first))
    on_second, tied_second = choose_point_and_ties(cells, points, mode, set(second))
    values = {}
    for half, point in ((second, on_first), (first, on_second)):
        if point is None:
            continue
        found = cells[point].by_seed(value)
        values.update({seed: found[seed] for seed in half if seed in found})
    return CrossFit(first, second, on_first, on_second, values, tuple(tied_first), tuple(tied_second))
