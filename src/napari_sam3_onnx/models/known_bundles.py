"""The registered public SAM 3 ONNX exports (data for :mod:`.registry`).

Every fact comes from docs/layouts.md (its layouts and sources) or the sources named in a
bundle's ``notes``; nothing here is guessed.
"""

from __future__ import annotations

from .bundle_spec import HF, SAM_LICENSE, SAM_LICENSE_URL, BundleSpec, FileSpec
from .known_bundles_public import public_bundles


def hf_url(repo: str, revision: str, path: str) -> str:
    """Hugging Face download URL of ``path`` at ``revision`` (``resolve/<revision>/<path>``)."""
    return f"{HF}/{repo}/resolve/{revision}/{path}"


def _hub_files(repo: str, rev: str, manifest: str, prefix: str = "") -> tuple[FileSpec, ...]:
    """FileSpecs from ``sha256sum``-style lines ``<sha256 or -> <name>`` of one repo revision.

    Each file is fetched from ``<prefix><name>`` in the repo and stored flat as ``<name>``.
    """
    rows = (line.split() for line in manifest.strip().splitlines())
    return tuple(
        FileSpec(name, hf_url(repo, rev, prefix + name), None if digest == "-" else digest)
        for digest, name in rows
    )


def _unpublished(*names: str) -> tuple[FileSpec, ...]:
    """FileSpecs for files that no hub publishes (placed by hand)."""
    return tuple(FileSpec(name, "") for name in names)


#: CLIP's BPE merges, which SAM 3's text prompts need and no SAM 3 ONNX repo ships. The SHA-256 and
#: size are those of the identical copy inside the osam 0.8.1 wheel (measured); the hash is
#: checked after download, so the unpinned branch cannot slip in a different file.
CLIP_BPE = FileSpec(
    "bpe_simple_vocab_16e6.txt.gz",
    "https://github.com/openai/CLIP/raw/main/clip/bpe_simple_vocab_16e6.txt.gz",
    "924691ac288e54409236115652ad4aa250f48203de50a9e4722a6ecd48d6804a",
    1356917,
)

_WK3_REPO = "wkentaro/sam3-onnx-models-v0.3.0"
_WK3_REV = "895f3980b24a88249898cbe5a44571b15dec2a7f"
_WK3_FILES = _hub_files(
    _WK3_REPO,
    _WK3_REV,
    """
    c6f3769e9d42573806c34b663d6100b3827a4c0ecba6f45dbf39b8f3906be725 sam3_image_encoder.onnx
    03bd50b0703e2b04e2193ca831b7f9d5ecf40bc5287cc59b1970f56ab800c995 sam3_image_encoder.onnx.data
    b3b465935c9bf4cf5efd950589741f3da5eec9e9bfe459576989cbe565331b53 sam3_language_encoder.onnx
    1b03dabc657c1f2887d1b8ce2a3537467d4c033ea1f8c8be141fbca55e4b95f7 sam3_language_encoder.onnx.data
    bbc216dbf3de4742f692c2a0a0fd215ea8957956002a05f28150040a88b5dc1a sam3_decoder.onnx
    - LICENSE
    """,
)
_HFT_REPO = "onnx-community/sam3-tracker-ONNX"
_HFT_REV = "429305c8a5b3de597243d919a07e4e6bdcd00ef7"
_HFT_FILES = _hub_files(
    _HFT_REPO,
    _HFT_REV,
    """
    - vision_encoder.onnx
    - vision_encoder.onnx_data
    - prompt_encoder_mask_decoder.onnx
    - prompt_encoder_mask_decoder.onnx_data
    """,
    prefix="onnx/",
)
_PAG_EXPORTED = _unpublished(
    *(
        f"{stem}_{profile}.onnx"
        for profile in ("single", "multi")
        for stem in (
            "image_decoder",
            "image_decoder_mask",
            "image_decoder_singlemask",
            "image_decoder_mask_singlemask",
            "memory_attention",
            "memory_encoder",
        )
    ),
    "video_constants_single.npz",
    "video_constants_multi.npz",
)
_SX_REPO = "nrl-ai/samexporter-onnx-models"
_SX_FILES = _hub_files(
    _SX_REPO,
    "main",
    """
    - sam3_image_encoder.onnx
    - sam3_language_encoder.onnx
    - sam3_decoder.onnx
    - sam3_decoder.onnx.data
    """,
    prefix="sam3/",
)
_JAX_REPO = "jax-image-tools/sam3-video-onnx"
_JAX_FILES = _hub_files(
    _JAX_REPO,
    "main",
    """
    - vision_encoder.onnx
    - mask_decoder.onnx
    - memory_attention.onnx
    - memory_encoder.onnx
    - constants.json
    """,
)
_COMIC_REPO = "comicbox/sam3.1-comicapp-onnx"
_COMIC_FILES = _hub_files(
    _COMIC_REPO,
    "main",
    """
    - sam31_image_encoder.onnx
    - sam31_prompt_side.onnx
    - sam31_prompt_side.onnx.data
    - sam31_prompt_box.onnx
    - sam31_prompt_box.onnx.data
    - LICENSE
    """,
)
_NO_HASH = (
    "No SHA-256 or exact byte size is published; the first download's hashes are "
    "recorded beside the files and later copies are checked against them."
)
_UNPINNED = "No revision is pinned in any source found, so 'main' is used: the files may change."

