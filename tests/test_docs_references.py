"""The project's knowledge stays in the project: no reference leads outside the repository.

Source comments, docs, tests, benchmarks and scripts cite ``docs/layouts.md#<section>`` for the
layouts' contracts; a clone has nothing beside the repository, so a reference to a sibling
folder cannot be followed, and a reference to a section that does not exist is as bad.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAYOUTS = REPO / "docs" / "layouts.md"
TEXT_SUFFIXES = {".py", ".md", ".sh", ".toml", ".yaml", ".yml", ".txt", ".cfg", ".ini", ""}
#: Built in pieces so that this file does not match itself.
OUTSIDE = ("../" + "shared", "model-" + "contracts")
REFERENCE = re.compile(r"layouts\.md#([\w.-]+)((?:,\s*#[\w.-]+)*)")


def _repo_files() -> list[Path]:
    files = [REPO / "README.md", REPO / "pyproject.toml", REPO / "napari.yaml",
             *sorted((REPO / ".ci").glob("*"))]
    for top in ("src", "tests", "docs", "benchmarks", "scripts"):
        files += sorted(p for p in (REPO / top).rglob("*")
                        if p.is_file() and p.suffix in TEXT_SUFFIXES
                        and "__pycache__" not in p.parts and "results" not in p.parts)
    files += sorted((REPO / "benchmarks" / "results").glob("*.md"))
    return [f for f in files if f.is_file()]


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, - for space."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def layout_anchors() -> set[str]:
    heads = re.findall(r"^#{1,6} (.+)$", LAYOUTS.read_text(encoding="utf-8"), flags=re.M)
    return {github_slug(h) for h in heads}


def test_github_slugs_drop_dots_and_keep_hyphens():
    assert github_slug("comicapp-sam3.1") == "comicapp-sam31"
    assert github_slug("Clicks and boxes on the SAM head") == "clicks-and-boxes-on-the-sam-head"


def test_no_file_cites_a_folder_outside_the_repository():
    files = _repo_files()
    assert len(files) > 100  # the walk found the source tree
    cited = [f"{f.relative_to(REPO)}:{n}" for f in files
             for n, line in enumerate(f.read_text(encoding="utf-8", errors="replace")
                                      .splitlines(), 1)
             if any(word in line for word in OUTSIDE)]
    assert not cited, f"these lines cite files outside the repository: {cited}"


def test_every_layouts_reference_names_a_section_of_the_page():
    anchors = layout_anchors()
    assert {"nso-sam3", "wkentaro-v03", "tracked-slices", "sources"} <= anchors
    broken, seen = [], 0
    for f in _repo_files():
        for match in REFERENCE.finditer(f.read_text(encoding="utf-8", errors="replace")):
            names = [match.group(1).rstrip("."), *re.findall(r"#([\w.-]+)", match.group(2))]
            for name in names:
                seen += 1
                if name.rstrip(".") not in anchors:
                    broken.append(f"{f.relative_to(REPO)}: #{name}")
    assert seen > 40 and not broken, f"no such section in docs/layouts.md: {broken}"
