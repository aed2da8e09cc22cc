"""A graded QA run as tidy tables: accuracy with intervals, paired statistics, discordant cases, tokens.

The run comes from :mod:`evictlab.analysis.qa.runs` (:func:`load_reference_run` for DeerFlow's
published runs, :func:`load_qa_run` for any folder; both are importable from here too, as the
notebooks do). Everything here returns DataFrames or dataclasses; nothing is written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ...core.manifests import SCENARIOS, in_known_order
from ...core.protocol import sha256_bytes
from ...errors import ContractError
from ...intervals import (
    POWER,
    holm,
    minimum_detectable_effect,
    newcombe_paired_interval,
    small_sample_warning,
    wilson_interval,
)
from ...writers import json_document

# The run loaders live in .runs; notebooks read runs and their tables from this one module.
from .runs import (  # noqa: F401
    DEFAULT_REFERENCE_VERSION,
    REFERENCE_DIR,
    REFERENCE_VERSIONS,
    ROWS_FILE,
    RUN_FILE,
    QARun,
    load_qa_run,
    load_reference_run,
    reference_run_dir,
)
from .stats import (
    ALPHA,
    FIRST_POLICY,
    POLICIES,
    SECOND_POLICY,
    STATS_FILE,
    SUITE_OF_SOURCE,
    SUITES,
    SUMMARY_FILE,
    build_stats,
    build_summary,
)

TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")
MCNEMAR_FIELDS = ("both_correct", "only_first_correct", "only_second_correct", "both_wrong", "p_value")
#: Binomial interval methods and their names in titles.
INTERVAL_METHODS = {"wilson": "Wilson", "clopper-pearson": "exact Clopper-Pearson"}


# --------------------------------------------------------------------------- rows


def rows_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per graded answer, with the token counts of its ``usage`` as columns.

    Token columns are nullable integers: a row whose usage lacks a count has ``<NA>`` there.
    """
    records = []
    for row in rows:
        usage = row.get("usage")
        usage = usage if isinstance(usage, Mapping) else {}
        records.append({
            **{name: row[name] for name in ("row_id", "case_id", "source", "scenario", "question_type", "policy")},
            "capacity": row.get("capacity"),
            **{name: row[name] for name in ("support_all_retained", "prediction", "grade_correct", "grade_rule")},
            **{name: _token_count(usage.get(name)) for name in TOKEN_FIELDS},
        })
    frame = pd.DataFrame.from_records(records)
    for name in TOKEN_FIELDS:
        frame[name] = frame[name].astype("Int64")
    return frame


def _token_count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# --------------------------------------------------------------------------- accuracy


def clopper_pearson_interval(correct: int, cases: int, alpha: float = ALPHA) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval: beta quantiles, 0 and 1 at the ends; conservative."""
    # Imported on use: scipy.stats alone takes about a second to import.
    from scipy.stats import beta

    _check_counts(correct, cases, alpha)
    lower = 0.0 if correct == 0 else float(beta.ppf(alpha / 2, correct, cases - correct + 1))
    upper = 1.0 if correct == cases else float(beta.ppf(1 - alpha / 2, correct + 1, cases - correct))
    return lower, upper


def binomial_interval(correct: int, cases: int, alpha: float = ALPHA, method: str = "wilson") -> tuple[float, float]:
    _check_method(method)
    if method == "wilson":
        return wilson_interval(correct, cases, alpha)
    return clopper_pearson_interval(correct, cases, alpha)


def interval_label(method: str = "wilson", alpha: float = ALPHA) -> str:
    """``"95% Wilson"``: the confidence level and the method's name."""
    return f"{100 * (1 - alpha):g}% {INTERVAL_METHODS.get(method, method)}"


def _check_method(method: str) -> None:
    if method not in INTERVAL_METHODS:
        raise ContractError(f"unknown interval method {method!r}; known: {', '.join(INTERVAL_METHODS)}")


