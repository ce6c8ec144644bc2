"""What `vglobal simulate` prints and writes when policies differ in what they finish: every
policy judged on the same jobs (an unfinished job counted to the common horizon), the jobs no
policy can place named with the reason, no NaN anywhere, and a one-line verdict."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from volcano_global.cli.main import app

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "docs" / "examples" / "simulate"
TRACE = f"csv:{EXAMPLES / 'trace-example.csv'}"


def run(scenario: str, out: Path) -> str:
    args = ["simulate", "--scenario", str(EXAMPLES / scenario), "--trace", TRACE]
    args += ["--policy", "cpsat", "--policy", "first-fit", "--out", str(out)]
    result = CliRunner().invoke(app, args, terminal_width=300)
    assert result.exit_code == 0, result.output
    return result.output


def seconds(row: str) -> list[float]:
    return [float(v.replace(",", "")) for v in re.findall(r"([\d,]+) s\b", row)]


def test_first_fit_leaving_the_gangs_waiting_is_not_shown_ahead(tmp_path: Path) -> None:
    output = run("small-fleet.yaml", tmp_path)
    bound = float(re.search(r"avg JCT >= ([\d,]+) s", output)[1].replace(",", ""))
    rows = {line.split()[1]: line for line in output.splitlines() if line.startswith("│")}
    cpsat, first_fit = seconds(rows["cpsat"])[0], seconds(rows["first-fit"])[0]
    assert "12/14" in rows["first-fit"] and "14/14" in rows["cpsat"]
    assert bound <= cpsat < first_fit  # first-fit's two waiting gangs count to cpsat's end
    assert "the last finish of any policy" in output
    assert "Verdict: cpsat is best on these jobs: 14/14 finished" in output
    assert "nan" not in output


def test_jobs_no_policy_can_place_are_named_with_why_and_json_has_no_nan(
    tmp_path: Path,
) -> None:
    output = run("four-clusters.yaml", tmp_path)  # H100 only; three jobs ask for V100
    assert "3 no policy can place, left out" in " ".join(output.split())  # the title wraps
    for job in ("finetune-bert", "llama-7b-pretrain", "gpt-13b-pretrain"):
        assert f"left out: {job}: no cluster has GPU model V100 (fleet: H100)" in output
    assert "Verdict: cpsat and first-fit tie (11/11 finished" in output
    assert "nan" not in output and "- / - (0)" in output  # no large gangs: "-", not nan
    for name in ("comparison.json", "summary.json"):
        text = (tmp_path / name).read_text()
        json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        assert "NaN" not in text
    comparison = json.loads((tmp_path / "comparison.json").read_text())
    assert comparison["policies"][0]["large_avg_jct_s"] is None
    assert set(comparison["left_out"]) == {"finetune-bert", "llama-7b-pretrain", "gpt-13b-pretrain"}
    assert comparison["verdict"].startswith("Verdict: cpsat and first-fit tie")
    assert "nan" not in (tmp_path / "summary.csv").read_text()
