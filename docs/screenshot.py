"""Regenerate docs/report.png, the README's picture of report/index.html: a real synth run (the
reference listener, rule judge), its report, and one item with a hallucinated event opened in
Debian's headless Chromium. The PNG is reduced to a 64-colour palette to stay small.

    PYTHONPATH=. python docs/screenshot.py [--out docs/report.png]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from click.testing import CliRunner
from PIL import Image
from playwright.sync_api import sync_playwright

from cafe.reports.cli import report_command
from cafe.runner.cli import run_command


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).with_name("report.png")))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "reference-synth"
        for cmd, argv in (
            (
                run_command,
                ["--version", "n50-seed0", "--limit", "45", "--quiet", "--out", str(run)],
            ),
            (report_command, [str(run), "--no-figures"]),
        ):
            res = CliRunner().invoke(cmd, argv, catch_exceptions=False)
            assert res.exit_code == 0, res.output
        judged = [json.loads(x) for x in (run / "judgements.jsonl").read_text().splitlines()]
        pick = min((j["sample_id"], j["run_index"]) for j in judged if j["error_matched"])
        page_url = (run / "report" / "index.html").as_uri() + f"#item={pick[0]}&run=0.{pick[1]}"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"))
            page = browser.new_page(viewport={"width": 1280, "height": 760})
            page.goto(page_url)
            raw = Path(tmp) / "shot.png"
            page.screenshot(path=str(raw))
            browser.close()
        Image.open(raw).convert("RGB").quantize(64).save(args.out, optimize=True)
    print(f"wrote {args.out} ({Path(args.out).stat().st_size / 1e3:.0f} kB)")


if __name__ == "__main__":
    main()