def _check_counts(correct: int, cases: int, alpha: float) -> None:
    if cases < 1 or not 0 <= correct <= cases:
        raise ContractError(f"a binomial interval needs 0 <= correct <= cases and cases >= 1, got {correct}/{cases}")
    if not 0.0 < alpha < 1.0:
        raise ContractError(f"alpha must be in (0, 1), got {alpha!r}")


def accuracy_frame(rows: pd.DataFrame, *, method: str = "wilson", alpha: float = ALPHA) -> pd.DataFrame:
    """Accuracy and its interval per scenario and per suite, for each policy.

    ``rows``: :func:`rows_frame`. Columns: ``level`` (``scenario`` or ``suite``), ``group``,
    ``source`` (the scenario's source; empty for suites), ``policy``, ``correct``, ``cases``,
    ``accuracy``, ``lower``, ``upper``, ``method``, ``alpha``. Scenarios come in protocol
    order; suites are ``official``, ``synthetic`` (each only when present) and ``overall``.
    """
    _check_method(method)
    policies = in_known_order(rows["policy"], POLICIES)
    scenarios = in_known_order(rows["scenario"], SCENARIOS)
    suite_of_row = rows["source"].map(SUITE_OF_SOURCE)
    groups: list[tuple[str, str, str, pd.Series]] = []
    for scenario in scenarios:
        mask = rows["scenario"] == scenario
        groups.append(("scenario", scenario, "/".join(sorted(set(rows.loc[mask, "source"]))), mask))
    for suite in SUITES:
        mask = pd.Series(True, index=rows.index) if suite == "overall" else suite_of_row == suite
        if mask.any():
            groups.append(("suite", suite, "", mask))
    records = []
    for level, group, source, mask in groups:
        for policy in policies:
            grades = rows.loc[mask & (rows["policy"] == policy), "grade_correct"]
            if grades.empty:
                continue
            correct, cases = int(grades.sum()), int(grades.size)
            lower, upper = binomial_interval(correct, cases, alpha, method)
            records.append(
                {"level": level, "group": group, "source": source, "policy": policy, "correct": correct,
                 "cases": cases, "accuracy": correct / cases, "lower": lower, "upper": upper,
                 "method": method, "alpha": alpha}
            )
    return pd.DataFrame.from_records(records)


def accuracy_table(accuracy: pd.DataFrame) -> pd.DataFrame:
    """Display form: one row per group, one column per policy, cells ``"23/40  57.5% [42.2, 71.5]"``."""
    cells = accuracy.assign(
        cell=[
            f"{k}/{n}  {100 * a:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"
            for k, n, a, lo, hi in zip(accuracy["correct"], accuracy["cases"], accuracy["accuracy"],
                                       accuracy["lower"], accuracy["upper"])
        ]
    )
    table = cells.pivot(index=["level", "group"], columns="policy", values="cell")
    order = list(dict.fromkeys(zip(accuracy["level"], accuracy["group"])))
    columns = list(dict.fromkeys(accuracy["policy"]))
    return table.reindex(index=pd.MultiIndex.from_tuples(order, names=["level", "group"]), columns=columns)


# --------------------------------------------------------------------------- paired statistics


def stats_frame(stats: Mapping[str, Any]) -> pd.DataFrame:
    """One row per suite of a ``qa.stats.json`` object: McNemar counts and p, bootstrap interval.

    Column names are the file's own (``only_first_correct`` = only ``first_policy`` correct);
    ``first_correct`` and ``second_correct`` are each policy's total.
    """
    try:
        first, second = stats["policies"]
        suites = stats["suites"]
    except (KeyError, TypeError, ValueError):
        raise ContractError("not a qa.stats.json object: needs 'policies' (two names) and 'suites'") from None
    records = []
    for suite in in_known_order(suites, SUITES):
        entry = suites[suite]
        mcnemar, boot = entry["mcnemar"], entry["bootstrap"]
        records.append({
            "suite": suite, "cases": entry["cases"], "first_policy": first, "second_policy": second,
            "first_correct": mcnemar["both_correct"] + mcnemar["only_first_correct"],
            "second_correct": mcnemar["both_correct"] + mcnemar["only_second_correct"],
            **{name: mcnemar[name] for name in MCNEMAR_FIELDS},
            **{name: boot[name] for name in ("mean_difference", "lower", "upper", "alpha", "iterations", "seed")},
        })
    return with_paired_intervals(pd.DataFrame.from_records(records))


