"""The scorecard's verdict, summary, plots and Markdown (the rendering of a card built by
:mod:`apps.scorecard`; its module docstring states the rules)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any, Final

import numpy as np
import pandas as pd

from agents.quant.baselines import BASELINES
from apps.scorecard_metrics import NO_STATED_P, NO_VIEW_BRIER, P_COLUMN, PIPELINE, POSITION, benchmark_names
from core.display import percent, signed_percent


def _brief(m: dict[str, Any]) -> dict[str, Any]:
    return {
        k: m.get(k)
        for k in (
            "n",
            "hit_rate",
            "directional",
            "mean_signed_excess",
            "signed_excess_by_date",
            "ic",
            "brier",
            "ece",
        )
    }


def _interval(low: float | None, high: float | None, fmt: Any) -> str:
    return "" if low is None or high is None else f"[{fmt(low)}, {fmt(high)}]"


def _prop_text(p: dict[str, Any] | None) -> str:
    if not p:
        return ""
    return f"{_rate(p['rate'])} {_interval(p['low'], p['high'], _rate)}"


def _test_text(t: dict[str, Any] | None, fmt: Any) -> str:
    if not t:
        return ""
    return f"{fmt(t['mean'])} {_interval(t['low'], t['high'], fmt)}"


def _versus(low: float, high: float, value: float, above: str, below: str, same: str) -> str:
    if low > value:
        return above
    if high < value:
        return below
    return same


def verdict(card: dict[str, Any]) -> list[str]:
    """Sentences per horizon stating only what the 95 % intervals support (module docstring):
    the directional hit against 50 %, HOLD against always-HOLD, the mean signed excess, the IC
    and the Brier score against their null values, and the baselines the pipeline differs from
    (paired per-date test); an interval containing the null value is said to "not differ"."""
    lines = []
    for h in card["horizons"]:
        m = card["strategies"][PIPELINE][str(h)]
        if not m["n"]:
            continue
        d, dd = m["directional"], m["directional_by_date"]
        if d:
            # a claim needs both intervals to exclude 50 %: Wilson's (independent calls) and the
            # per-date one (calls clustered by date, overlapping windows)
            low, high = (
                (min(d["low"], dd["low"]), max(d["high"], dd["high"])) if dd else (d["low"], d["high"])
            )
            per_date = f", per date {_test_text(dd, _rate)}" if dd else ""
            lines.append(
                f"{h}d: directional hit (BUY and SELL) {_prop_text(d)} of {d['n']} calls{per_date} "
                + _versus(low, high, 0.5, "is above 50 %", "is below 50 %", "does not differ from 50 %")
                + f"; always-BUY would score {_prop_text(m['up_share'])}."
            )
        hold, base = m["signals"]["HOLD"].get("in_band"), m["hold_base"]
        if hold and base:
            relation = (
                "better than always-HOLD"
                if hold["low"] > base["high"]
                else "worse than always-HOLD"
                if hold["high"] < base["low"]
                else "no different from always-HOLD (the intervals overlap)"
            )
            lines.append(
                f"{h}d: {_prop_text(hold)} of HOLD windows stayed within ±{_pct(m['hold_band'])[1:]} of the "
                f"benchmark, against {_prop_text(base)} of all windows: {relation}."
            )
        s = m["signed_excess_by_date"]
        if s:
            lines.append(
                f"{h}d: mean signed excess per date {_test_text(s, _pct)} (Newey–West t = {s['t']:.2f}, "
                f"{s['n']} dates, {s['lags']} lags) "
                + _versus(
                    s["low"], s["high"], 0.0, "is above zero", "is below zero", "does not differ from zero"
                )
                + "."
            )
        ic = m["ic_by_date"]
        if ic:
            lines.append(
                f"{h}d: per-date IC {_test_text(ic, _dec)} (t = {ic['t']:.2f}) "
                + _versus(
                    ic["low"], ic["high"], 0.0, "is above zero", "is below zero", "does not differ from zero"
                )
                + "."
            )
        beats: list[str] = []
        loses: list[str] = []
        same: list[str] = []
        for name, test in card["comparisons"].get(str(h), {}).items():
            if not test:
                continue
            text = f"{name} ({_test_text(test, _pct)})"
            (beats if test["low"] > 0 else loses if test["high"] < 0 else same).append(text)
        parts = []
        if beats:
            parts.append(f"beats {', '.join(beats)}")
        if loses:
            parts.append(f"loses to {', '.join(loses)}")
        if same:
            parts.append(f"does not differ from {', '.join(name.split(' ')[0] for name in same)}")
        if parts:
            lines.append(
                f"{h}d: per date, the pipeline's signed excess minus each baseline's: "
                + "; ".join(parts)
                + "."
            )
        b = m["brier_by_date"]
        if m["brier"] is not None and b:
            lo, hi = b["low"] + NO_VIEW_BRIER, b["high"] + NO_VIEW_BRIER
            lines.append(
                f"{h}d: Brier {m['brier']:.3f} (per date [{lo:.3f}, {hi:.3f}]) "
                + _versus(
                    lo,
                    hi,
                    NO_VIEW_BRIER,
                    "is worse than the 0.25 of always saying 0.5 (no view)",
                    "is better than the 0.25 of always saying 0.5 (no view)",
                    "does not differ from the 0.25 of always saying 0.5 (no view)",
                )
                + f"; ECE {m['ece']:.3f} (p from {m['p_source']})."
            )
    return lines


def _pct0(value: float) -> str:
    """A share as a whole percentage (``0.523`` → ``52 %``), for sentences."""
    return percent(value, digits=0)


def summary(card: dict[str, Any]) -> list[dict[str, Any]]:
    """One card per horizon that has scored recommendations, for a reader with ten seconds:
    the pipeline's directional hit (BUY and SELL calls) with its 95 % interval against the
    base rates (50 %, a coin flip; the share of windows that beat the benchmark, what always-BUY
    scores), in words. Each ``{horizon, recommendations, calls, hit (``{successes, n, rate,
    low, high}`` or ``None``), interval ``(low, high)`` the widest of the Wilson and the
    per-date interval, up_share, verdict, headline, text}``: ``verdict`` ``better``, ``worse``
    or ``no different`` (than a coin flip), or ``no calls`` when every recommendation was HOLD
    (then ``text`` reads the HOLD windows against always-HOLD); ``headline`` the short line of
    the card. The same rule as :func:`verdict`: a claim needs both intervals to exclude 50 %."""
    cards = []
    for h in card["horizons"]:
        m = (card["strategies"].get(PIPELINE) or {}).get(str(h))
        if not m or not m["n"]:
            continue
        d, dd, up = m["directional"], m["directional_by_date"], m["up_share"]
        base = f"always-BUY scores {_pct0(up['rate'])}" if up else "always-BUY is not known"
        out: dict[str, Any] = {
            "horizon": h,
            "recommendations": m["n"],
            "calls": d["n"] if d else 0,
            "hit": d,
            "interval": None,
            "up_share": up,
        }
        if d and d["n"]:
            low, high = (
                (min(d["low"], dd["low"]), max(d["high"], dd["high"])) if dd else (d["low"], d["high"])
            )
            out["interval"] = (low, high)
            relation = _versus(low, high, 0.5, "better", "worse", "no different")
            out["verdict"] = relation
            out["headline"] = f"{_pct0(d['rate'])} of calls right"
            meaning = {
                "better": "better than a coin flip",
                "worse": "worse than a coin flip",
                "no different": "no different from a coin flip: no evidence of skill at this horizon",
            }[relation]
            out["text"] = (
                f"{d['successes']} of {d['n']} BUY and SELL calls were right after {h} trading days: "
                f"{_pct0(d['rate'])}, 95 % interval {_pct0(low)}–{_pct0(high)}. A coin flip is right "
                f"half the time and {base} here, so this is {meaning}."
            )
        else:
            hold, hold_base = m["signals"]["HOLD"].get("in_band"), m["hold_base"]
            out["verdict"] = "no calls"
            out["headline"] = "no BUY or SELL call"
            text = f"All {m['n']} recommendations were HOLD: no directional call to score."
            if hold and hold_base:
                relation = (
                    "better than"
                    if hold["low"] > hold_base["high"]
                    else "worse than"
                    if hold["high"] < hold_base["low"]
                    else "no different from"
                )
                text += (
                    f" {_pct0(hold['rate'])} of their windows stayed within ±{_pct(m['hold_band'])[1:]} of "
                    f"the benchmark, against {_pct0(hold_base['rate'])} of all windows: {relation} "
                    "always-HOLD."
                )
            out["text"] = text
        cards.append(out)
    return cards


#: The scorecard's plots, in the order they are written: name → file name in ``out_dir``.
PLOTS: Final = {"calibration": "calibration.png", "cumulative_excess": "cumulative_excess.png"}


def write_plots(
    both: pd.DataFrame, *, card: dict[str, Any], out_dir: Path, only: Collection[str] | None = None
) -> dict[str, str]:
    """Write ``calibration.png`` (the pipeline's calibration curve per horizon, with the
    diagonal and the bin counts) and ``cumulative_excess.png`` (cumulative signed excess of every
    strategy at the shortest horizon, module docstring) to ``out_dir``, or only the plots named
    in ``only`` (names of :data:`PLOTS`: the console serves one plot per request); returns
    ``{name: path}`` of those written. Raises ``ValueError`` for a name not in :data:`PLOTS`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib is a second to import

    wanted = list(PLOTS) if only is None else [name for name in PLOTS if name in only]
    unknown = set(only or ()) - set(PLOTS)
    if unknown:
        raise ValueError(f"no plot {sorted(unknown)}: one of {', '.join(PLOTS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    draw = {"calibration": _calibration_figure, "cumulative_excess": _cumulative_figure}
    written: dict[str, str] = {}
    for name in wanted:
        fig = draw[name](both, card=card, plt=plt)
        fig.tight_layout()
        path = out_dir / PLOTS[name]
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written[name] = str(path)
    return written


def _calibration_figure(both: pd.DataFrame, *, card: dict[str, Any], plt: Any) -> Any:
    """The calibration figure of :func:`write_plots` (a matplotlib ``Figure``, not yet laid out)."""
    selection = card["selection"]["backtest"] or "all recommendations"
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 7.5), height_ratios=(3, 1), sharex=True)
    top.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfectly calibrated")
    flat: list[str] = []
    for h in card["horizons"]:
        m = card["strategies"][PIPELINE][str(h)]
        bins = m.get("calibration") or []
        if not bins:
            continue
        if len(bins) == 1 and abs(bins[0]["mean_p"] - 0.5) < 1e-9:
            # every p is 0.5: one dot would read as a calibrated forecast; say what it is
            flat.append(f"{h}d: all {bins[0]['n']} recommendations at p = 0.5 (abstained or HOLD)")
            continue
        xs, ys = [b["mean_p"] for b in bins], [b["observed"] for b in bins]
        top.plot(xs, ys, marker="o", label=f"{h}d (Brier {m['brier']:.3f}, ECE {m['ece']:.3f})")
        bottom.bar(
            [b["lower"] + (card["horizons"].index(h) + 0.5) / (len(card["horizons"]) * 10) for b in bins],
            [b["n"] for b in bins],
            width=0.1 / len(card["horizons"]),
            label=f"{h}d",
        )
    if flat:
        top.text(
            0.5,
            0.12,
            "No calibration curve:\n" + "\n".join(flat),
            ha="center",
            va="bottom",
            fontsize=9,
            bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "grey"},
        )
    top.set_ylabel("observed share outperforming the benchmark")
    top.set_title(f"Calibration of the pipeline's p(outperform): {selection}")
    top.set_xlim(0, 1)
    top.set_ylim(0, 1)
    top.legend(loc="upper left", fontsize=8)
    sources = {card["strategies"][PIPELINE][str(h)].get("p_source") for h in card["horizons"]}
    bottom.set_xlabel(
        "p(outperform) = 0.5 ± confidence/2 (BUY +, SELL −, HOLD 0.5): reports without a calibrated p"
        if sources == {"confidence"}
        else "calibrated p(outperform) stated in the reports (0.5 where the calibration abstained)"
        if sources == {P_COLUMN}
        else "p(outperform): calibrated where every report states one, else 0.5 ± confidence/2"
    )
    bottom.set_ylabel("recommendations")
    if bottom.get_legend_handles_labels()[0]:  # no bars when every horizon is flat
        bottom.legend(fontsize=8)
    return fig


