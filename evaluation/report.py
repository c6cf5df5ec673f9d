"""A run's report: `report.json` (every turn's values, per game and overall, with intervals),
`report.md` (the table beside the paper's, marked as theirs), plots and a contact sheet per game;
and the comparison of several runs (`animegamer eval --compare`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evaluation import paper
from evaluation.compare import GameValues, difference_ci, mean_ci
from evaluation.errors import EvalInputError
from evaluation.games_file import STATES, EvalGame
from evaluation.metrics import BETTER, COMBINE, KEYS, LABELS, combine
from evaluation.plots import Series, write_plots
from evaluation.sheets import contact_sheet
from film.atomic import write_bytes

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
PRED_KEYS = ("motion_level", *STATES)


def _turn_entry(turn, record: dict, scores: dict) -> dict:
    return {
        "turn": turn.index + 1, "instruction": turn.instruction, "character": turn.character, "seed": record["seed"],
        "environment": turn.environment, "clip": record["clip"],
        "asked": {"motion_level": turn.motion_level, **dict(zip(STATES, turn.states, strict=True))},
        "predicted": dict(zip(PRED_KEYS, record["predicted"], strict=True)),
        "measured_level": scores["measured_level"], "motion_flow": scores["motion_flow"],
        "sampled_frames": scores["sampled"], "values": scores["values"],
    }


def game_values(games: list[dict], key: str) -> GameValues:
    return GameValues.of([(g["id"], [t["values"].get(key) for t in g["turns"]]) for g in games])


def by_turn_index(games: list[dict], key: str) -> list[float | None]:
    longest = max(len(g["turns"]) for g in games)
    return [combine(key, [g["turns"][i]["values"].get(key) for g in games if i < len(g["turns"])])
            for i in range(longest)]


def summarise(games: list[dict], seed: int = 0) -> dict[str, dict]:
    """Per metric: its value over all turns, its 95 % interval over games (mean metrics), counts."""
    out = {}
    for key in KEYS:
        values = [t["values"].get(key) for g in games for t in g["turns"]]
        ci = mean_ci(game_values(games, key), seed=seed) if COMBINE[key] == "mean" else None
        out[key] = {"value": combine(key, values), "ci95": list(ci) if ci else None,
                    "turns": sum(v is not None for v in values), "by_turn": by_turn_index(games, key)}
    return out


def build_report(config: dict, games: list[EvalGame], records: list[list[dict]], scores: list[list[dict]],
                 not_measured: dict[str, str]) -> dict[str, Any]:
    entries = []
    for game, recs, scs in zip(games, records, scores, strict=True):
        turns = [_turn_entry(t, r, s) for t, r, s in zip(game.turns, recs, scs, strict=True)]
        summary = {k: combine(k, [t["values"].get(k) for t in turns]) for k in KEYS}
        entries.append({"id": game.id, "character": game.character, "line": game.line, "turns": turns,
                        "summary": summary})
    return {
        "run": config, "games": entries, "summary": summarise(entries, config.get("seed", 0)),
        "not_measured": not_measured, "labels": LABELS, "better": BETTER,
        "paper": {"source": paper.SOURCE, "animegamer": {k: v[0] for k, v in paper.TABLE1.items()},
                  "best_baseline_gc": {k: v[1] for k, v in paper.TABLE1.items()}},
    }


def _f(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _ci(ci) -> str:
    return "—" if not ci else f"[{ci[0]:.4f}, {ci[1]:.4f}]"


def run_label(config: dict) -> str:
    if config.get("backend") == "preview":
        return "preview"
    return f"{config.get('backend')} {config.get('memory_mode')} {config.get('preset')}"


def markdown(report: dict) -> str:
    run, summary, missing = report["run"], report["summary"], report["not_measured"]
    turns = sum(len(g["turns"]) for g in report["games"])
    lines = [
        f"# Evaluation of {run['film']}: {run_label(run)}", "",
        f"{len(report['games'])} games, {turns} turns from `{run['games_file']}` ({run['split']}); backend "
        f"{run['backend']}, memory mode {run['memory_mode']}, preset {run['preset']}, seed {run['seed']}, "
        f"history window {run['history_window']}, decoder steps {run['decoder_steps']}.", "",
        "| metric | ours | 95 % CI over games | paper: AnimeGamer (theirs) | paper: best baseline GC (theirs) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for key in KEYS:
        s = summary[key]
        theirs = paper.TABLE1.get(key)
        ours = _f(s["value"]) if s["value"] is not None else missing.get(key, "not measured")
        lines.append(f"| {LABELS[key]} ({BETTER[key]}er is better) | {ours} | {_ci(s['ci95'])} | "
                     f"{_f(theirs[0]) if theirs else '—'} | {_f(theirs[1]) if theirs else '—'} |")
    lines += ["", f"Paper figures: {paper.SOURCE}, on their own test set and metric models; for scale only.", ""]
    if run["backend"] == "preview":
        lines += ["The preview backend renders labelled stand-in clips without a model: these figures test the "
                  "evaluation, not AnimeGamer.", ""]
    if missing:
        lines += ["Not measured:", ""] + [f"- {LABELS[k]}: {why}" for k, why in missing.items()] + [""]
    lines += ["## Games", "", "| game | character | turns | " + " | ".join(LABELS[k] for k in KEYS[:8]) + " |",
              "| --- | --- | --- |" + " --- |" * 8]
    for g in report["games"]:
        lines.append(f"| {g['id']} | {g['character']} | {len(g['turns'])} | "
                     + " | ".join(_f(g["summary"][k], 3) for k in KEYS[:8]) + " |")
    lines += ["", "Plots: `plots/<metric>_by_run.png`, `plots/<metric>_by_turn.png`; a contact sheet per game: "
              "`sheets/<game>.png`.", ""]
    return "\n".join(lines)


def _series(report: dict, label: str) -> dict[str, list[Series]]:
    s = report["summary"]
    return {k: [Series(label, s[k]["value"], tuple(s[k]["ci95"]) if s[k]["ci95"] else None, s[k]["by_turn"])]
            for k in KEYS}


def write_report(out: Path, report: dict, sheets: bool = True) -> None:
    write_bytes(out / REPORT_JSON, (json.dumps(report, indent=1, ensure_ascii=False) + "\n").encode())
    write_bytes(out / REPORT_MD, markdown(report).encode())
    write_plots(out / "plots", list(KEYS), _series(report, run_label(report["run"])))
    if sheets:
        for g in report["games"]:
            contact_sheet(out, g, out / "sheets" / f"{g['id']}.png")


# --- comparison -------------------------------------------------------------------------------

def read_report(folder: Path) -> dict:
    try:
        return json.loads((folder / REPORT_JSON).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EvalInputError(f"{folder}: no {REPORT_JSON} (an evaluation that has not finished: run "
                             "`animegamer eval` into it again to finish it)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise EvalInputError(f"{folder / REPORT_JSON}: not a report ({e})") from None


def compare(folders: list[Path], seed: int = 0) -> dict[str, Any]:
    """Every run against the first: each metric's difference with its 95 % interval over games."""
    reports = [read_report(f) for f in folders]
    labels = [f"{run_label(r['run'])} ({f.name})" for f, r in zip(folders, reports, strict=True)]
    base = reports[0]
    rows = {}
    for key in KEYS:
        row = []
        for r in reports[1:]:
            d = difference_ci(game_values(base["games"], key), game_values(r["games"], key), seed=seed) \
                if COMBINE[key] == "mean" else None
            row.append(None if d is None else {
                "baseline": d.baseline, "other": d.other, "difference": d.difference,
                "ci95": None if d.low is None else [d.low, d.high], "paired": d.paired, "games": d.games,
                "within_noise": d.within_noise})
        rows[key] = {"values": [r["summary"][key]["value"] for r in reports], "differences": row}
    return {"runs": [str(f) for f in folders], "labels": labels, "metrics": rows,
            "series": {k: [[lab, r["summary"][k]["value"], r["summary"][k]["ci95"], r["summary"][k]["by_turn"]]
                           for lab, r in zip(labels, reports, strict=True)] for k in KEYS},
            "not_measured": [r["not_measured"] for r in reports]}