def with_paired_intervals(stats: pd.DataFrame) -> pd.DataFrame:
    """:func:`stats_frame` plus what the published file lacks: a Newcombe interval per suite
    (``newcombe_lower``/``newcombe_upper``, at the bootstrap's alpha), the Holm-adjusted
    McNemar p over the suites that do not overlap (``official`` and ``synthetic``; ``overall``
    is their union and keeps its own p) and a small-sample ``warning``."""
    intervals = [
        newcombe_paired_interval(int(a), int(b), int(c), int(d), float(alpha))
        for a, b, c, d, alpha in zip(stats["both_correct"], stats["only_first_correct"],
                                     stats["only_second_correct"], stats["both_wrong"], stats["alpha"])
    ]
    separate = stats["suite"] != "overall"
    adjusted = pd.Series(stats["p_value"], dtype=float).copy()
    adjusted[separate] = holm(list(stats.loc[separate, "p_value"]))
    return stats.assign(
        newcombe_lower=[item.lower for item in intervals],
        newcombe_upper=[item.upper for item in intervals],
        holm_p_value=adjusted.to_numpy(),
        warning=[small_sample_warning(int(n)) for n in stats["cases"]],
    )


def stats_table(stats: pd.DataFrame) -> pd.DataFrame:
    """Display form of :func:`stats_frame`, as in DeerFlow's README summary, followed by the
    Holm-adjusted p, the Newcombe interval and the small-sample note."""
    first, second = stats["first_policy"].iloc[0], stats["second_policy"].iloc[0]
    return pd.DataFrame(
        {
            "cases": stats["cases"].to_numpy(),
            first: [f"{k}/{n}" for k, n in zip(stats["first_correct"], stats["cases"])],
            second: [f"{k}/{n}" for k, n in zip(stats["second_correct"], stats["cases"])],
            f"only {first}": stats["only_first_correct"].to_numpy(),
            f"only {second}": stats["only_second_correct"].to_numpy(),
            "exact McNemar p": [f"{p:.6f}" for p in stats["p_value"]],
            "difference [bootstrap CI]": [
                f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}]"
                for m, lo, hi in zip(stats["mean_difference"], stats["lower"], stats["upper"])
            ],
            **(
                {
                    "Holm p": [f"{p:.6f}" for p in stats["holm_p_value"]],
                    "Newcombe CI": [f"[{lo:+.3f}, {hi:+.3f}]" for lo, hi in
                                      zip(stats["newcombe_lower"], stats["newcombe_upper"])],
                    "note": list(stats["warning"]),
                }
                if "newcombe_lower" in stats
                else {}
            ),
        },
        index=pd.Index(stats["suite"], name="suite"),
    )


#: The suites of the protocol and their sizes: 40 LongMemEval cases, 5 synthetic guards.
SUITE_SIZES = {"official": 40, "synthetic": 5, "overall": 45}
#: Assumed shares of discordant pairs for the power table; None: all in favour of one policy.
DISCORDANCES = (None, 0.3, 0.5)


def power_frame(
    sizes: Mapping[str, int] | None = None, discordances: Sequence[float | None] = DISCORDANCES, *,
    power: float = POWER, alpha: float = ALPHA,
) -> pd.DataFrame:
    """The minimum detectable accuracy difference of the exact McNemar test per suite size.

    One row per suite x assumed discordance (``None`` = "minimal": every discordant pair
    favours the better policy, the most favourable case). ``minimum_detectable_effect`` is
    NaN when no difference is detectable at all (5 pairs never reach p <= 0.05).
    """
    records = []
    for suite, cases in (sizes or SUITE_SIZES).items():
        for discordance in discordances:
            effect = minimum_detectable_effect(cases, discordance, power=power, alpha=alpha)
            records.append(
                {"suite": suite, "cases": cases,
                 "discordance": "minimal" if discordance is None else f"{discordance:g}",
                 "power": power, "alpha": alpha,
                 "minimum_detectable_effect": math.nan if effect is None else effect}
            )  # fmt: skip
    return pd.DataFrame.from_records(records)