def _cumulative_figure(both: pd.DataFrame, *, card: dict[str, Any], plt: Any) -> Any:
    """The cumulative-excess figure of :func:`write_plots` (a matplotlib ``Figure``, not yet
    laid out)."""
    import empyrical  # type: ignore[import-untyped]  # lazy: scipy behind it
    import matplotlib

    selection = card["selection"]["backtest"] or "all recommendations"
    h = min(card["horizons"])
    fig, ax = plt.subplots(figsize=(9, 5))
    sub = both[both["horizon"] == h].assign(signed=lambda f: f["signal"].map(POSITION) * f["excess_return"])
    for strategy in [PIPELINE, *BASELINES]:
        grouped = sub[sub["strategy"] == strategy].groupby("as_of")
        per_date = grouped["signed"].mean().sort_index()
        if per_date.empty:
            continue
        # each period's return is plotted where it is realised (its end date), from 0 at the start
        ends = grouped["end_date"].max().sort_index()
        curve = np.concatenate([[0.0], empyrical.cum_returns(per_date.to_numpy())])
        ax.plot(
            pd.to_datetime([per_date.index[0], *ends.to_list()]),
            curve,
            label=strategy,
            linewidth=2.2 if strategy == PIPELINE else 1.2,
        )
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_ylabel(f"cumulative signed excess return ({h}d holding, compounded)")
    bench = benchmark_names(card["benchmark"] or [])
    ax.set_title(f"Following the signals vs {bench} ({card['entry']} entry): {selection}", fontsize=10)
    ax.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    ax.legend(fontsize=8)
    fig.autofmt_xdate()
    return fig


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    if value is None:
        return ""
    return signed_percent(round(value, 4) + 0.0)  # + 0.0: no "-0.00 %" for a rounding residue