def _diff_cell(d: dict | None) -> str:
    if d is None:
        return "—"
    if d["ci95"] is None:
        return f"{d['difference']:+.4f} (too few games for an interval)"
    verdict = "within noise" if d["within_noise"] else "beyond noise"
    return f"{d['difference']:+.4f} [{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}] {verdict}"


def compare_markdown(result: dict) -> str:
    labels = result["labels"]
    lines = ["# Comparison", "", f"Baseline: {labels[0]}. Each other run: its value, then its difference from the "
             "baseline with the 95 % bootstrap interval over games (paired when both played the same games).", "",
             "| metric | " + " | ".join(labels) + " |", "| --- |" + " --- |" * len(labels)]
    for key in KEYS:
        row = result["metrics"][key]
        cells = [_f(row["values"][0])] + [f"{_f(v)}: {_diff_cell(d)}" for v, d in
                                          zip(row["values"][1:], row["differences"], strict=True)]
        lines.append(f"| {LABELS[key]} ({BETTER[key]}er is better) | " + " | ".join(cells) + " |")
    lines.append("")
    for label, missing in zip(labels, result["not_measured"], strict=True):
        for key, why in missing.items():
            lines.append(f"- {label}: {LABELS[key]} {why}")
    return "\n".join(lines) + "\n"


def write_compare(out: Path, result: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_bytes(out / REPORT_JSON, (json.dumps(result, indent=1, ensure_ascii=False) + "\n").encode())
    write_bytes(out / REPORT_MD, compare_markdown(result).encode())
    series = {k: [Series(lab, v, tuple(ci) if ci else None, bt) for lab, v, ci, bt in result["series"][k]] for k in KEYS}
    write_plots(out / "plots", list(KEYS), series)