def power_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Display form of :func:`power_frame`: suites x discordance, "+0.195" or "none"."""
    cells = frame.assign(
        cell=["none" if math.isnan(e) else f"{e:.3f}" for e in frame["minimum_detectable_effect"]],
        label=[f"n = {n}" if s == str(n) else f"{s} (n = {n})" for s, n in zip(frame["suite"], frame["cases"])],
    )
    table = cells.pivot(index="label", columns="discordance", values="cell")
    table = table.reindex(index=list(dict.fromkeys(cells["label"])), columns=list(dict.fromkeys(cells["discordance"])))
    table.index.name, table.columns.name = "suite", "discordant pairs"
    return table


@dataclass(frozen=True)
class StatsCheck:
    """The run's stored result files against the ones recomputed from its rows.

    ``identical`` maps each file name to True (same bytes), False (different) or None (the
    run has no such file).
    """

    summary: dict[str, Any]
    stats: dict[str, Any]
    identical: dict[str, bool | None]

    @property
    def all_identical(self) -> bool:
        return all(value is True for value in self.identical.values())

    def frame(self, run: QARun) -> pd.DataFrame:
        records = []
        for name, recomputed in ((SUMMARY_FILE, self.summary), (STATS_FILE, self.stats)):
            stored = run.path / name
            records.append(
                {
                    "file": name,
                    "stored_sha256": sha256_bytes(stored.read_bytes()) if stored.exists() else None,
                    "recomputed_sha256": sha256_bytes(json_document(recomputed).encode("utf-8")),
                    "identical": self.identical[name],
                }
            )
        return pd.DataFrame.from_records(records)


def recompute(run: QARun, *, protocol_id: str | None = None) -> StatsCheck:
    """Recompute ``qa.summary.json`` and ``qa.stats.json`` from the rows and compare the bytes.

    The protocol id comes from ``protocol_id``, else from the run's files; the grader version
    from the rows. Statistics use the protocol's fixed seed, iterations and alpha.
    """
    protocol_id = protocol_id or run.protocol_id
    if protocol_id is None:
        raise ContractError(
            f"{run.path}: no protocol id in {STATS_FILE}, {SUMMARY_FILE} or {RUN_FILE}; pass protocol_id"
        )
    grader_version = run.grader_version
    if grader_version is None:
        raise ContractError(f"{run.path}: the rows name no single grader_version")
    rows = list(run.rows)
    summary = build_summary(rows, protocol_id=protocol_id, grader_version=grader_version)
    stats = build_stats(rows, protocol_id=protocol_id, grader_version=grader_version)
    identical = {
        name: (run.path / name).read_bytes() == json_document(recomputed).encode("utf-8")
        if (run.path / name).exists() else None
        for name, recomputed in ((SUMMARY_FILE, summary), (STATS_FILE, stats))
    }
    return StatsCheck(summary, stats, identical)


# --------------------------------------------------------------------------- cases and tokens


def discordant_cases(rows: pd.DataFrame) -> pd.DataFrame:
    """Cases that exactly one of the two DeerMem policies answered correctly.

    One row per case: ``case_id``, ``source``, ``scenario``, ``question_type``, ``winner``, and
    for each policy its ``prediction``, ``grade_rule`` and ``support_all_retained`` (columns
    prefixed ``confidence_`` and ``hybrid-v1_``). ``hybrid-v1``'s wins first, then its losses;
    each in scenario order, then by case id.
    """
    pairs = rows[rows["policy"].isin(POLICIES)]
    if set(pairs["policy"]) != set(POLICIES):
        return pd.DataFrame(columns=["case_id", "source", "scenario", "question_type", "winner"])
    wide = pairs.pivot(index="case_id", columns="policy",
                       values=["grade_correct", "prediction", "grade_rule", "support_all_retained"])
    first_ok = wide[("grade_correct", FIRST_POLICY)].astype(bool)
    second_ok = wide[("grade_correct", SECOND_POLICY)].astype(bool)
    discordant = wide[first_ok != second_ok]
    meta = pairs.drop_duplicates("case_id").set_index("case_id")[["source", "scenario", "question_type"]]
    out = meta.loc[discordant.index].copy()
    out["winner"] = [SECOND_POLICY if ok else FIRST_POLICY for ok in second_ok[first_ok != second_ok]]
    for policy in POLICIES:
        for column in ("prediction", "grade_rule", "support_all_retained"):
            out[f"{policy}_{column}"] = discordant[(column, policy)].to_numpy()
    scenario_rank = {s: i for i, s in enumerate(SCENARIOS)}
    out = out.reset_index()
    out["_loss"] = out["winner"] == FIRST_POLICY
    out["_order"] = out["scenario"].map(scenario_rank).fillna(len(scenario_rank))
    out = out.sort_values(["_loss", "_order", "case_id"]).drop(columns=["_loss", "_order"])
    return out.reset_index(drop=True)


def token_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Token sums and means per policy and scenario, with an ``all`` row per policy.

    Columns: ``policy``, ``scenario``, ``requests``, ``prompt_tokens``, ``completion_tokens``,
    ``total_tokens`` (sums; rows without a count add nothing) and the per-request means.
    """
    records = []
    for policy in in_known_order(rows["policy"], POLICIES):
        members = rows[rows["policy"] == policy]
        scenarios = in_known_order(members["scenario"], SCENARIOS)
        for scenario, subset in [(s, members[members["scenario"] == s]) for s in scenarios] + [("all", members)]:
            record: dict[str, Any] = {"policy": policy, "scenario": scenario, "requests": len(subset)}
            for name in TOKEN_FIELDS:
                record[name] = int(subset[name].sum())
            for name in TOKEN_FIELDS:
                counted = subset[name].dropna()
                record[f"mean_{name}"] = float(counted.mean()) if len(counted) else float("nan")
            records.append(record)
    return pd.DataFrame.from_records(records)