#: The toy model (not SAM 3): built on this machine in a second, no download, every workflow.
TOY = BundleSpec(
    id="toy",
    title="Toy model (built here, no download; not SAM 3)",
    layout="nso-sam3",
    files=(),
    source_repo="",
    revision="",
    licence_name="BSD-3-Clause",
    licence_url="https://opensource.org/license/bsd-3-clause",
    capabilities=frozenset({"encode", "clicks", "boxes", "text", "exemplars", "memory"}),
    precision="fp32",
    notes="Tiny hand-written graphs in this plugin's nso-sam3 layout that outline bright blobs "
    "(napari_sam3_onnx.toy.bundle), so every tab can be tried on the sample without "
    "weights. Needs the 'onnx' package (pip install 'napari-sam3-onnx[toy]'). Not SAM 3.",
    builder="toy",
)

KNOWN_BUNDLES: tuple[BundleSpec, ...] = (
    TOY,
    BundleSpec(
        id="wkentaro-v0.3",
        title="SAM 3 concept search (wkentaro v0.3.0, fp32)",
        layout="wkentaro-v0.3",
        files=(*_WK3_FILES, CLIP_BPE),
        source_repo=_WK3_REPO,
        revision=_WK3_REV,
        licence_name=SAM_LICENSE,
        licence_url=f"{HF}/{_WK3_REPO}/blob/{_WK3_REV}/LICENSE",
        capabilities=frozenset({"encode", "text", "exemplars"}),
        precision="fp32",
        notes="Revision, graph hashes and licence URL as pinned by osam 0.8.1 "
        "(osam/_models/sam3/_models.py, PyPI wheel) [OSAM]. One exemplar-box slot; score cut "
        "at 0.5 inside the decoder. Sizes are not published; the LICENSE copy is checked by "
        "its first-download hash.",
    ),
    BundleSpec(
        id="wkentaro-v0.6",
        title="SAM 3 concept search and clicks (wkentaro v0.6.0)",
        layout="wkentaro-v0.6",
        files=_unpublished(
            "sam3_image_encoder.onnx",
            "sam3_language_encoder.onnx",
            "sam3_decoder.onnx",
            "sam3_point_decoder.onnx",
        ),
        source_repo="",
        revision="",
        licence_name=SAM_LICENSE,
        licence_url=SAM_LICENSE_URL,
        capabilities=frozenset({"encode", "clicks", "boxes", "text", "exemplars"}),
        precision="fp32",
        notes="No hub repository, file listing or hash for v0.6.0 was found (what "
        "docs/layouts.md#wkentaro-v06 says rests on a published review only). Place the "
        "four graphs, and any external-data files they name, in the folder by hand. 16 "
        "exemplar slots.",
    ),
    BundleSpec(
        id="samexporter-0.5",
        title="SAM 3 concept search, raw heads (samexporter 0.5.0)",
        layout="samexporter-0.5",
        files=(*_SX_FILES, CLIP_BPE),
        source_repo=_SX_REPO,
        revision="main",
        licence_name=SAM_LICENSE,
        licence_url=SAM_LICENSE_URL,
        capabilities=frozenset({"encode", "text", "exemplars"}),
        precision="fp32",
        notes="Files under sam3/ of nrl-ai/samexporter-onnx-models, exported from facebook/sam3 "
        "3c879f39826c281e95690f02c7821c4de09afae7 (samexporter 0.5.0 README) [SX]. The card "
        f"says checksums are kept in the repo, but they could not be read. {_UNPINNED} "
        f"{_NO_HASH} 8 exemplar slots; scores are thresholded outside the graph.",
    ),
    BundleSpec(
        id="hf-tracker",
        title="SAM 3 clicks and boxes (onnx-community tracker, fp32)",
        layout="hf-tracker",
        files=_HFT_FILES,
        source_repo=_HFT_REPO,
        revision=_HFT_REV,
        licence_name=SAM_LICENSE,
        licence_url=SAM_LICENSE_URL,
        capabilities=frozenset({"encode", "clicks", "boxes"}),
        precision="fp32",
        notes="Revision and file paths as frozen by pagarcia/sam3-onnx-cpp "
        "(fetch_onnx_models.sh, README) [PAG]; the files sit under onnx/ in the repo and are "
        f"stored flat here. fp16 variants (*_fp16.onnx) also exist. {_NO_HASH}",
    ),
    BundleSpec(
        id="pagarcia-tracker",
        title="SAM 3 clicks, boxes and propagation (pagarcia tracker)",
        layout="pagarcia-tracker",
        files=_HFT_FILES + _PAG_EXPORTED,
        source_repo=_HFT_REPO,
        revision=_HFT_REV,
        licence_name=SAM_LICENSE,
        licence_url=SAM_LICENSE_URL,
        capabilities=frozenset({"encode", "clicks", "boxes", "memory"}),
        precision="fp32",
        notes="The image pair is the onnx-community tracker (downloaded). The tracker graphs "
        "and video_constants_*.npz are not published: export them with "
        "github.com/pagarcia/sam3-onnx-cpp export/onnx_export.py (Meta sam3 source "
        "86ed77094094e5cabb16b0414ec60c5ba9ce0a0f) and copy them into the folder [PAG]. "
        f"Memory banks hold 2 (single) or 4 (multi) frames. {_NO_HASH}",
    ),
    BundleSpec(
        id="autognosi-int8",
        title="SAM 3 text, clicks and boxes (Autognosi int8)",
        layout="autognosi-int8",
        files=(),
        source_repo="Autognosi/sam3-onnx-vulkan",
        revision="main",
        licence_name=SAM_LICENSE,
        licence_url=SAM_LICENSE_URL,
        capabilities=frozenset({"encode", "clicks", "boxes", "text"}),
        precision="int8",
        notes="Five graphs (vision_encoder, text_encoder, detector, tracker_vision_encoder, "
        "prompt_decoder; about 1.5 GB in all per its card) [docs/layouts.md#autognosi-int8]. The "
        "exact file names could not be read, so no file list is pinned: download the "
        "repository by hand (hf download Autognosi/sam3-onnx-vulkan) into the folder. No "
        f"exemplars, no video memory. {_UNPINNED}",
    ),
    BundleSpec(
        id="jax-video",
        title="SAM 3 clicks and propagation (jax-image-tools video, fp32)",
        layout="jax-video",
        files=_JAX_FILES,
        source_repo=_JAX_REPO,
        revision="main",
        licence_name=SAM_LICENSE,
        licence_url=SAM_LICENSE_URL,
        capabilities=frozenset({"encode", "clicks", "boxes", "memory"}),
        precision="fp32",
        notes="File names and sizes from the model card: 1733.6 / 17.0 / 33.0 / 5.3 MB [JAX]. "
        f"{_UNPINNED} {_NO_HASH} Tensor names are read from the graphs at load time.",
    ),
    BundleSpec(
        id="comicapp-sam3.1",
        title="SAM 3.1 concept and box prompts (ComicApp, fp16 encoder)",
        layout="comicapp-sam3.1",
        files=_COMIC_FILES,
        source_repo=_COMIC_REPO,
        revision="main",
        licence_name=SAM_LICENSE,
        licence_url=f"{HF}/{_COMIC_REPO}/blob/main/LICENSE",
        capabilities=frozenset({"encode", "boxes"}),
        precision="mixed",
        notes="Card: encoder fp16 910 MB, concept graph fp32 121 MB, box graph fp32 134 MB, "
        "SAM License copy as LICENSE [COMIC]. The card writes the weights as '+ .data'; the "
        "'.onnx.data' names are read from that and may differ. The concept graph's text "
        "inputs are undocumented, so 'text' is not claimed until an adapter confirms it. "
        f"{_UNPINNED} {_NO_HASH}",
    ),
    *public_bundles(CLIP_BPE),
)