def _rate(value: float | None) -> str:
    return "" if value is None else percent(value, digits=1)


def _dec(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


#: The columns of a horizon's table of strategies.
STRATEGY_COLUMNS: Final = (
    "strategy",
    "n",
    "BUY+SELL n",
    "directional hit [95 %]",
    "BUY n",
    "BUY hit",
    "SELL n",
    "SELL hit",
    "HOLD n",
    "HOLD in band [95 %]",
    "mean signed excess",
    "per date [95 %]",
    "NW t",
    "IC per date",
    "IC t",
    "Brier",
    "ECE",
)


def markdown(card: dict[str, Any]) -> str:
    """The scorecard as Markdown: the entry rule and benchmark, one table per horizon (pipeline
    and baselines: directional hit with its Wilson 95 % interval, BUY and SELL hits, HOLD against
    always-HOLD, mean signed excess per date with its Newey–West interval, per-date IC, Brier,
    ECE; the entry rule in every heading), the base rates, the paired comparisons with the
    baselines, the pipeline's reliability table beside the 0.25 no-view baseline, the verdict,
    the notes (survivorship, stale rows) and the breakdowns."""
    sel = card["selection"]
    title = f"backtest {sel['backtest']}" if sel["backtest"] else "all recommendations"
    if sel["since"]:
        title += f" since {sel['since']}"
    rule = card["entry_rule"]
    lines = [f"# Scorecard: {title}", "", f"Entry rule: {rule}.", ""]
    if not card["strategies"]:
        empty = (
            "No score on this basis: every stored one is stale (see the note)."
            if card["stale"]
            else "No recommendation has a matured horizon yet."
        )
        return "\n".join([*lines, empty, "", *[f"> {n}" for n in card["notes"]], ""])
    lines += [
        f"{card['recommendations']} recommendations; benchmark: {benchmark_names(card['benchmark'])} "
        f"(configured: {card['benchmark_spec']}). Excess = forward return − benchmark return over the "
        "same dates, both entered by the same rule (adjusted prices). Brackets: 95 % intervals (Wilson "
        "for shares; Newey–West over the per-date series for means, module docstring).",
        "",
    ]
    for h in card["horizons"]:
        lines += _strategy_table(card, h)
        m = card["strategies"][PIPELINE][str(h)]
        lines += [
            "",
            f"Base rates at {h}d ({m['dates']} dates, Newey–West lags {m['lags']}): "
            f"{_prop_text(m['up_share'])} of all windows beat the benchmark (the directional hit of "
            f"always-BUY); {_prop_text(m['hold_base'])} stayed within ±{_pct(m['hold_band'])[1:]} of it "
            "(the HOLD in-band share of always-HOLD).",
            "",
        ]
        lines += _comparisons_markdown(card, h)
        lines += _reliability_markdown(m, h)
    lines += ["## Verdict", "", *[f"- {v}" for v in card["verdict"]], ""]
    if any(b.startswith("equal-weighted") for b in card["benchmark"]):
        lines += [
            "No benchmark symbol covers these dates, so the benchmark is the equal-weighted universe of "
            "the run: buy-and-hold of the same symbols is then the benchmark itself (excess 0 by "
            "construction), as for any strategy that says BUY on every grid point.",
            "",
        ]
    lines += [*[f"> {n}" for n in card["notes"]], ""] if card["notes"] else []
    lines += _breakdown_markdown(card)
    lines += [
        "Directional hit: BUY right when excess > 0, SELL when < 0 (HOLD makes no directional call). "
        "HOLD in band: share of HOLD windows with |excess| < 1 % × √h, judged against the same share "
        "over all windows (always-HOLD). Mean signed excess: (+1 BUY, 0 HOLD, −1 SELL) × excess; its "
        "test averages each date first, then a Newey–West t with lags ceil(h/step) − 1 for the "
        "overlapping windows. IC: Spearman of score vs excess across the tickers of each date, "
        "averaged over dates, Newey–West t. Brier/ECE: p(outperform) against excess > 0.",
        "",
    ]
    from apps.scorecard_risk import risk_markdown

    lines += risk_markdown(card.get("risk"))
    if card["plots"]:
        lines += [f"Plots: {card['plots']['calibration']}, {card['plots']['cumulative_excess']}", ""]
    return "\n".join(lines)


def _strategy_table(card: dict[str, Any], h: int) -> list[str]:
    """The heading of horizon ``h`` (its entry rule) and its table: one row per strategy
    (:data:`STRATEGY_COLUMNS`), then the note on the baselines' p when one states none."""
    lines = [
        f"## {h} trading days ({card['entry']} entry: {card['entry_rule']})",
        "",
        "| " + " | ".join(STRATEGY_COLUMNS) + " |",
        "|" + "---|" * len(STRATEGY_COLUMNS),
    ]
    for name, per in card["strategies"].items():
        m = per[str(h)]
        buy, sell, hold = (m["signals"].get(sig) or {} for sig in ("BUY", "SELL", "HOLD"))
        s, ic = m["signed_excess_by_date"], m["ic_by_date"]
        cells = [
            name,
            str(m["n"]),
            str(m["directional"]["n"] if m["directional"] else 0),
            _prop_text(m["directional"]),
            str(buy.get("n", 0)),
            _rate(buy.get("hit_rate")),
            str(sell.get("n", 0)),
            _rate(sell.get("hit_rate")),
            str(hold.get("n", 0)),
            _prop_text(hold.get("in_band")),
            _pct(m["mean_signed_excess"]),
            _test_text(s, _pct),
            f"{s['t']:.2f}" if s else "",
            _dec(m["ic"]),
            f"{ic['t']:.2f}" if ic else "",
            _dec(m["brier"]) + (" (no p stated)" if m["p_source"] == NO_STATED_P else ""),
            _dec(m["ece"]) + (" (no p stated)" if m["p_source"] == NO_STATED_P else ""),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if any(per[str(h)]["p_source"] == NO_STATED_P for per in card["strategies"].values()):
        lines += [
            "",
            "The baselines state no probability: they are scored at p = 0.5 (no view), so their "
            "Brier is 0.25 by construction and their ECE is only the distance of the base rate "
            "from 0.5; neither says anything about the baseline.",
        ]
    return lines


def _comparisons_markdown(card: dict[str, Any], h: int) -> list[str]:
    """The pipeline minus each baseline at horizon ``h`` (signed excess per date, paired), with
    whether its interval separates from 0; empty without comparisons."""
    comparisons = card["comparisons"].get(str(h), {})
    if not comparisons:
        return []
    lines = [
        f"Pipeline minus baseline, signed excess per date ({card['entry']} entry):",
        "",
        "| baseline | difference [95 %] | NW t | dates | separates from 0 |",
        "|---|---|---|---|---|",
    ]
    for name, t in comparisons.items():
        if t:
            separates = "yes" if t["low"] > 0 or t["high"] < 0 else "no"
            lines.append(f"| {name} | {_test_text(t, _pct)} | {t['t']:.2f} | {t['n']} | {separates} |")
    return [*lines, ""]


def _reliability_markdown(m: dict[str, Any], h: int) -> list[str]:
    """The reliability table of the pipeline's p at horizon ``h`` (``m``: its metrics) beside the
    no-view Brier; empty without calibration bins."""
    if not m["calibration"]:
        return []
    return [
        f"Reliability of the pipeline's p (from {m['p_source']}) at {h}d: Brier {_dec(m['brier'])} "
        f"against {NO_VIEW_BRIER} for always saying 0.5 (no view); ECE {_dec(m['ece'])} "
        "(10 equal-width bins, weighted by count).",
        "",
        "| bin | n | mean p | realised frequency |",
        "|---|---|---|---|",
        *[
            f"| {b['lower']:.1f}–{b['upper']:.1f} | {b['n']} | {b['mean_p']:.3f} | {b['observed']:.3f} |"
            for b in m["calibration"]
        ],
        "",
    ]


def _breakdown_markdown(card: dict[str, Any]) -> list[str]:
    """One table per breakdown (analyst, model, prompt version): brief metrics per value and horizon."""
    lines: list[str] = []
    for key, groups in card["breakdown"].items():
        lines += [
            f"## By {key.replace('_', ' ')} ({card['entry']} entry)",
            "",
            "| value | horizon | n | directional hit [95 %] | mean signed excess per date [95 %] "
            "| IC | Brier | ECE |",
        ]
        lines.append("|---|---|---|---|---|---|---|---|")
        for value, per in groups.items():
            for h, b in per.items():
                lines.append(
                    f"| {value} | {h}d | {b['n']} | {_prop_text(b['directional'])} "
                    f"| {_test_text(b['signed_excess_by_date'], _pct)} "
                    f"| {_dec(b['ic'])} | {_dec(b['brier'])} | {_dec(b['ece'])} |"
                )
        lines.append("")
    return lines