def token_totals(rows: pd.DataFrame) -> dict[str, int]:
    """Sums over every row: ``{"prompt_tokens": ..., "completion_tokens": ..., "total_tokens": ...}``."""
    return {name: int(rows[name].sum()) for name in TOKEN_FIELDS}


def reference_totals() -> pd.DataFrame:
    """Correct answers per policy and suite in each of DeerFlow's three published runs."""
    records = []
    for version in REFERENCE_VERSIONS:
        run = load_reference_run(version)
        stats = run.stats if run.stats is not None else recompute(run).stats
        for row in stats_frame(stats).itertuples(index=False):
            records.append(
                {"version": version, "suite": row.suite, "cases": row.cases, FIRST_POLICY: row.first_correct,
                 SECOND_POLICY: row.second_correct, "p_value": row.p_value}
            )
    return pd.DataFrame.from_records(records)


def reference_table(totals: pd.DataFrame | None = None) -> pd.DataFrame:
    """Display form of :func:`reference_totals`: suites by version, ``"23/40 vs 35/40 (p=0.0042)"``."""
    totals = reference_totals() if totals is None else totals
    cells = totals.assign(
        cell=[
            f"{first}/{n} vs {second}/{n} (p={p:.4f})"
            for first, second, n, p in zip(
                totals[FIRST_POLICY], totals[SECOND_POLICY], totals["cases"], totals["p_value"]
            )
        ]
    )
    table = cells.pivot(index="suite", columns="version", values="cell")
    return table.reindex([s for s in SUITES if s in table.index])


def reference_tokens() -> pd.DataFrame:
    """Token sums over the 90 rows of each published run."""
    return pd.DataFrame.from_records(
        [{"version": version, **token_totals(rows_frame(load_reference_run(version).rows))}
         for version in REFERENCE_VERSIONS]
    )
