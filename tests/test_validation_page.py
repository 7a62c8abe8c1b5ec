"""``validation.html`` drawn by matplotlib: one inline SVG per fitted group, axis labels in
the one number format and inside the figure, nothing fetched, the same page twice."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from libra_des.hardware.profiles.fitting import fit_profile
from libra_des.hardware.profiles.profile import load_profile
from tests.test_profile import synthetic

pytest.importorskip("matplotlib")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def page() -> str:
    from libra_des.calibrate.page import page as draw

    sizes = 2.0 ** np.arange(12, 31, 2)
    secs = 20e-6 + sizes / 150e9  # an alpha-beta collective: 20 µs + size / 150 GB/s
    shipped = load_profile(ROOT / "calibration/profiles/h200-sxm.json")
    measured = shipped.model_copy(update={"samples": synthetic("all_reduce", sizes, secs)})
    prof, results = fit_profile(measured, cv=True)
    text = draw(prof, results)
    assert draw(prof, results) == text  # deterministic: no date, fixed ids
    return text


def test_one_svg_per_group_and_nothing_to_fetch(page: str) -> None:
    assert page.startswith("<!doctype html>") and page.count("<svg") >= 1
    assert not re.search(r'(?:src|href)="(?!#)', page)  # only in-page references
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page


def test_labels_are_text_in_the_one_format(page: str) -> None:
    ticks = re.findall(r"<text[^>]*>([^<]*)</text>", page)
    assert "time" in ticks and "message size" in ticks
    assert any(re.fullmatch(r"[\d.]+ (?:ns|µs|ms|s)", t) for t in ticks), ticks
    assert not [t for t in ticks if re.search(r"\de[+-]\d|\$", t)], ticks  # no raw exponents


def test_every_svg_holds_its_drawing(page: str) -> None:
    """The SVG's viewBox is the tight box of what it draws: no label outside it."""
    for svg in re.findall(r"<svg.*?</svg>", page, flags=re.S):
        box = re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg)
        assert box is not None
        width, height = float(box.group(1)), float(box.group(2))
        for x, y in re.findall(r'<text[^>]*? x="([-\d.]+)" y="([-\d.]+)"', svg):
            assert -1 <= float(x) <= width + 1 and -1 <= float(y) <= height + 1
